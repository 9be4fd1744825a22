"""LettuceDetectJudge as a judge: its verdicts, label and probability from the model's spans;
its ONNX export against PyTorch; pickling; what it refuses.

Runs on a tiny random-weight ModernBERT checkpoint in the published layout
(``lettuce_checkpoint``). Needs PyTorch, transformers, onnx and onnxruntime: the dev
requirements leave PyTorch out, so these tests skip there; ``.ci/run``'s lettucedetect step
runs them with ``GROUNDWATCH_TEST_LETTUCEDETECT`` set, where a missing package fails them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import groundwatch as gw

from .lettuce_checkpoint import modernbert_folder

STEP = "GROUNDWATCH_TEST_LETTUCEDETECT"
_missing = [
    m for m in ("torch", "transformers", "onnx", "onnxruntime") if not importlib.util.find_spec(m)
]
if _missing:
    if os.environ.get(STEP):
        pytest.fail(f"{', '.join(_missing)} missing with {STEP} set", pytrace=False)
    pytest.skip(
        "needs PyTorch, transformers and onnxruntime (.ci/run tests it in its own step)",
        allow_module_level=True,
    )

from groundwatch.judging.judges.lettucedetect import (  # noqa: E402
    LettuceDetectJudge,
    export_onnx,
)

ONNX_TOLERANCE = 1e-4

PASSAGES = [
    "The Eiffel Tower is 330 metres tall and was finished in 1889 for the World's Fair.",
    "It was designed by the company of Gustave Eiffel and is made of wrought iron.",
]
QUESTION = "How tall is the Eiffel Tower?"
ANSWER = (
    "The Eiffel Tower is 330 metres tall. It was finished in 1925 by Ana Ortega. "
    "It is made of wrought iron."
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return modernbert_folder(tmp_path_factory.mktemp("lettuce") / "checkpoint")


@pytest.fixture(scope="module")
def judge(checkpoint: Path) -> LettuceDetectJudge:
    return LettuceDetectJudge(checkpoint)


@pytest.fixture(scope="module")
def exported(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_onnx(checkpoint, tmp_path_factory.mktemp("lettuce") / "onnx")


def test_each_claim_gets_the_spans_inside_it(judge: LettuceDetectJudge) -> None:
    reading = judge.reading(PASSAGES, ANSWER, QUESTION)
    ev = gw.evaluate(ANSWER, PASSAGES, QUESTION, judge=judge)
    assert reading.spans, "the tiny model flags nothing: the test would prove little"
    assert ev.label == "hallucinated"  # the authors' rule: any flagged span
    worst = max(p for _, _, p in reading.tokens)
    assert ev.hallucination_probability == pytest.approx(worst, abs=1e-6)
    flagged = [(s["start"] + reading.shift, s["end"] + reading.shift) for s in reading.spans]
    assert len(ev.claims) == 3
    for claim in ev.claims:
        inside = [ANSWER[max(s, claim.start) : min(e, claim.end)] for s, e in flagged]
        inside = [
            q
            for (s, e), q in zip(flagged, inside, strict=True)
            if s < claim.end and e > claim.start
        ]
        if inside:
            assert claim.verdict == "unsupported"
            assert claim.reason is not None
            for quote in inside:
                assert repr(quote) in claim.reason
        tokens = [p for s, e, p in reading.tokens if s < claim.end and e > claim.start]
        support = 1 - max(tokens)
        shown = f"this claim: supported {support:.0%}"
        assert claim.reason is not None and shown in claim.reason


def test_nothing_flagged_is_grounded(tmp_path: Path) -> None:
    quiet = LettuceDetectJudge(modernbert_folder(tmp_path / "quiet", bias=(8.0, -8.0)))
    # Claims whose numbers and names are in the passages (scoring's evidence check would
    # otherwise make a backed claim unsupported, whatever the model says).
    answer = "The Eiffel Tower is 330 metres tall. It is made of wrought iron."
    assert quiet.spans(PASSAGES, answer, QUESTION) == []
    ev = gw.evaluate(answer, PASSAGES, QUESTION, judge=quiet)
    assert ev.label == "grounded"
    assert ev.hallucination_probability is not None and ev.hallucination_probability < 0.5
    assert {c.verdict for c in ev.claims} <= {"supported", "inferred"}


def test_onnx_export_matches_pytorch(judge: LettuceDetectJudge, exported: Path) -> None:
    onnx = LettuceDetectJudge(exported)
    assert onnx.runtime == "onnx"
    assert {p.name for p in exported.iterdir()} >= {"model.onnx", "config.json", "tokenizer.json"}
    # Several sequence lengths, and several windows: the graph's sizes are free.
    for passages, answer, question in [
        (PASSAGES, ANSWER, QUESTION),
        (PASSAGES[:1], "It is 330 metres tall.", None),
        (PASSAGES * 6, ANSWER + " " + ANSWER, QUESTION),
    ]:
        a = judge.reading(passages, answer, question)
        b = onnx.reading(passages, answer, question)
        assert [(s, e) for s, e, _ in a.tokens] == [(s, e) for s, e, _ in b.tokens]
        assert (
            max(abs(p - q) for (*_, p), (*_, q) in zip(a.tokens, b.tokens, strict=True))
            <= ONNX_TOLERANCE
        )
        assert [(s["start"], s["end"]) for s in a.spans] == [
            (s["start"], s["end"]) for s in b.spans
        ]


def test_onnx_threads_and_int8(checkpoint: Path, exported: Path, tmp_path: Path) -> None:
    two = LettuceDetectJudge(exported, threads=2)
    assert two._classifier._session.get_session_options().intra_op_num_threads == 2
    int8 = export_onnx(checkpoint, tmp_path / "int8", int8=True)
    assert (int8 / "model.int8.onnx").is_file() and not (int8 / "model.onnx").exists()
    quantised = LettuceDetectJudge(int8)
    assert quantised.runtime == "onnx"
    full = LettuceDetectJudge(exported).reading(PASSAGES, ANSWER, QUESTION)
    small = quantised.reading(PASSAGES, ANSWER, QUESTION)
    assert [(s, e) for s, e, _ in full.tokens] == [(s, e) for s, e, _ in small.tokens]


def test_pickles_as_its_model(judge: LettuceDetectJudge, exported: Path) -> None:
    for original in (judge, LettuceDetectJudge(exported, lang="en", max_length=512)):
        data = pickle.dumps(original)
        assert len(data) < 20_000  # the arguments, not the weights
        copy = pickle.loads(data)
        assert copy.options == original.options and copy.runtime == original.runtime
        assert copy.spans(PASSAGES, ANSWER, QUESTION) == original.spans(PASSAGES, ANSWER, QUESTION)


def test_refuses_what_it_cannot_read(checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lang must be one of"):
        LettuceDetectJudge(checkpoint, lang="xx")
    three = tmp_path / "three"
    shutil.copytree(checkpoint, three)
    config = json.loads((three / "config.json").read_text())
    config["id2label"] = {"0": "a", "1": "b", "2": "c"}
    config["label2id"] = {"a": 0, "b": 1, "c": 2}
    (three / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no LettuceDetect token classifier"):
        LettuceDetectJudge(three)
    judge = LettuceDetectJudge(checkpoint, max_length=32)
    with pytest.raises(ValueError, match="does not fit"):
        judge.spans(PASSAGES, ANSWER, QUESTION)
    # In a judge, the same failure is an error evaluation, not an exception.
    assert gw.evaluate(ANSWER, PASSAGES, QUESTION, judge=judge).label == "error"


def test_commands_export_and_check(checkpoint: Path, tmp_path: Path) -> None:
    """``export-onnx --judge lettucedetect`` writes a folder that ``check --judge lettucedetect``
    reads with onnxruntime; ``check`` on the PyTorch checkpoint exits cleanly after its result."""
    env = {**os.environ, "PYTHONPATH": str(Path(gw.__file__).parents[1])}

    def groundwatch(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "groundwatch", *map(str, args)],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )  # fmt: skip

    out = tmp_path / "export"
    done = groundwatch(
        "export-onnx", "--judge", "lettucedetect", "--model", checkpoint, "--out", out
    )
    assert done.returncode == 0, done.stderr
    assert (out / "model.onnx").is_file()
    data = tmp_path / "answers.jsonl"
    row = {"id": "a", "question": QUESTION, "contexts": PASSAGES, "answer": ANSWER}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    for model in (checkpoint, out):
        result = tmp_path / f"{model.name}.jsonl"
        done = groundwatch(
            "check", data, "--judge", "lettucedetect", "--model", model,
            "--max-hallucination-rate", "1", "--json", result,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "terminate called" not in done.stderr
        evaluation = json.loads(result.read_text(encoding="utf-8").splitlines()[0])["evaluation"]
        assert evaluation["judge"] == "lettucedetect"
        assert evaluation["label"] == "hallucinated"
        assert any("LettuceDetect" in (c["reason"] or "") for c in evaluation["claims"])
