"""HHEMJudge against its authors' code: scores equal to the recorded outputs of
``HHEMv2ForSequenceClassification.predict`` on the same tiny weights (``fixtures/hhem/``), on the
installed transformers (4.x and 5.x both: the checkpoint's files are read without remote
code), the ONNX export within 1e-4 of PyTorch, and the full judge's verdicts by the model's rule.

PyTorch is too heavy for the README's test command: this module skips there and ``.ci/run``
runs it in its transformers step (``tests/extras.py``).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch.cli import main
from groundwatch.judging.judges import hhem as hhem_package
from groundwatch.judging.judges.hhem import _model
from groundwatch.testing import GroundwatchTelemetry, capgw  # noqa: F401

from ..extras import require_transformers_runtime
from .hhem_checkpoint import build
from .hhem_pairs import CUSTOM_PROMPT, PAIRS

require_transformers_runtime()

FIXTURE = json.loads((Path(__file__).parent / "fixtures/hhem/predict.json").read_text("utf-8"))
EXACT = 1e-5
CONTEXT = [
    "The Eiffel Tower was built in 1889 and is 330 metres tall. It was designed by the "
    "company of Gustave Eiffel and is made of wrought iron."
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hhem")
    hhem, foundation = build(root / "published")
    named, _ = build(root / "named", foundation_in_config=True, prompt=CUSTOM_PROMPT)
    onnx = hhem_package.export_onnx(hhem, root / "onnx", tokenizer=foundation)
    return {"hhem": hhem, "foundation": foundation, "named": named, "onnx": onnx, "root": root}


@pytest.fixture(scope="module")
def judge(tiny: dict[str, Path]) -> gw.HHEMJudge:
    return gw.HHEMJudge(tiny["hhem"], tokenizer=tiny["foundation"])


def test_the_published_layout_scores_as_the_authors_predict(judge: gw.HHEMJudge) -> None:
    assert judge.runtime == "torch"
    assert not list(Path(judge.model).glob("*.py"))  # no remote code to run, none needed
    assert judge.prompt == _model.PROMPT  # the config names none: the authors' default
    assert judge.consistency(PAIRS) == pytest.approx(FIXTURE["published"], abs=EXACT)
    # One pair at a time (no padding) gives the same.
    alone = [judge.consistency([pair])[0] for pair in PAIRS]
    assert alone == pytest.approx(FIXTURE["published"], abs=EXACT)


def test_a_foundation_and_prompt_in_the_config_are_read(tiny: dict[str, Path]) -> None:
    judge = gw.HHEMJudge(tiny["named"])  # no tokenizer=: the foundation the config names
    assert judge.prompt == CUSTOM_PROMPT
    assert judge.consistency(PAIRS) == pytest.approx(FIXTURE["named"], abs=EXACT)


def _differs(scores: list[float]) -> bool:
    return max(abs(a - b) for a, b in zip(scores, FIXTURE["published"], strict=True)) > 1e-3


def test_the_fixture_catches_a_drifted_prompt_label_or_tokenizer(
    tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, foundation = str(tiny["hhem"]), str(tiny["foundation"])
    # The prompt: one word changed.
    monkeypatch.setattr(_model, "PROMPT", _model.PROMPT.replace("Determine", "Decide"))
    assert _differs(_model.TorchHHEM(source, tokenizer=foundation).consistency(PAIRS))
    monkeypatch.undo()
    # The label index: class 0 read as "consistent".
    monkeypatch.setattr(_model, "CONSISTENT", 0)
    assert _differs(_model.TorchHHEM(source, tokenizer=foundation).consistency(PAIRS))
    monkeypatch.undo()
    # The foundation's tokenizer: another vocabulary order (the same pieces, other ids).
    drifted = tiny["root"] / "drifted"
    drifted.mkdir(exist_ok=True)
    for f in Path(foundation).iterdir():
        (drifted / f.name).write_bytes(f.read_bytes())
    spec = json.loads((drifted / "tokenizer.json").read_text("utf-8"))
    vocab = spec["model"]["vocab"]
    spec["model"]["vocab"] = vocab[:3] + vocab[3:][::-1]
    (drifted / "tokenizer.json").write_text(json.dumps(spec), "utf-8")
    assert _differs(_model.TorchHHEM(source, tokenizer=str(drifted)).consistency(PAIRS))
    # And the untouched one matches (the comparisons above are not always true).
    assert not _differs(_model.TorchHHEM(source, tokenizer=foundation).consistency(PAIRS))


def test_the_onnx_export_matches_pytorch(tiny: dict[str, Path], judge: gw.HHEMJudge) -> None:
    onnx = gw.HHEMJudge(tiny["onnx"], threads=2)
    assert onnx.runtime == "onnx"
    assert sorted(p.name for p in tiny["onnx"].iterdir()) == [
        "config.json",
        "model.onnx",
        "tokenizer.json",
    ]
    assert onnx.consistency(PAIRS) == pytest.approx(judge.consistency(PAIRS), abs=1e-4)
    assert onnx.consistency(PAIRS) == pytest.approx(FIXTURE["published"], abs=1e-4)


def test_the_export_command_writes_an_int8_model(tiny: dict[str, Path]) -> None:
    out = tiny["root"] / "int8"
    argv = ["export-onnx", "--judge", "hhem", "--model", str(tiny["hhem"]), "--out", str(out)]
    assert main([*argv, "--tokenizer", str(tiny["foundation"]), "--int8"]) == 0
    assert (out / "model.int8.onnx").is_file() and not (out / "model.onnx").exists()
    scores = gw.HHEMJudge(out).consistency(PAIRS)
    # Quantised weights move the scores a little, never the order of clearly apart pairs.
    assert scores == pytest.approx(FIXTURE["published"], abs=0.1)


def _labels(judge: gw.HHEMJudge, answer: str) -> tuple[str, list[str], float | None]:
    evaluation = gw.evaluate(answer, CONTEXT, judge=judge)
    return (
        evaluation.label,
        [c.verdict for c in evaluation.claims],
        evaluation.hallucination_probability,
    )


def test_the_label_is_the_models_decision(judge: gw.HHEMJudge) -> None:
    premise = "\n\n".join(CONTEXT)
    for answer in (
        "The Eiffel Tower is 330 metres tall. It was designed by the company of Gustave Eiffel.",
        "The Eiffel Tower was built in 1998. It is made of iron.",
        "The Eiffel Tower is 330 metres tall.",
        "Acme employs 250 people. The Eiffel Tower was built in 1889. It is made of iron. "
        "It is tall. Luis Ortega designed it.",
    ):
        (consistency,) = judge.consistency([(premise, answer)])
        label, verdicts, probability = _labels(judge, answer)
        assert probability == pytest.approx(1 - consistency, abs=1e-6)
        hallucinated = consistency < hhem_package.THRESHOLD
        assert label == ("hallucinated" if hallucinated else "grounded"), (answer, verdicts)
        if not hallucinated:
            assert set(verdicts) <= {"supported", "inferred"}


def test_claims_mode_decides_by_its_least_consistent_claim(
    tiny: dict[str, Path], judge: gw.HHEMJudge
) -> None:
    per_claim = gw.HHEMJudge(tiny["hhem"], tokenizer=tiny["foundation"], mode="claims")
    answer = "The Eiffel Tower is 330 metres tall. The Eiffel Tower was built in 1998."
    claims = [c.text for c in gw.evaluate(answer, CONTEXT).claims]
    scores = judge.consistency([("\n\n".join(CONTEXT), c) for c in claims])
    label, verdicts, probability = _labels(per_claim, answer)
    assert probability == pytest.approx(1 - min(scores), abs=1e-6)
    assert label == ("hallucinated" if min(scores) < 0.5 else "grounded")
    for verdict, score in zip(verdicts, scores, strict=True):
        if score < 0.5:
            assert verdict == "unsupported"


def test_it_pickles_as_its_model_and_loads_again(judge: gw.HHEMJudge) -> None:
    data = pickle.dumps(judge)
    assert len(data) < 20_000  # the model's name and options, not its weights
    clone = pickle.loads(data)
    assert clone.consistency(PAIRS) == pytest.approx(FIXTURE["published"], abs=EXACT)
    answer = "The Eiffel Tower was built in 1998. It is made of iron."
    assert _labels(clone, answer) == _labels(judge, answer)


def test_a_monitor_scores_with_it_in_its_worker_process(
    judge: gw.HHEMJudge,
    capgw: GroundwatchTelemetry,  # noqa: F811
) -> None:
    monitor = capgw.monitor(judge=judge, executor="process")
    answer = "The Eiffel Tower was built in 1998."
    monitor.record(question="When?", contexts=CONTEXT, answer=answer)
    ((_record, evaluation),) = capgw.results()
    assert evaluation.judge == "hhem" and evaluation.error is None
    assert evaluation.hallucination_probability == pytest.approx(
        _labels(judge, answer)[2], abs=1e-6
    )


def test_a_cascade_sends_only_the_doubtful_answers_to_it(judge: gw.HHEMJudge) -> None:
    cascade = gw.CascadeJudge(first=gw.LocalJudge(), then=judge)
    grounded = gw.evaluate("The Eiffel Tower is 330 metres tall.", CONTEXT, judge=cascade)
    doubtful = gw.evaluate("The tower's designer was a company.", CONTEXT, judge=cascade)
    assert cascade.total == 2 and cascade.escalated == 1
    assert grounded.model is None and doubtful.model == judge.model


def test_rules_first_keeps_the_local_judges_exact_contradictions(
    tiny: dict[str, Path],
) -> None:
    ruled = gw.HHEMJudge(tiny["hhem"], tokenizer=tiny["foundation"], rules_first=True)
    evaluation = gw.evaluate("The Eiffel Tower was built in 1998.", CONTEXT, judge=ruled)
    (claim,) = evaluation.claims
    assert claim.verdict == "contradicted" and evaluation.label == "hallucinated"


def test_bad_arguments_and_folders_say_what_to_fix(tiny: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        gw.HHEMJudge(tiny["hhem"], mode="sentences")
    with pytest.raises(ValueError, match="revision pins a hub id"):
        gw.HHEMJudge(tiny["hhem"], revision="main")
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match=r"not HHEM-2\.1-Open"):
        gw.HHEMJudge(tmp_path)


HUB_SCRIPT = """
import json, sys
import groundwatch as gw

out = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    try:
        out[name] = gw.HHEMJudge(**kwargs).consistency(json.loads(sys.argv[2]))
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_a_hub_id_is_read_from_the_cache_pinned_with_no_network(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--groundwatch-tests--tiny-hhem"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in tiny["named"].iterdir():  # its config names the foundation folder
        (snapshot / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    asks = {
        "hub": {"model": "groundwatch-tests/tiny-hhem"},
        "pinned": {"model": "groundwatch-tests/tiny-hhem", "revision": commit},
        "absent": {"model": "groundwatch-tests/absent"},
    }
    done = subprocess.run(
        [sys.executable, "-c", HUB_SCRIPT, json.dumps(asks), json.dumps(PAIRS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["hub"] == pytest.approx(FIXTURE["named"], abs=EXACT)
    assert got["pinned"] == pytest.approx(FIXTURE["named"], abs=EXACT)
    # Not cached, no network: the error says so (no download was tried).
    assert got["absent"].startswith("OSError: groundwatch-tests/absent: config.json is not in")
