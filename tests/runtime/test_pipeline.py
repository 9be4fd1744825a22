"""One scoring pipeline: every entry point calls a judge through the same adapter, a cascade's
stages run where the executor says, and what crosses a process boundary is typed and versioned.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import pytest

import groundwatch as gw
from groundwatch import Claim, Judgement, Passage, Usage, _fields
from groundwatch._fields import (
    WIRE_VERSION,
    EvaluationFields,
    RecordFields,
    TraceFields,
    WireVersionError,
    as_evaluation,
)
from groundwatch._shared.config import usable_cores
from groundwatch.check.stream import check_runner
from groundwatch.runtime.pipeline import LocalScoring, evaluate_records
from groundwatch.runtime.runners.cascade_runner import CascadeRunner
from groundwatch.runtime.runners.process_runner import ProcessRunner
from groundwatch.testing import GroundwatchTelemetry

PASSAGE = "The Eiffel Tower stands 330 metres tall."
ANSWER = "The Eiffel Tower stands 330 metres tall."


# --- judges that misbehave, each defined at module level so a worker process can load it ---


class RaisingJudge:
    name = "raising"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        raise ValueError("the index is gone")


class NotAJudgementJudge:
    name = "dict"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Any:
        return {"claims": []}


class ExitingJudge:
    name = "exiting"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        raise SystemExit(3)


class CoroutineFromSyncJudge:
    """A plain method that returns a coroutine (an async client called without await)."""

    name = "coroutine"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Any:
        async def later() -> Judgement:
            raise RuntimeError("failed inside the coroutine")

        return later()


MISBEHAVING = [RaisingJudge, NotAJudgementJudge, ExitingJudge, CoroutineFromSyncJudge]


def _outcome(evaluation: gw.Evaluation) -> tuple[str, str | None, str | None]:
    return evaluation.label, evaluation.error_type, evaluation.error


@pytest.mark.parametrize("judge_class", MISBEHAVING, ids=lambda c: c.name)
def test_every_entry_point_gives_the_same_evaluation_of_a_misbehaving_judge(
    capgw: GroundwatchTelemetry, judge_class: type[Any]
) -> None:
    judge = judge_class()
    by_evaluate = gw.evaluate(ANSWER, [PASSAGE], judge=judge)
    by_aevaluate = asyncio.run(gw.aevaluate(ANSWER, [PASSAGE], judge=judge))
    seen: dict[str, gw.Evaluation] = {}
    for executor in ("thread", "process"):
        monitor = capgw.monitor(
            judge=judge,
            executor=executor,
            on_result=lambda r, e, executor=executor: seen.__setitem__(executor, e),
        )
        monitor.record(question="q", contexts=[PASSAGE], answer=ANSWER)
        assert monitor.force_flush(30_000)
        monitor.shutdown()
    expected = _outcome(by_evaluate)
    assert expected[0] == "error" and expected[1]  # a failure with a documented type
    assert _outcome(by_aevaluate) == expected
    assert _outcome(seen["thread"]) == expected
    assert _outcome(seen["process"]) == expected


# --- a cascade's stages run where the executor says ---


class PidJudge:
    """Sure of every claim (no escalation) unless the answer says "unsure"; says in its
    ``model`` which process and thread judged."""

    name = "pid"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        confidence = 0.1 if "unsure" in answer else 0.99
        return Judgement(
            claims=[Claim(text=answer, verdict="unsupported", confidence=confidence)],
            model=f"pid:{os.getpid()}",
            usage=Usage(input_tokens=10, output_tokens=1, calls=1),
        )


class LoopJudge:
    """An async second stage: says which thread's loop ran it."""

    name = "loop"

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        await asyncio.sleep(0)
        return Judgement(
            claims=[Claim(text=answer, verdict="unsupported", confidence=0.9)],
            model=f"thread:{threading.current_thread().name}",
            usage=Usage(input_tokens=100, output_tokens=5, calls=1),
        )


