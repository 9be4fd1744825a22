"""A tiny HHEM-2.1-Open checkpoint in the published layout, with random weights.

``vectara/hallucination_evaluation_model`` (HHEM-2.1-Open) is a folder with:

* ``config.json``: ``model_type`` ``HHEMv2``, ``architectures``
  ``HHEMv2ForSequenceClassification``, an ``auto_map`` into the authors' remote code, and
  neither ``foundation`` nor ``prompt`` (the authors' config class defaults then apply:
  ``google/flan-t5-base`` and the premise/hypothesis prompt);
* ``model.safetensors``: the weights of the T5 token classifier the authors wrap as ``t5``:
  ``t5.transformer.shared.weight``, ``t5.transformer.encoder.block.N.layer.0.SelfAttention.
  {q,k,v,o}.weight`` (block 0 also ``relative_attention_bias.weight``), ``...layer.0.layer_norm.
  weight``, ``...layer.1.DenseReluDense.{wi_0,wi_1,wo}.weight``, ``...layer.1.layer_norm.
  weight``, ``t5.transformer.encoder.final_layer_norm.weight``, ``t5.classifier.{weight,bias}``;
  no ``t5.transformer.encoder.embed_tokens.weight`` (saved tied to ``shared`` under
  transformers 4.x, and left out of the file).

The T5 shape and the tokenizer come from the foundation model (flan-t5-base: a gated-GELU T5
encoder, a SentencePiece unigram tokenizer whose post-processor appends ``</s>``, ``<pad>`` = 0,
``</s>`` = 1, ``<unk>`` = 2). :func:`build` writes both folders at toy sizes:

* the HHEM folder as published (``config.json`` fields as above; ``foundation`` and ``prompt``
  added only when asked, to test that they are read);
* a foundation folder: a T5 ``config.json`` with flan-t5-base's fields at toy sizes, and a
  T5-style tokenizer (``tokenizer.json``: a whitespace split and Metaspace, a unigram model
  whose vocabulary is fixed here, the template ``$A </s>``), made deterministically, no
  training. No normalizer: transformers 5's ``T5Tokenizer`` replaces the file's normalizer
  with its own and 4.x keeps it, so the tokenizer has none for both to agree (the whitespace
  split already makes a run of spaces one).

The weights come from numpy's seeded generator (the same on every platform and PyTorch
version) and are scaled so that the class-1 probability spreads over (0, 1). Needs numpy,
safetensors, tokenizers (and transformers to save the tokenizer's config files).
"""

from __future__ import annotations

import json
from pathlib import Path

SEED = 20260 + 44

T5_TINY = {
    "architectures": ["T5ForConditionalGeneration"],
    "model_type": "t5",
    "d_model": 16,
    "d_kv": 8,
    "d_ff": 32,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 2,
    "feed_forward_proj": "gated-gelu",
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "layer_norm_epsilon": 1e-6,
    "dropout_rate": 0.1,
    "initializer_factor": 1.0,
    "is_encoder_decoder": True,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "decoder_start_token_id": 0,
    "tie_word_embeddings": False,
    "n_positions": 512,
    "use_cache": True,
}

HHEM_CONFIG = {
    "_name_or_path": "vectara/hallucination_evaluation_model",
    "architectures": ["HHEMv2ForSequenceClassification"],
    "auto_map": {
        "AutoConfig": "configuration_hhem_v2.HHEMv2Config",
        "AutoModelForSequenceClassification": "modeling_hhem_v2.HHEMv2ForSequenceClassification",
    },
    "model_type": "HHEMv2",
    "torch_dtype": "float32",
    "transformers_version": "4.40.2",
}

WORDS = (
    "Determine if the hypothesis is true given premise ? Premise : Hypothesis "
    "The capital of France is Berlin Paris . I am in California in United States "
    "Eiffel Tower was built 1889 and 330 metres tall designed by Gustave a company "
    "Acme Corporation started 1998 by siblings Ana Luis Ortega garage Seville employs 250 "
    "people sells olives 12 countries it not , founded iron made wrought"
).split()
CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;?!'\"-()"


def vocabulary() -> list[tuple[str, float]]:
    """The unigram vocabulary: specials, whole words (with and without the word-start mark),
    then single characters, so that any ASCII text encodes without ``<unk>``."""
    vocab: list[tuple[str, float]] = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    seen = {piece for piece, _ in vocab}
    for i, word in enumerate(dict.fromkeys(WORDS)):
        for piece in ("\u2581" + word, word):
            if piece not in seen:
                vocab.append((piece, -3.0 - 0.01 * i))
                seen.add(piece)
    vocab.append(("\u2581", -6.0))
    seen.add("\u2581")
    for ch in CHARS:
        for piece in (ch, "\u2581" + ch):
            if piece not in seen:
                vocab.append((piece, -8.0))
                seen.add(piece)
    return vocab


