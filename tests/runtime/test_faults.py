"""Faults that used to lose records: each test injects one and checks, from the exported
metrics, that every record still ends in exactly one count, in both executors.

The identity: ``groundwatch.records`` (every decision) adds up to the records handed in, and
``sampled == evaluated + failed + dropped`` (``groundwatch.evaluations`` by label, plus
``groundwatch.evaluations.dropped``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from groundwatch import Evaluation, Judgement, Passage, RagRecord
from groundwatch._shared import guard
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import AsyncEchoJudge, AsyncExitJudge, EchoJudge, ExitJudge, RaisingFieldDocument
from .test_lifecycle import decisions, finished

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."
GOOD = "The Eiffel Tower stands 330 metres tall."

EXECUTORS = pytest.mark.parametrize("executor", ["thread", "process"])


def assert_identity(capgw: GroundwatchTelemetry, handed_in: int) -> dict[str, float]:
    """Every record in one decision; every sampled one evaluated, failed or dropped."""
    seen = decisions(capgw)
    assert sum(seen.values()) == handed_in, seen
    evaluated, failed, dropped = finished(capgw)
    assert seen.get("sampled", 0) == evaluated + failed + dropped, (seen, finished(capgw))
    return seen


class ErrorCounts:
    """``groundwatch.errors`` counted since this was made (the counts are process-wide)."""

    def __init__(self) -> None:
        self.before = dict(guard.errors)

    def new(self) -> dict[tuple[str, str], int]:
        before = self.before
        return {k: n - before.get(k, 0) for k, n in guard.errors.items() if n != before.get(k, 0)}


@pytest.fixture
def errors(monkeypatch: pytest.MonkeyPatch) -> ErrorCounts:
    """The counts since the test started; the log rate limit starts afresh too (it is
    process-wide, so an earlier test's warning would silence this test's)."""
    monkeypatch.setattr(guard, "_last_logged", {})
    return ErrorCounts()


def failures(capgw: GroundwatchTelemetry) -> dict[str, float]:
    out: dict[str, float] = {}
    for attrs, value in capgw.metric_points(sc.METRIC_EVALUATIONS):
        if attrs[sc.GROUNDWATCH_LABEL] == "error":
            out[attrs[sc.ERROR_TYPE]] = out.get(attrs[sc.ERROR_TYPE], 0) + value
    return out


# --- 1. BaseException from a judge or an on_result callback --------------------------------------


@EXECUTORS
@pytest.mark.parametrize("kind", ["SystemExit", "KeyboardInterrupt"])
def test_a_judge_raising_a_base_exception_fails_its_record_and_the_worker_lives(
    capgw: GroundwatchTelemetry, executor: str, kind: str
) -> None:
    monitor = capgw.monitor(judge=ExitJudge(kind), executor=executor)
    answers = [GOOD, "EXIT " + GOOD, GOOD, GOOD]
    for answer in answers:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    assert monitor.force_flush(20_000)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)  # after the fault
    assert monitor.force_flush(20_000)
    assert_identity(capgw, 5)
    assert finished(capgw) == (4, 1, 0)
    assert failures(capgw) == {sc.ERROR_INTERNAL: 1}


@pytest.mark.parametrize("kind", ["SystemExit", "KeyboardInterrupt"])
def test_an_async_judge_raising_a_base_exception_fails_its_record_and_the_worker_lives(
    capgw: GroundwatchTelemetry, kind: str
) -> None:
    monitor = capgw.monitor(judge=AsyncExitJudge(kind))
    for answer in [GOOD, "EXIT " + GOOD, GOOD]:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    assert monitor.force_flush(10_000)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(10_000)
    assert_identity(capgw, 4)
    assert finished(capgw) == (3, 1, 0)
    assert failures(capgw) == {sc.ERROR_INTERNAL: 1}


@EXECUTORS
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["exit", "interrupt"])
def test_an_on_result_raising_a_base_exception_is_counted_and_the_worker_lives(
    capgw: GroundwatchTelemetry, executor: str, exc: BaseException, errors: ErrorCounts
) -> None:
    seen: list[str] = []

    def exits(record: RagRecord, evaluation: Evaluation) -> None:
        if not seen:
            seen.append("raised")
            raise exc
        seen.append(evaluation.label)

    monitor = capgw.monitor(judge=EchoJudge(), on_result=exits, executor=executor)
    for _ in range(3):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(20_000)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(20_000)
    assert seen == ["raised", "grounded", "grounded", "grounded"]
    assert_identity(capgw, 4)
    assert finished(capgw) == (4, 0, 0)
    assert errors.new() == {("on_result", type(exc).__name__): 1}
    point = {sc.GROUNDWATCH_COMPONENT: "on_result", sc.ERROR_TYPE: type(exc).__name__}
    assert point in [attrs for attrs, _ in capgw.metric_points(sc.METRIC_ERRORS)]


# --- 2. a document that raises while being read, inside a batch ----------------------------------


@EXECUTORS
def test_a_document_that_raises_when_read_fails_alone_and_the_batch_is_scored(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), executor=executor)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(20_000)  # warm: the judge's speed is known, batches can grow
    bad_ones = 0
    for i in range(40):
        if i in (5, 20):
            for field in ("page_content", "metadata"):
                doc = RaisingFieldDocument(PASSAGE, raising=field)
                monitor.record(question="q", contexts=[doc], answer=GOOD)
                bad_ones += 1
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(20_000)
    assert_identity(capgw, 41 + bad_ones)
    assert finished(capgw) == (41, bad_ones, 0)
    assert failures(capgw) == {sc.ERROR_INVALID_INPUT: bad_ones}


# --- 3. record() and the caller's bad input ------------------------------------------------------


class _RaisingIterable:
    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("iteration refused")


class _LazyDocuments(Sequence[Any]):
    """Converts its documents when read, as an integration's lazy context list does."""

    def __init__(self, documents: list[Any]) -> None:
        self._documents = documents

    def __len__(self) -> int:
        return len(self._documents)

    def __getitem__(self, index: Any) -> Any:
        return self._documents[index].page_content

    def __iter__(self) -> Iterator[Any]:
        for document in self._documents:
            yield {"text": document.page_content}