def test_a_cascade_runs_its_sync_stage_in_the_worker_process_and_its_async_stage_on_the_loop(
    capgw: GroundwatchTelemetry,
) -> None:
    cascade = gw.CascadeJudge(PidJudge(), LoopJudge())
    seen: list[gw.Evaluation] = []
    monitor = capgw.monitor(
        judge=cascade, executor="process", on_result=lambda r, e: seen.append(e)
    )
    assert isinstance(monitor._worker.destination, LocalScoring)
    assert isinstance(monitor._worker.destination.runner, CascadeRunner)
    monitor.record(question="q", contexts=[PASSAGE], answer="The tower is tall.")
    monitor.record(question="q", contexts=[PASSAGE], answer="The tower is unsure.")
    assert monitor.force_flush(30_000)
    kept, escalated = sorted(seen, key=lambda e: "unsure" in e.claims[0].text)
    # The first stage ran in a worker process, not on a thread of this interpreter.
    assert kept.model is not None and kept.model.startswith("pid:")
    assert kept.model != f"pid:{os.getpid()}"
    # The second stage ran on the worker's event loop; usage sums both stages.
    assert escalated.model == "thread:groundwatch-worker"
    assert escalated.usage == Usage(input_tokens=110, output_tokens=6, calls=2)
    assert kept.judge == escalated.judge == cascade.name
    assert (cascade.escalated, cascade.total) == (1, 2)
    assert capgw.metric_total("groundwatch.judge.escalations") == 2


class HangingFirstJudge:
    name = "hanging"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        threading.Event().wait(5)
        return Judgement()


def test_one_deadline_covers_both_stages_of_a_cascade(capgw: GroundwatchTelemetry) -> None:
    cascade = gw.CascadeJudge(HangingFirstJudge(), LoopJudge())
    seen: list[gw.Evaluation] = []
    monitor = capgw.monitor(
        judge=cascade,
        executor="thread",
        evaluation_timeout_millis=200,
        on_result=lambda r, e: seen.append(e),
    )
    monitor.record(question="q", contexts=[PASSAGE], answer=ANSWER)
    assert monitor.force_flush(30_000)
    [evaluation] = seen
    assert (evaluation.label, evaluation.error_type) == ("error", "timeout")
    assert evaluation.judge == cascade.name


def test_check_runs_a_cascades_first_stage_in_worker_processes() -> None:
    runner = check_runner(gw.CascadeJudge(PidJudge(), LoopJudge()), concurrency=4, processes=2)
    try:
        assert isinstance(runner, CascadeRunner)
        assert isinstance(runner.first, ProcessRunner) and runner.first.nice is False
    finally:
        runner.close()


def test_a_cascades_first_stage_gets_at_most_one_process_per_core() -> None:
    # check's and worker's --concurrency counts the LLM stage's calls in flight too.
    runner = check_runner(gw.CascadeJudge(PidJudge(), LoopJudge()), concurrency=64, processes=64)
    try:
        assert isinstance(runner, CascadeRunner)
        assert runner.first.concurrency == min(64, usable_cores())
        assert runner.then.concurrency == 64
    finally:
        runner.close()


def test_evaluate_records_gives_a_cascade_the_monitor_s_results() -> None:
    cascade = gw.CascadeJudge(PidJudge(), LoopJudge())
    runner = check_runner(cascade, concurrency=2, processes=1)
    records = [
        gw.RagRecord(question="q", contexts=[PASSAGE], answer=answer)
        for answer in ("The tower is tall.", "The tower is unsure.")
    ]
    results = asyncio.run(evaluate_records(runner, records, gw.LabelPolicy(), 10.0))
    models = [as_evaluation(r.evaluation).model for r in results]
    assert models[0] == f"pid:{os.getpid()}"  # processes=1: this process, on a thread
    assert models[1] is not None and models[1].startswith("thread:")


# --- the queue is a destination like any other: no judge, no runner ---


class UnpicklableJudge:
    name = "unpicklable"

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        return Judgement()


