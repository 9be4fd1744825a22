"""Which runtime reads a detector's model, and the imports each runtime needs.

A model folder as its authors publish it (``config.json`` and PyTorch or safetensors weights),
or a Hugging Face Hub id, is run by PyTorch through ``transformers`` (the ``detectors-torch``
extra). A folder that ``groundwatch export-onnx`` wrote holds an ONNX graph (one of
:data:`ONNX_NAMES`) and is run by onnxruntime with ``tokenizers`` (the ``detectors`` extra), with
no PyTorch in the application.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

from ...._shared.errors import install_hint

Runtime = Literal["torch", "onnx"]
"""``"torch"``: PyTorch through ``transformers``; ``"onnx"``: onnxruntime on an ONNX export."""

ONNX_NAMES = ("model.int8.onnx", "model.onnx")
"""The ONNX graph of an export folder, first found first (``export-onnx --int8`` writes the
first name, ``export-onnx`` the second)."""

_MODULES: dict[str, tuple[str, ...]] = {
    "onnx": ("numpy", "onnxruntime", "tokenizers"),
    "torch": ("numpy", "torch", "transformers"),
}
_EXTRA = {"onnx": "detectors", "torch": "detectors-torch"}
_WHAT = {
    "onnx": "runs an ONNX export with numpy, onnxruntime and tokenizers",
    "torch": "runs a checkpoint as published (or a hub id) with transformers on PyTorch",
}


def onnx_file(folder: str | Path) -> Path | None:
    """The ONNX graph of an export folder (:data:`ONNX_NAMES`), or ``None``."""
    path = Path(folder)
    if not path.is_dir():
        return None
    for name in ONNX_NAMES:
        if (path / name).is_file():
            return path / name
    return None


def choose_runtime(model: str | Path, runtime: str | None = None) -> Runtime:
    """The runtime that reads ``model``: ``runtime`` when given (``"torch"`` or ``"onnx"``),
    else ``"onnx"`` for a folder holding an ONNX export and ``"torch"`` otherwise (a checkpoint
    folder or a hub id).

    Raises:
        ValueError: an unknown runtime, or ``"onnx"`` for a model without an ONNX export.
    """
    if runtime is None:
        return "onnx" if onnx_file(model) is not None else "torch"
    if runtime not in _MODULES:
        raise ValueError(f"runtime must be 'torch' or 'onnx', got {runtime!r}")
    if runtime == "onnx" and onnx_file(model) is None:
        raise ValueError(
            f"runtime='onnx' needs a folder with {' or '.join(ONNX_NAMES)}; {model} has none "
            "(write one with: groundwatch export-onnx --judge NAME --model ... --out ...)"
        )
    return "onnx" if runtime == "onnx" else "torch"


def require(runtime: Runtime, judge: str) -> tuple[Any, ...]:
    """The modules ``runtime`` needs, imported; ``ImportError`` with the line that installs
    them when one is missing (``judge`` is the class name the message starts with)."""
    try:
        return tuple(importlib.import_module(name) for name in _MODULES[runtime])
    except ImportError as exc:
        raise ImportError(f"{judge} {_WHAT[runtime]}: {install_hint(_EXTRA[runtime])}") from exc


def onnx_session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session on ``path`` with ``threads`` intra-op threads."""
    ort = importlib.import_module("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def set_torch_threads(threads: int | None) -> None:
    """PyTorch's intra-op threads, when given. PyTorch has one setting for the whole process:
    a judge given ``threads`` sets it for the application too (``None`` leaves it alone)."""
    if threads is not None:
        importlib.import_module("torch").set_num_threads(threads)
