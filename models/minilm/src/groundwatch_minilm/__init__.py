"""all-MiniLM-L6-v2 as an int8 ONNX file, the model of groundwatch's ``SemanticJudge``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["model_path"]


def model_path() -> Path:
    """The path of ``model.onnx`` inside this installed package."""
    return Path(__file__).resolve().parent / "model.onnx"
