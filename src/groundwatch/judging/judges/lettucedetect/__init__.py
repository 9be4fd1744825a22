"""LettuceDetect's token classifiers as a judge: :class:`LettuceDetectJudge`, and
:func:`export_onnx`, what ``groundwatch export-onnx --judge lettucedetect`` calls.

Modules: ``_prompts`` (the authors' prompt templates), ``_layout`` (the model's input layout,
truncation, long contexts, token labels to spans), ``_model`` (PyTorch or onnxruntime),
``_judge`` (the judge), ``_export`` (the ONNX export).
"""

from __future__ import annotations

from ._export import export_onnx
from ._judge import LettuceDetectJudge

__all__ = ["LettuceDetectJudge", "export_onnx"]
