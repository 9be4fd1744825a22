"""The ONNX helpers the detectors' ``export_onnx`` functions share (the command is
:mod:`groundwatch.cli._export_onnx`)."""

from __future__ import annotations

from pathlib import Path


def quantize_int8(source: Path, target: Path) -> Path:
    """Dynamic int8 quantisation of the weights of ``source`` (onnxruntime's quantiser; the
    activations stay float) into ``target``; returns ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
    return target
