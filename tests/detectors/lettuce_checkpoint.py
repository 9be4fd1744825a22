"""A tiny LettuceDetect checkpoint in the published layout, with random weights.

LettuceDetect's English models (``KRLabsOrg/lettucedect-base-modernbert-en-v1``, the large one
and TinyLettuce, an Ettin encoder of the same architecture) are ModernBERT token classifiers
fine-tuned with ``num_labels=2`` (label 1: hallucinated), saved by ``save_pretrained`` under
transformers 4.48. The folder here has the same files and fields, at toy sizes:

* ``config.json``: ModernBERT's fields as that release writes them (``global_attn_every_n_layers``,
  ``local_attention``, the two rope thetas, ``classifier_pooling``...), ``architectures``
  ``ModernBertForTokenClassification``, ``id2label`` ``LABEL_0`` / ``LABEL_1``; the local
  attention window is 8 tokens, so the sliding-window layers matter on the test's inputs;
* ``model.safetensors``: the weight names of ``ModernBertForTokenClassification``
  (``model.layers.N.attn.Wqkv.weight``, ``head.dense.weight``, ``classifier.weight``...), drawn
  from a seeded generator and scaled so that the classifier flags some tokens and not others;
* ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``: ModernBERT's
  tokenizer design (NFC, byte-level BPE without a prefix space, offsets trimmed, the special
  tokens ``[UNK] [CLS] [SEP] [PAD] [MASK]`` after the merges, the pair template ``[CLS] A [SEP]
  B [SEP]``) with a vocabulary trained here on a fixed corpus (deterministic).

Needs torch, transformers and tokenizers (callers guard).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")

CORPUS = (
    "The Eiffel Tower is 330 metres tall and was finished in 1889 for the World's Fair. "
    "It was designed by the company of Gustave Eiffel and is made of wrought iron. "
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville; today the business employs 250 people and sells olives in 12 countries. "
    "Briefly answer the following question: Bear in mind that your response should be "
    "strictly based on the following passages. In case the passages do not contain the "
    'necessary information to answer the question, please reply with: "Unable to answer '
    'based on given passages." output: passage Summarize the following text: '
    "Die Firma wurde 1998 gegründet. La société emploie 250 personnes. 公司成立于1998年。"
)

TINY = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "local_attention": 8,
    "max_position_embeddings": 1024,
}


def _tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(
        add_prefix_space=False, trim_offsets=True, use_regex=True
    )
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    tok.add_special_tokens(list(SPECIALS))  # after the merges, as in ModernBERT's vocabulary
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def _config(vocab: int, ids: dict[str, int], layout: dict[str, Any]) -> dict[str, Any]:
    return {
        "_name_or_path": "answerdotai/ModernBERT-base",
        "architectures": ["ModernBertForTokenClassification"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ids["[CLS]"],
        "classifier_activation": "gelu",
        "classifier_bias": False,
        "classifier_dropout": 0.0,
        "classifier_pooling": "mean",
        "cls_token_id": ids["[CLS]"],
        "decoder_bias": True,
        "deterministic_flash_attn": False,
        "embedding_dropout": 0.0,
        "eos_token_id": ids["[SEP]"],
        "global_attn_every_n_layers": 3,
        "global_rope_theta": 160000.0,
        "gradient_checkpointing": False,
        "hidden_activation": "gelu",
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "initializer_cutoff_factor": 2.0,
        "initializer_range": 0.02,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1},
        "layer_norm_eps": 1e-05,
        "local_rope_theta": 10000.0,
        "mlp_bias": False,
        "mlp_dropout": 0.0,
        "model_type": "modernbert",
        "norm_bias": False,
        "norm_eps": 1e-05,
        "pad_token_id": ids["[PAD]"],
        "position_embedding_type": "absolute",
        "reference_compile": True,
        "repad_logits_with_grad": False,
        "sep_token_id": ids["[SEP]"],
        "sparse_pred_ignore_index": -100,
        "sparse_prediction": False,
        "torch_dtype": "float32",
        "transformers_version": "4.48.0",
        "vocab_size": vocab,
        **layout,
    }


def modernbert_folder(
    path: Path,
    seed: int = 0,
    layout: dict[str, Any] | None = None,
    vocab_size: int = 400,
    bias: tuple[float, float] = (0.5, -0.5),
) -> Path:
    """Write the checkpoint into ``path`` (created) and return it. ``layout`` overrides the
    toy sizes; ``bias`` is the classifier's (a large first value: nothing flagged)."""
    import torch
    from safetensors.torch import save_file
    from transformers import ModernBertConfig, ModernBertForTokenClassification

    path.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(vocab_size)
    tok.save(str(path / "tokenizer.json"))
    ids = {name: tok.token_to_id(name) for name in SPECIALS}
    vocab = tok.get_vocab_size()
    config = _config(vocab, ids, {**TINY, **(layout or {})})
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    special = {
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "unk_token": "[UNK]",
    }
    (path / "special_tokens_map.json").write_text(json.dumps(special, indent=2), "utf-8")
    added = {
        str(ids[name]): {
            "content": name,
            "lstrip": name == "[MASK]",
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for name in SPECIALS
    }
    tokenizer_config = {
        "added_tokens_decoder": added,
        "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 8192,
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), "utf-8")

    model = ModernBertForTokenClassification(ModernBertConfig.from_pretrained(path))
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("norm.weight"):
            value = torch.ones_like(tensor)
        elif tensor.dim() == 1:
            value = torch.randn(tensor.shape, generator=generator) * 0.1
        else:
            value = torch.randn(tensor.shape, generator=generator) / tensor.shape[-1] ** 0.5
        state[name] = value.contiguous()
    # A classifier whose two logits differ by a few units: some tokens flagged, some not.
    state["classifier.weight"] = torch.randn((2, config["hidden_size"]), generator=generator) * 0.4
    state["classifier.bias"] = torch.tensor(bias)
    state.pop("decoder.weight", None)  # no LM head in a token classifier
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path


