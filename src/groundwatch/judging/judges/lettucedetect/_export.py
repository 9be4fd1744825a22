"""The ONNX export of a LettuceDetect checkpoint (``groundwatch export-onnx --judge
lettucedetect``): the graph ``input_ids``, ``attention_mask`` -> ``logits`` with the batch and
sequence sizes free, the checkpoint's ``config.json`` and the tokenizer as ``transformers``
loads it (``tokenizer.json``), so that :class:`~.LettuceDetectJudge` reads the folder with
onnxruntime and ``tokenizers`` only."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .._detectors import require
from .._detectors._export import quantize_int8
from ._model import NAME, check_labels

OPSET = 17
"""ONNX opset of the export (onnxruntime 1.18, the ``detectors`` extra's floor, reads it)."""


def export_onnx(
    model: str | Path,
    out: str | Path,
    *,
    int8: bool = False,
    revision: str | None = None,
    tokenizer: str | Path | None = None,
) -> Path:
    """Write an ONNX export of the LettuceDetect checkpoint ``model`` (a folder or a hub id)
    into the folder ``out``: ``model.onnx`` (``model.int8.onnx`` with ``int8``: the weights
    quantised to int8, dynamically), ``config.json`` and ``tokenizer.json``. Returns ``out``.

    Needs PyTorch and transformers (the ``detectors-torch`` extra); the judge that reads the
    export needs neither. ``tokenizer`` is a folder to take the tokenizer from (default: the
    checkpoint's own).
    """
    _, torch, transformers = require("torch", NAME)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    config = transformers.AutoConfig.from_pretrained(str(model), revision=revision)
    check_labels(config.to_dict(), str(model))
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(tokenizer or model), revision=None if tokenizer else revision
    )
    classifier = transformers.AutoModelForTokenClassification.from_pretrained(
        str(model), revision=revision, attn_implementation="eager"
    ).eval()

    module: Any = torch.nn.Module  # torch is imported at run time, untyped here

    class Logits(module):  # type: ignore[misc]
        """The classifier's logits alone, so the graph has one output."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

    sample = hf_tokenizer(
        "Briefly answer the following question: how tall is it? passage 1: It is 330 metres "
        "tall, and it was finished in 1889.",
        "It is 330 metres tall.",
        return_tensors="pt",
    )
    args = (sample["input_ids"], sample["attention_mask"])
    sizes = {0: "batch", 1: "sequence"}
    with tempfile.TemporaryDirectory() as scratch:
        graph = Path(scratch) / "model.onnx" if int8 else target / "model.onnx"
        with torch.inference_mode():
            torch.onnx.export(
                Logits(classifier),
                args,
                str(graph),
                input_names=["input_ids", "attention_mask"],
                output_names=["logits"],
                dynamic_axes={"input_ids": sizes, "attention_mask": sizes, "logits": sizes},
                opset_version=OPSET,
                dynamo=False,
            )
        if int8:
            quantize_int8(graph, target / "model.int8.onnx")
    config.save_pretrained(str(target))
    hf_tokenizer.backend_tokenizer.save(str(target / "tokenizer.json"))
    return target
