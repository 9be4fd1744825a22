"""HHEMJudge without its extras: the one line that installs them, from the constructor and
from ``--judge hhem``. Runs everywhere (the missing package is simulated)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch.judging import registry
from groundwatch.judging.judges._detectors import choose_runtime


def _checkpoint(folder: Path, onnx: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "HHEMv2"}')
    if onnx:
        (folder / "model.onnx").write_bytes(b"")
    return folder


def test_a_checkpoint_without_pytorch_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    model = _checkpoint(tmp_path / "hhem")
    with pytest.raises(ImportError, match=r"pip install .*\[detectors-torch\]"):
        gw.HHEMJudge(model)
    options = registry.JudgeOptions(model=str(model))
    with pytest.raises(registry.UsageError, match=r"--judge hhem: .*\[detectors-torch\]"):
        registry.build("hhem", options)


def test_an_onnx_export_without_onnxruntime_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    model = _checkpoint(tmp_path / "onnx", onnx=True)
    assert choose_runtime(model) == "onnx"
    with pytest.raises(ImportError, match=r"pip install .*\[detectors\]"):
        gw.HHEMJudge(model)


def test_the_runtime_is_chosen_by_the_folder(tmp_path: Path) -> None:
    published = _checkpoint(tmp_path / "published")
    assert choose_runtime(published) == "torch"
    assert choose_runtime("vectara/hallucination_evaluation_model") == "torch"
    with pytest.raises(ValueError, match="export-onnx"):
        choose_runtime(published, "onnx")
    with pytest.raises(ValueError, match="runtime must be"):
        choose_runtime(published, "tensorflow")


def test_the_detector_judges_need_a_model() -> None:
    for name in ("hhem", "minicheck", "lettucedetect"):
        assert name in registry.names()
        with pytest.raises(registry.UsageError, match=f"--judge {name} needs --model"):
            registry.build(name)


def test_no_error_rates_ship_for_the_detectors_so_an_audit_makes_the_rate() -> None:
    from groundwatch.rates import RateTotals, estimate_rate, judge_error_rates

    totals = RateTotals()
    for i in range(100):
        totals = totals.add(i % 4 == 0, 0.8 if i % 4 == 0 else 0.1)
    for name in ("hhem", "minicheck", "lettucedetect"):
        assert judge_error_rates(name) is None
        # Without labels, no rate: nothing is called the hallucination rate until an audit.
        unaudited = estimate_rate(totals, judge=name)
        assert unaudited.method == "no_audit" and unaudited.estimate is None
    audited = totals
    for i in range(60):  # an audit whose labels follow the judge's probability
        audited = audited.add(i % 4 == 0, 0.8 if i % 4 == 0 else 0.1, label=i % 4 == 0)
    assert estimate_rate(audited, judge="hhem").method in ("ppi", "labels")