EUROBERT_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|mask|>")


def eurobert_folder(path: Path, seed: int = 0) -> Path:
    """A tiny multilingual LettuceDetect checkpoint (``KRLabsOrg/lettucedect-210m-eurobert-*``
    style): a EuroBERT token classifier whose ``config.json`` names the EuroBERT repository's
    own code in ``auto_map``, as the published ones do, with a Llama-3-style byte-level BPE
    tokenizer (``<|begin_of_text|> A <|end_of_text|> B <|end_of_text|>``). Loading it must not
    need that code: transformers 5.3 and later have EuroBERT built in."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import processors
    from transformers import EuroBertConfig, EuroBertForTokenClassification

    path.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(400)
    tok.add_special_tokens(list(EUROBERT_SPECIALS))
    ids = {name: tok.token_to_id(name) for name in EUROBERT_SPECIALS}
    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0 {eos}:0",
        pair=f"{bos}:0 $A:0 {eos}:0 $B:0 {eos}:0",
        special_tokens=[(bos, ids[bos]), (eos, ids[eos])],
    )
    tok.save(str(path / "tokenizer.json"))
    remote = "EuroBERT/EuroBERT-210m--"
    config = {
        "architectures": ["EuroBertForTokenClassification"],
        "auto_map": {
            "AutoConfig": remote + "configuration_eurobert.EuroBertConfig",
            "AutoModel": remote + "modeling_eurobert.EuroBertModel",
            "AutoModelForMaskedLM": remote + "modeling_eurobert.EuroBertForMaskedLM",
            "AutoModelForTokenClassification": remote
            + "modeling_eurobert.EuroBertForTokenClassification",
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ids[bos],
        "clf_pooling": "late",
        "eos_token_id": ids[eos],
        "head_dim": 8,
        "hidden_act": "silu",
        "hidden_dropout": 0.0,
        "hidden_size": 32,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1},
        "mask_token_id": ids["<|mask|>"],
        "max_position_embeddings": 8192,
        "mlp_bias": False,
        "model_type": "eurobert",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 4,
        "pad_token_id": ids[eos],
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 250000,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.51.3",
        "use_cache": False,
        "vocab_size": tok.get_vocab_size(),
    }
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    tokenizer_config = {
        "bos_token": bos,
        "eos_token": eos,
        "mask_token": "<|mask|>",
        "pad_token": eos,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 8192,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), "utf-8")
    model = EuroBertForTokenClassification(EuroBertConfig.from_pretrained(path))
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("norm.weight"):
            value = torch.ones_like(tensor)
        elif tensor.dim() == 1:
            value = torch.randn(tensor.shape, generator=generator) * 0.1
        else:
            value = torch.randn(tensor.shape, generator=generator) / tensor.shape[-1] ** 0.5
        state[name] = value.contiguous()
    state["classifier.weight"] = torch.randn((2, 32), generator=generator) * 0.4
    state["classifier.bias"] = torch.tensor([0.5, -0.5])
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path
