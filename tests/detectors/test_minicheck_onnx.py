"""MiniCheckJudge on onnxruntime with no PyTorch: the ONNX export of the tiny RoBERTa checkpoint
(``fixtures/minicheck/roberta-onnx``, written by ``export_onnx``) scores within 1e-4 of the
authors' code on the same weights, without importing torch or transformers, from several threads
at once and after pickling. Needs the ``detectors`` extra (numpy, onnxruntime, tokenizers, nltk),
which requirements-dev.txt installs; ``test_minicheck.py`` exports all three architectures and
compares them with PyTorch where PyTorch is installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw

HERE = Path(__file__).parent / "fixtures" / "minicheck"
EXPORT = HERE / "roberta-onnx"
ROWS: list[dict[str, Any]] = json.loads((HERE / "reference.json").read_text("utf-8"))["models"][
    "roberta"
]
CLOSE = 1e-4

_missing = [
    m for m in ("numpy", "onnxruntime", "tokenizers", "nltk") if not importlib.util.find_spec(m)
]
if _missing:
    if os.environ.get("CI"):
        pytest.fail(f"the detectors extra is missing in CI ({', '.join(_missing)})", pytrace=False)
    pytest.skip('needs the detectors extra: pip install -e ".[detectors]"', allow_module_level=True)


@pytest.fixture(scope="module")
def judge() -> gw.MiniCheckJudge:
    return gw.MiniCheckJudge(EXPORT)


def test_the_export_scores_as_the_authors_code_without_pytorch() -> None:
    script = (
        "import json, sys\n"
        "import groundwatch as gw\n"
        f"rows = json.loads(open({str(HERE / 'reference.json')!r}).read())['models']['roberta']\n"
        f"judge = gw.MiniCheckJudge({str(EXPORT)!r})\n"
        "got = [judge.support(r['document'], r['claims']) for r in rows]\n"
        "print(json.dumps({'runtime': judge.runtime, 'got': got,\n"
        "    'loaded': sorted(m for m in ('torch', 'transformers') if m in sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["runtime"] == "onnx" and out["loaded"] == []
    for got, row in zip(out["got"], ROWS, strict=True):
        assert got == pytest.approx(row["support"], abs=CLOSE)


def test_threads_share_it_and_it_pickles(judge: gw.MiniCheckJudge) -> None:
    rows = ROWS[:3] * 2
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda r: judge.support(r["document"], r["claims"]), rows))
    for got, row in zip(results, rows, strict=True):
        assert got == pytest.approx(row["support"], abs=CLOSE)
    clone = pickle.loads(pickle.dumps(judge))
    assert clone.support(ROWS[0]["document"], ROWS[0]["claims"]) == pytest.approx(
        ROWS[0]["support"], abs=CLOSE
    )


def test_the_judge_reads_every_claim_of_an_answer(judge: gw.MiniCheckJudge) -> None:
    row = ROWS[0]  # claims at 0.76 and 0.21
    evaluation = gw.evaluate(" ".join(row["claims"]), [row["document"]], judge=judge)
    assert [c.verdict for c in evaluation.claims][1] == "unsupported"
    assert evaluation.label == "hallucinated"
    assert evaluation.hallucination_probability == pytest.approx(1 - min(row["support"]), abs=CLOSE)


def test_weights_written_one_file_each_are_gathered_beside_the_graph(tmp_path: Path) -> None:
    """Over 2 GB (Flan-T5-large) PyTorch writes a file per weight; the export keeps one."""
    onnx = pytest.importorskip("onnx")
    from groundwatch.judging.judges.minicheck._export import _save_graph

    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir()
    out.mkdir()
    graph = onnx.load(str(EXPORT / "model.onnx"))
    onnx.save_model(
        graph,
        str(scratch / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=False,
        size_threshold=0,
    )
    assert len(list(scratch.iterdir())) > 10
    _save_graph(scratch / "model.onnx", out / "model.onnx")
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "model.onnx.data"]
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (out / name).write_bytes((EXPORT / name).read_bytes())
    row = ROWS[0]
    got = gw.MiniCheckJudge(out).support(row["document"], row["claims"])
    assert got == pytest.approx(row["support"], abs=CLOSE)
