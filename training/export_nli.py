"""Export the fine-tuned cross-encoder to ONNX and quantise it to int8 (dynamic, per tensor).

Reads the ``save_pretrained`` folder of ``training/train_nli.py``; writes ``model.onnx`` (fp32)
and ``model.int8.onnx`` beside it, and prints their sizes and how far the int8 model's
probabilities move from the PyTorch model's on a few SNLI test pairs.

Needs ``pip install -r training/requirements.txt``. Usage::

    python training/export_nli.py --model /work/nli-run/model [--data /work/nli-run/data]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import tokenizers  # noqa: E402
import torch  # noqa: E402

from groundwatch.judging.judges._nli_model import (  # noqa: E402
    NLIEncoder,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("/work/nli-run/data"))
    args = parser.parse_args(argv)
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification

    torch.set_num_threads(1)
    model = AutoModelForSequenceClassification.from_pretrained(args.model).eval()
    wrapped = _Logits(model)
    tok, cls, sep = build_tokenizer(tokenizers)
    with (args.data / "snli_test.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(32)]
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    ids, seg = encode_pairs(tok, cls, sep, pairs[:1])[0]
    example = (
        torch.tensor([ids]),
        torch.ones((1, len(ids)), dtype=torch.long),
        torch.tensor([seg]),
    )
    fp32 = args.model / "model.onnx"
    int8 = args.model / "model.int8.onnx"
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
    for path in (fp32, int8):
        print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")
    # How much quantisation moves the output: max |p_int8 - p_torch| over the pairs.
    encoder = NLIEncoder(int8)
    quantised = encoder.probabilities(pairs)
    worst = 0.0
    agree = 0
    with torch.no_grad():
        for pair, q in zip(pairs, quantised, strict=True):
            ids, seg = encode_pairs(tok, cls, sep, [pair])[0]
            logits = wrapped(
                torch.tensor([ids]),
                torch.ones((1, len(ids)), dtype=torch.long),
                torch.tensor([seg]),
            )
            p = torch.softmax(logits, -1)[0].numpy()
            worst = max(worst, float(abs(p - q).max()))
            agree += int(p.argmax() == q.argmax())
    print(
        f"int8 vs fp32 on {len(pairs)} SNLI pairs: max prob diff {worst:.3f}, argmax agree {agree}"
    )
    print(f"sha256 {encoder.sha256}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
