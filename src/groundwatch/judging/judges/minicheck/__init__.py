"""MiniCheck's fact checkers as a judge: :class:`MiniCheckJudge`, and :func:`export_onnx`, what
``groundwatch export-onnx --judge minicheck`` calls.

Modules: ``_layout`` (the three checkpoints' input formats and the authors' settings),
``_chunks`` (the authors' sentence split, NLTK's Punkt with its English data bundled in
``punkt_english/``, and document chunks), ``_model`` (PyTorch or onnxruntime), ``_judge`` (the
judge), ``_export`` (the ONNX export).
"""

from __future__ import annotations

from ._export import export_onnx
from ._judge import ClaimSupport, MiniCheckJudge

__all__ = ["ClaimSupport", "MiniCheckJudge", "export_onnx"]