def test_a_monitor_with_a_queue_builds_no_runner(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    queue = gw.RedisQueue("redis://127.0.0.1:9")
    monitor = capgw.monitor(judge=UnpicklableJudge(), executor="auto", queue=queue)
    assert monitor._worker.destination is queue
    assert "cannot be pickled" not in caplog.text


# --- typed, versioned values on the boundaries ---


def _evaluation() -> gw.Evaluation:
    return gw.evaluate(
        "The Eiffel Tower stands 330 metres tall. It is painted gold.",
        [PASSAGE],
        judge=gw.LocalJudge(),
    )


def test_evaluation_fields_cross_a_pipe_and_rebuild_the_evaluation() -> None:
    evaluation = _evaluation().model_copy(
        update={"usage": Usage(input_tokens=3, output_tokens=2, calls=1), "model": "m"}
    )
    fields = EvaluationFields.of(evaluation)
    back = pickle.loads(pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL))
    assert back._full is None  # the claims travel as one blob, built on demand
    assert (back.label, back.faithfulness, back.groundedness, back.judge, back.model) == (
        evaluation.label,
        evaluation.faithfulness,
        evaluation.groundedness,
        evaluation.judge,
        "m",
    )
    assert back.verdict_counts == evaluation.verdict_counts
    assert back.usage == evaluation.usage
    assert back.full() == evaluation


def _distinct_evaluation() -> gw.Evaluation:
    """An evaluation whose every field differs from its default and from the fields of the
    same type (so that a field left out of the codec, or two swapped, shows)."""
    base = _evaluation()
    return base.model_copy(
        update={
            "label": "insufficient_context",
            "faithfulness": 0.125,
            "groundedness": 0.375,
            "judge": "judge-name",
            "model": "model-name",
            "usage": Usage(input_tokens=3, output_tokens=5, calls=7),
            "explanation": "why",
            "error": "error-text",
            "error_type": "error-type",
            "evidence_rejected": 11,
            "truncated": True,
            "hallucination_probability": 0.625,
        }
    )


def test_every_field_of_an_evaluation_crosses_the_pipe_in_its_place() -> None:
    evaluation = _distinct_evaluation()
    defaults = gw.Evaluation(label="grounded")
    for name in gw.Evaluation.model_fields:
        assert getattr(evaluation, name) != getattr(defaults, name), name
    back = pickle.loads(pickle.dumps(EvaluationFields.of(evaluation)))
    # What telemetry reads, without building the evaluation...
    for name in (f.name for f in dataclasses.fields(EvaluationFields)):
        if name not in ("claims_blob", "_full"):
            want = getattr(evaluation, name)
            assert getattr(back, name) == want, name
    # ...and the whole evaluation, every field in its place.
    assert back.full().model_dump() == evaluation.model_dump()


def test_record_fields_cross_a_pipe_with_every_field() -> None:
    fields = RecordFields(
        "00000000000000ab",
        "q?",
        "a.",
        [Passage(text="p", id="id-1", score=0.5, metadata={"k": 1}, kind="tool", tool="lookup")],
        route="r",
        attributes={"tenant": "t"},
        sampling_rate=0.25,
        always_score=True,
        truncated=True,
        trace=TraceFields(1, 2, 1, is_remote=True, state="k=v"),
        enqueued_ns=7,
    )
    back = pickle.loads(pickle.dumps(fields))
    assert back == fields
    record = back.to_record()
    assert record.contexts[0].tool == "lookup" and record.span_context.trace_state.get("k") == "v"
    # The two flags one at a time: swapped on the wire, each would read as the other.
    for always_score, truncated in ((True, False), (False, True)):
        fields.always_score, fields.truncated = always_score, truncated
        back = pickle.loads(pickle.dumps(fields))
        assert (back.always_score, back.truncated) == (always_score, truncated)


@pytest.mark.parametrize(
    "value", [EvaluationFields.of(_evaluation()), RecordFields("a", None, "x", [])]
)
def test_a_value_of_another_wire_version_is_refused(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:  # pickled by another groundwatch
        patched.setattr(_fields, "WIRE_VERSION", WIRE_VERSION + 1)
        data = pickle.dumps(value)
    with pytest.raises(WireVersionError, match="wire version"):
        pickle.loads(data)