def write_tokenizer(folder: Path) -> int:
    """The foundation's tokenizer files into ``folder``; returns the vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = vocabulary()
    tok = Tokenizer(models.Unigram(vocab, unk_id=2, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace()]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tok.decoder = decoders.Metaspace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    fast.save_pretrained(str(folder))
    # As flan-t5-base's files say: the T5 tokenizer class, 512 tokens.
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text("utf-8"))
    config.update({"tokenizer_class": "T5Tokenizer", "model_max_length": 512, "extra_ids": 0})
    config_file.write_text(json.dumps(config, indent=2), "utf-8")
    return len(vocab)


def weights(
    vocab_size: int, seed: int = SEED, sizes: dict[str, object] | None = None
) -> dict[str, object]:
    """The published weight names at ``T5_TINY``'s sizes (or ``sizes``), drawn from numpy's
    seeded generator."""
    import numpy as np

    t5 = {**T5_TINY, **(sizes or {})}
    rng = np.random.default_rng(seed)
    d, kv, ff, heads = t5["d_model"], t5["d_kv"], t5["d_ff"], t5["num_heads"]
    inner = int(kv) * int(heads)

    def draw(shape: tuple[int, ...], scale: float) -> object:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm() -> object:
        return (1.0 + rng.standard_normal(int(d)) * 0.1).astype(np.float32)

    out: dict[str, object] = {"t5.transformer.shared.weight": draw((vocab_size, int(d)), 1.0)}
    for n in range(int(t5["num_layers"])):  # type: ignore[call-overload]
        block = f"t5.transformer.encoder.block.{n}.layer"
        for name, shape in (("q", (inner, d)), ("k", (inner, d)), ("v", (inner, d))):
            out[f"{block}.0.SelfAttention.{name}.weight"] = draw(shape, 0.4)  # type: ignore[arg-type]
        out[f"{block}.0.SelfAttention.o.weight"] = draw((int(d), inner), 0.4)
        if n == 0:
            buckets = int(t5["relative_attention_num_buckets"])  # type: ignore[call-overload]
            out[f"{block}.0.SelfAttention.relative_attention_bias.weight"] = draw(
                (buckets, int(heads)), 0.5
            )
        out[f"{block}.0.layer_norm.weight"] = norm()
        out[f"{block}.1.DenseReluDense.wi_0.weight"] = draw((int(ff), int(d)), 0.4)
        out[f"{block}.1.DenseReluDense.wi_1.weight"] = draw((int(ff), int(d)), 0.4)
        out[f"{block}.1.DenseReluDense.wo.weight"] = draw((int(d), int(ff)), 0.4)
        out[f"{block}.1.layer_norm.weight"] = norm()
    out["t5.transformer.encoder.final_layer_norm.weight"] = norm()
    out["t5.classifier.weight"] = draw((2, int(d)), 0.5)
    out["t5.classifier.bias"] = draw((2,), 0.5)
    return out


def build(
    root: Path,
    *,
    foundation_in_config: bool = False,
    prompt: str | None = None,
    sizes: dict[str, object] | None = None,
) -> tuple[Path, Path]:
    """Write the tiny HHEM folder and its foundation folder under ``root``; returns
    ``(hhem folder, foundation folder)``. ``foundation_in_config`` names the foundation
    folder in the HHEM config; ``prompt`` puts a prompt there; ``sizes`` overrides T5 sizes
    (``d_model``, ``d_ff``, ``num_heads``, ``num_layers``...)."""
    from safetensors.numpy import save_file

    hhem, foundation = root / "hhem", root / "flan-t5-tiny"
    hhem.mkdir(parents=True, exist_ok=True)
    foundation.mkdir(parents=True, exist_ok=True)
    vocab_size = write_tokenizer(foundation)
    (foundation / "config.json").write_text(
        json.dumps({**T5_TINY, **(sizes or {}), "vocab_size": vocab_size}, indent=2), "utf-8"
    )
    config = dict(HHEM_CONFIG)
    if foundation_in_config:
        config["foundation"] = str(foundation)
    if prompt is not None:
        config["prompt"] = prompt
    (hhem / "config.json").write_text(json.dumps(config, indent=2), "utf-8")
    save_file(
        weights(vocab_size, sizes=sizes), str(hhem / "model.safetensors"), metadata={"format": "pt"}
    )  # type: ignore[arg-type]
    return hhem, foundation
