"""Export the fine-tuned cross-encoder to ONNX and quantise it to int8 (dynamic).

Reads the ``save_pretrained`` folder of ``training/train_nli.py``; writes ``model.onnx`` (fp32)
and ``model.int8.onnx`` beside it, and the tokenizer in ``transformers``' format (the folder
then loads with or without its ONNX files); prints their sizes, how far the int8 graph's
probabilities move from the fp32 graph's and the transformers model's from the fp32 graph's,
and the accuracy of each graph: on the validation rows the
folder's ``manifest.json`` names (a model trained on ``shared/nli-train``; entailment against
the rest for a two-way model), else on SNLI test pairs (``--data``, ``nli_data.py`` output).

Needs ``pip install -r training/requirements.txt``. Usage::

    python training/export_nli.py --model /work/nli-run/model [--data /work/nli-run/data]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

import tokenizers  # noqa: E402
import torch  # noqa: E402

from groundwatch.judging.judges._nli_model import (  # noqa: E402
    MAX_LENGTH,
    NLIEncoder,
    TransformersEncoder,
    build_tokenizer,
    encode_pairs,
)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class _Logits(torch.nn.Module):
    """The classifier with positional inputs and one output (what ONNX wants)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).logits


def export(model_dir: Path) -> tuple[Path, Path]:
    """Write ``model.onnx`` (fp32) and ``model.int8.onnx`` (dynamic int8) into ``model_dir``,
    from its ``save_pretrained`` files; return their paths."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    wrapped = _Logits(model)
    tok, cls, sep = build_tokenizer(tokenizers)
    # Any pair traces the graph; batch and sequence stay dynamic (checked below on padded
    # batches against single pairs).
    ids, seg = encode_pairs(tok, cls, sep, [("A man plays a guitar.", "A person plays.")])[0]
    example = (
        torch.tensor([ids]),
        torch.ones((1, len(ids)), dtype=torch.long),
        torch.tensor([seg]),
    )
    fp32 = model_dir / "model.onnx"
    int8 = model_dir / "model.int8.onnx"
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    torch.onnx.export(
        wrapped,
        example,
        str(fp32),
        input_names=list(INPUTS),
        output_names=["logits"],
        dynamic_axes={**axes, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8


def save_tokenizer(model_dir: Path) -> None:
    """The training tokenizer (the bundled MiniLM vocabulary, uncased) in ``transformers``'
    format, so that the folder also loads without its ONNX files (``NLIJudge`` reads such a
    folder with transformers). No ``tokenizer.json``: with one, the ONNX runtime would use the
    folder's own tokenizer instead of the training format (the same pieces, cut differently
    when a pair is too long)."""
    from transformers import BertTokenizerFast

    vocab = build_tokenizer(tokenizers)[0].get_vocab()
    vocab_file = model_dir / "vocab.txt"
    vocab_file.write_text("".join(f"{piece}\n" for piece in sorted(vocab, key=vocab.get)))
    tokenizer = BertTokenizerFast(
        vocab_file=str(vocab_file), do_lower_case=True, model_max_length=MAX_LENGTH
    )
    tokenizer.save_pretrained(model_dir)
    (model_dir / "tokenizer.json").unlink(missing_ok=True)


def _check_rows(model: Path, data: Path, limit: int) -> tuple[list[dict[str, Any]], str]:
    """Held-out pairs with ``label`` in ``LABELS`` order (0 = entailment), and their name."""
    manifest = model / "manifest.json"
    if manifest.is_file():
        from nli_train_data import LONG_DOCUMENT, guards, read_source

        info = json.loads(manifest.read_text("utf-8"))
        wanted = set(info["valid_ids"])
        column = {"entailed": 0, "neutral": 1, "not_entailed": 1, "contradicted": 2}
        # The premises as training cut them (aligned windows of long documents).
        _, window = guards(info["hyper"]["max_length"], info["hyper"]["window"])
        rows = [
            {**r, "label": column[r["label"]]}
            for source in info["mix"]
            for r in read_source(Path(info["data"]), source)
            if r["id"] in wanted
        ]
        if window is not None:
            rows = [window(r) if r["source"] in LONG_DOCUMENT else r for r in rows]
        return rows[:limit], "nli-train validation"
    with (data / "snli_test.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line, _ in zip(fh, range(limit), strict=False)]
    return rows, "SNLI test"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("/work/nli-run/data"))
    parser.add_argument("--check-pairs", type=int, default=2000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    fp32, int8 = export(args.model)
    save_tokenizer(args.model)
    for path in (fp32, int8):
        print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")
    # What quantisation costs: accuracy of the fp32 and the int8 graph on held-out pairs, and
    # how far the int8 probabilities move from the fp32 ones.
    rows, what = _check_rows(args.model, args.data, args.check_pairs)
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    golds = [r["label"] for r in rows]
    probs = {path.name: NLIEncoder(path).probabilities(pairs) for path in (fp32, int8)}
    two_way = len(NLIEncoder(int8).labels) == 2
    sources = sorted({r.get("source", "") for r in rows})
    for name, p in probs.items():
        right = [
            (int(row.argmax()) == 0) == (g == 0) if two_way else int(row.argmax()) == g
            for row, g in zip(p, golds, strict=True)
        ]
        print(f"{name}: {what} accuracy {sum(right) / len(golds):.3f} on {len(golds)} pairs")
        for source in sources if len(sources) > 1 else []:
            mine = [ok for ok, r in zip(right, rows, strict=True) if r.get("source") == source]
            print(f"  {source}: {sum(mine) / len(mine):.3f} on {len(mine)}")
    diff = abs(probs[fp32.name] - probs[int8.name])
    print(f"int8 vs fp32: mean prob diff {float(diff.mean()):.3f}, max {float(diff.max()):.3f}")
    # The same folder read by transformers (NLIJudge's runtime for folders without ONNX).
    torch_probs = TransformersEncoder(args.model).probabilities(pairs)
    diff = abs(torch_probs - probs[fp32.name])
    print(
        f"transformers vs fp32 ONNX: mean prob diff {float(diff.mean()):.5f}, max "
        f"{float(diff.max()):.5f}"
    )
    encoder = NLIEncoder(int8)
    print(f"sha256 {encoder.sha256}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
