"""The ONNX export of a MiniCheck checkpoint (``groundwatch export-onnx --judge minicheck``).

One graph per architecture, ``input_ids``, ``attention_mask`` -> ``logits`` of shape
``(batch, 2)`` (unsupported, supported), batch and sequence sizes free: the classifier's logits
for RoBERTa and DeBERTa-v3; for Flan-T5, the encoder and one decoder step from token 0, its
logits at the two label tokens (``T5_LABEL_TOKENS``), so no decoding loop runs outside the
graph. Beside it, the checkpoint's ``config.json`` and its tokenizer as ``transformers`` saves it
(``tokenizer.json``, whose ``tokenizers`` encoding the judge uses, and ``tokenizer_config.json``
for the end token that joins a chunk and a claim).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .._detectors import require
from .._detectors._export import quantize_int8
from ._layout import T5_LABEL_TOKENS, layout_of
from ._model import NAME, published_tokenizer

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
    """Write an ONNX export of the MiniCheck checkpoint ``model`` (a folder or a hub id) into the
    folder ``out``: ``model.onnx`` (its weights in ``model.onnx.data`` beside it over 2 GB;
    ``model.int8.onnx`` with ``int8``: the weights quantised to int8, dynamically),
    ``config.json`` and the tokenizer files. Returns ``out``.

    Needs PyTorch and transformers (the ``detectors-torch`` extra); the judge that reads the
    export needs neither. ``tokenizer`` is a folder to take the tokenizer from (default: the
    checkpoint's own).
    """
    _, torch, transformers = require("torch", NAME)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    config = transformers.AutoConfig.from_pretrained(str(model), revision=revision)
    layout = layout_of(config.to_dict())
    published = published_tokenizer(
        str(tokenizer or model), None if tokenizer else revision, layout, transformers
    )
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(tokenizer or model), revision=None if tokenizer else revision, use_fast=True
    )
    auto = (
        transformers.AutoModelForSeq2SeqLM
        if layout.seq2seq
        else transformers.AutoModelForSequenceClassification
    )
    inner = auto.from_pretrained(str(model), revision=revision, attn_implementation="eager").eval()

    module: Any = torch.nn.Module  # torch is untyped here

    class TwoLogits(module):  # type: ignore[misc]
        """The two class logits alone, so the graph has one output."""

        def __init__(self, wrapped: Any) -> None:
            super().__init__()
            self.wrapped = wrapped
            self.register_buffer("labels", torch.tensor(T5_LABEL_TOKENS), persistent=False)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            if not layout.seq2seq:
                return self.wrapped(input_ids=input_ids, attention_mask=attention_mask).logits
            start = torch.zeros_like(input_ids[:, :1])
            logits = self.wrapped(
                input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=start
            ).logits
            return logits[:, 0].index_select(1, self.labels)

    text = layout.text(
        "The bridge opened in 1925. It is 212 metres long.", "The bridge is long.", "</s>"
    )
    sample = hf_tokenizer([text, text[:40]], padding=True, return_tensors="pt")
    args = (sample["input_ids"], sample["attention_mask"])
    sizes = {0: "batch", 1: "sequence"}
    with tempfile.TemporaryDirectory() as scratch:
        graph = Path(scratch) / "model.onnx"
        with torch.inference_mode():
            torch.onnx.export(
                TwoLogits(inner).eval(),
                args,
                str(graph),
                input_names=["input_ids", "attention_mask"],
                output_names=["logits"],
                dynamic_axes={"input_ids": sizes, "attention_mask": sizes, "logits": {0: "batch"}},
                opset_version=OPSET,
                dynamo=False,
            )
        if int8:
            quantize_int8(graph, target / "model.int8.onnx")
        else:
            _save_graph(graph, target / "model.onnx")
            # The int8 graph is read first when both are there: a stale one must not be.
            (target / "model.int8.onnx").unlink(missing_ok=True)
    config.save_pretrained(str(target))
    hf_tokenizer.save_pretrained(str(target))
    # The checkpoint's own tokenizer.json, which the authors' transformers 4.x encoded with
    # (transformers 5 may save a rebuilt one: _model's docstring).
    written = target / "tokenizer.json"
    if published is not None and published.resolve() != written.resolve():
        shutil.copyfile(published, written)
    return target


def _save_graph(source: Path, target: Path) -> None:
    """Moves an exported graph into place. Over protobuf's 2 GB (Flan-T5-large in float32),
    PyTorch writes one file per weight beside the graph; those are gathered into one,
    ``model.onnx.data``, which onnxruntime reads from beside ``model.onnx``."""
    if [p.name for p in source.parent.iterdir()] == [source.name]:
        shutil.move(str(source), str(target))
        return
    onnx = importlib.import_module("onnx")
    graph = onnx.load(str(source))  # with its weights
    target.with_name(target.name + ".data").unlink(missing_ok=True)
    onnx.save_model(
        graph,
        str(target),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=target.name + ".data",
    )