def _raising_generator() -> Iterator[str]:
    yield PASSAGE
    raise ValueError("generator failed halfway")


def _bad_inputs() -> list[dict[str, Any]]:
    return [
        {"contexts": _raising_generator()},
        {"contexts": _RaisingIterable()},
        {"contexts": [PASSAGE], "attributes": 42},
        {"contexts": _LazyDocuments([RaisingFieldDocument(PASSAGE, raising="page_content")])},
    ]


@EXECUTORS
def test_record_counts_the_callers_bad_input_as_invalid_input_with_one_warning(
    capgw: GroundwatchTelemetry,
    caplog: pytest.LogCaptureFixture,
    errors: ErrorCounts,
    executor: str,
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), executor=executor)
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        for _ in range(2):
            for kwargs in _bad_inputs():
                monitor.record(question="q", answer=GOOD, **kwargs)
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    seen = assert_identity(capgw, 9)
    assert seen == {"error/invalid_input": 8, "sampled": 1}
    assert finished(capgw) == (1, 0, 0)
    # The caller's input, not a bug of ours: nothing in groundwatch.errors, one warning.
    assert errors.new() == {}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "invalid input" in warnings[0].getMessage()


# --- 4. an async judge that blocks its event loop ------------------------------------------------


class BlockingAsyncJudge:
    """An async judge that, for answers containing "BLOCK", calls ``time.sleep`` in its
    coroutine: it blocks whatever loop runs it."""

    name = "blocking-async"

    def __init__(self, block_s: float) -> None:
        self.block_s = block_s

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        if "BLOCK" in answer:
            time.sleep(self.block_s)  # the bug under test
        else:
            await asyncio.sleep(0.01)
        return Judgement(claims=[])


def test_an_async_judge_blocking_its_loop_is_detected_and_the_deadline_holds(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture, errors: ErrorCounts
) -> None:
    done_at: dict[str, float] = {}

    def note(record: RagRecord, evaluation: Evaluation) -> None:
        done_at[record.question or ""] = time.monotonic()

    judge = BlockingAsyncJudge(block_s=2.5)
    monitor = capgw.monitor(judge=judge, evaluation_timeout_millis=800, on_result=note)
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        monitor.record(question="first block", contexts=[PASSAGE], answer="BLOCK")
        assert monitor.force_flush(20_000)
        # Detected: from now on the judge cannot hold up the others.
        start = time.monotonic()
        monitor.record(question="second block", contexts=[PASSAGE], answer="BLOCK")
        time.sleep(0.05)
        monitor.record(question="quick", contexts=[PASSAGE], answer=GOOD)
        assert monitor.force_flush(20_000)
    assert done_at["quick"] - start < 0.6, "a quick evaluation waited behind the blocked judge"
    assert done_at["second block"] - start < 1.6, "the 800 ms deadline did not hold"
    # Both blocking calls count as timed out: the first one returned after its deadline.
    assert_identity(capgw, 3)
    assert failures(capgw) == {sc.ERROR_TIMEOUT: 2}
    blocked = [r for r in caplog.records if "blocked" in r.getMessage()]
    assert len(blocked) == 1 and "blocking-async" in blocked[0].getMessage()
    assert errors.new() == {("judge", "event_loop_blocked"): 1}
    point = {sc.GROUNDWATCH_COMPONENT: "judge", sc.ERROR_TYPE: "event_loop_blocked"}
    assert point in [attrs for attrs, _ in capgw.metric_points(sc.METRIC_ERRORS)]


def test_a_well_behaved_async_judge_stays_on_the_loop(
    capgw: GroundwatchTelemetry, errors: ErrorCounts
) -> None:
    judge = AsyncEchoJudge(delay_s=0.05)
    monitor = capgw.monitor(judge=judge, max_concurrency=4)
    for _ in range(8):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.force_flush(10_000)
    assert judge.max_in_flight == 4  # concurrent on the worker's loop, not one per thread
    assert set(judge.threads) == {"groundwatch-worker"}
    assert errors.new() == {}


# --- 6. deeply nested or huge metadata -----------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"child": value}
    return value


@EXECUTORS
def test_deep_or_huge_metadata_is_capped_and_marked_and_both_executors_agree(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), executor=executor)
    deep = {"text": PASSAGE, "metadata": {"tree": _nested(5_000)}}
    huge = {"text": PASSAGE, "metadata": {f"k{i}": "x" * 1000 for i in range(2_000)}}
    for context in (deep, huge):
        monitor.record(question="q", contexts=[context], answer=GOOD)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    results = capgw.results()
    assert_identity(capgw, 3)
    assert finished(capgw) == (3, 0, 0)
    by_answer = [(e.label, e.truncated) for _, e in results]
    assert sorted(by_answer) == sorted(
        [("grounded", True), ("grounded", True), ("grounded", False)]
    )
    for record, _evaluation in results:
        metadata = record.contexts[0].metadata
        assert len(repr(metadata)) < 100_000
