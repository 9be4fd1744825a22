"""A judge that returns a malformed ``Judgement`` (built with ``model_construct``, past
validation) fails those records alone, as ``error``/``internal``, on every executor: the rest
of the batch is scored and every record ends in exactly one count."""

from __future__ import annotations

import pytest

from groundwatch import Passage, evaluate
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import MALFORMED_KINDS, AsyncMalformedJudge, MalformedJudge, _malformed
from .test_faults import GOOD, PASSAGE, assert_identity, failures
from .test_lifecycle import finished


@pytest.mark.parametrize("executor", ["thread", "process", "async"])
def test_malformed_judgements_fail_alone_and_every_record_comes_back(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    if executor == "async":
        monitor = capgw.monitor(judge=AsyncMalformedJudge())
    else:
        monitor = capgw.monitor(judge=MalformedJudge(), executor=executor)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(20_000)  # warm: the judge's speed is known, batches can grow
    answers = []
    for kind in MALFORMED_KINDS:
        answers += [GOOD, "BAD " + kind]
    for answer in answers:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    assert monitor.force_flush(20_000)
    bad = len(MALFORMED_KINDS)
    assert assert_identity(capgw, 1 + len(answers)) == {"sampled": 1 + len(answers)}
    assert finished(capgw) == (1 + bad, bad, 0)
    assert failures(capgw) == {sc.ERROR_INTERNAL: bad}
    results = capgw.results()
    assert len(results) == 1 + len(answers)
    for record, evaluation in results:
        if record.answer.startswith("BAD "):
            assert evaluation.label == "error", (record.answer, evaluation)
            assert evaluation.error_type == sc.ERROR_INTERNAL
            assert evaluation.error and "malformed Judgement" in evaluation.error
        else:
            assert evaluation.label == "grounded", evaluation


@pytest.mark.parametrize("kind", MALFORMED_KINDS)
def test_evaluate_turns_a_malformed_judgement_into_an_internal_error(kind: str) -> None:
    class Judge:
        name = "malformed"

        def judge(self, answer: str, contexts: object, question: object) -> object:
            return _malformed(kind)

    evaluation = evaluate(GOOD, [Passage(text=PASSAGE)], judge=Judge())  # type: ignore[arg-type]
    assert evaluation.label == "error"
    assert evaluation.error_type == sc.ERROR_INTERNAL
    assert evaluation.error and "malformed Judgement" in evaluation.error
    # The result is a valid model: it serialises, as telemetry and `check --json` need.
    assert evaluation.model_dump_json()
