"""The run tracker proven by a whole integration built on it alone: the one in
docs/integrations.md ("Haystack in one file"), read from the page and run against a small
framework that reports pipelines as start/end/error callbacks, from many threads at once.

What is asserted is the tracker's state machine: the sampler asked once per run, at the first
retrieval; exactly one terminal call (record, record_failure or record_decision) per run that
retrieved; runs given up past the limits counted and reported; the counters; the map left empty.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
import types
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch import Decision, testing
from groundwatch.integration import COUNTERS, RunTracker, TrackedRun
from groundwatch.testing import GroundwatchTelemetry, RecordingMonitor

_telemetry = testing.capgw  # the runtime's in-memory telemetry fixture, as ``capgw``

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
ANSWER = "The Eiffel Tower is 330 metres tall."
DOCUMENTS = [
    {"text": "The Eiffel Tower is 330 metres tall.", "id": "eiffel"},
    {"text": "It was completed in 1889.", "id": "eiffel-2"},
]


def _load_guide_integration() -> types.ModuleType:
    """The integration module of docs/integrations.md, exactly as the page shows it."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n# groundwatch_toy\.py\n(.*?)```", text, re.DOTALL)
    assert found, "docs/integrations.md lost its integration module"
    module = types.ModuleType("groundwatch_toy")
    sys.modules["groundwatch_toy"] = module
    exec(compile(found.group(1), str(GUIDE), "exec"), module.__dict__)
    return module


toy = _load_guide_integration()


class Framework:
    """A framework with callbacks: a pipeline runs retrievers and a model, each step reported
    with ``on_start`` / ``on_end`` / ``on_error`` to every handler, keyed by run ids."""

    _ids = itertools.count()

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def new_id(self) -> str:
        return f"run-{next(self._ids)}"

    def step(self, parent: str, kind: str, outputs: Any, error: Exception | None = None) -> None:
        run_id = self.new_id()
        self.handler.on_start(run_id, parent, kind, {})
        if error is not None:
            self.handler.on_error(run_id, error)
        else:
            self.handler.on_end(run_id, outputs)

    def run(
        self,
        question: str,
        *,
        retrievers: int = 1,
        documents: Sequence[Any] = DOCUMENTS,
        answer: Any = ANSWER,
        retriever_error: Exception | None = None,
        pipeline_error: Exception | None = None,
    ) -> str:
        root = self.new_id()
        self.handler.on_start(root, None, "pipeline", {"question": question})
        for _ in range(retrievers):
            self.step(root, "retriever", {"documents": list(documents)}, retriever_error)
        if pipeline_error is not None:
            self.handler.on_error(root, pipeline_error)
            return root
        self.step(root, "llm", {"replies": [answer]})
        self.handler.on_end(root, {"answer": answer})
        return root

    def start(self, question: str, *, retrieve: bool = True) -> str:
        """A pipeline that starts (and retrieves) but never ends: a stream nobody reads."""
        root = self.new_id()
        self.handler.on_start(root, None, "pipeline", {"question": question})
        if retrieve:
            self.step(root, "retriever", {"documents": list(DOCUMENTS)})
        return root


@pytest.fixture(autouse=True)
def _production_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard's production behaviour: a bug of ours is counted and swallowed.
    monkeypatch.delenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS", raising=False)


def terminal_calls(monitor: RecordingMonitor) -> int:
    return len(monitor.records) + len(monitor.failures) + len(monitor.decisions)


def assert_empty(handler: Any) -> None:
    assert handler.tracker.active_runs == 0 and handler.tracker.tracked_ids == 0


def test_a_run_is_recorded_once_with_its_question_documents_answer_and_trace(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor, route="docs-qa")
    with capgw.tracer.start_as_current_span("request") as request:
        Framework(handler).run("How tall is the Eiffel Tower?", retrievers=2)
    [record] = monitor.records
    assert record["question"] == "How tall is the Eiffel Tower?"
    assert record["contexts"] == DOCUMENTS * 2
    assert record["answer"] == ANSWER
    assert record["route"] == "docs-qa"
    assert record["span_context"] == request.get_span_context()
    assert record["decision"] is Decision.SAMPLED
    assert record["attributes"] == {}
    # Two retrievals, one question to the sampler, at the first.
    assert monitor.decided == [(request.get_span_context(), "docs-qa")]
    assert monitor.failures == [] and monitor.decisions == []
    assert handler.tracker.counts == {**dict.fromkeys(COUNTERS, 0), "records": 1}
    assert_empty(handler)


def test_the_record_is_scored_by_a_real_monitor_in_the_request_trace(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0))
    handler = toy.ToyHandler(monitor, route="docs-qa")
    with capgw.tracer.start_as_current_span("request") as request:
        Framework(handler).run("How tall is the Eiffel Tower?")
    [(record, evaluation)] = capgw.results()
    assert record.answer == ANSWER and [p.text for p in record.passages] == [
        d["text"] for d in DOCUMENTS
    ]
    assert evaluation.label == "grounded"
    [span] = capgw.spans()
    assert span.context is not None and span.parent is not None
    assert span.context.trace_id == request.get_span_context().trace_id
    assert span.parent.span_id == request.get_span_context().span_id


def test_a_run_the_sampler_declines_keeps_nothing_and_is_reported_once() -> None:
    monitor = RecordingMonitor(decision=Decision.NOT_SAMPLED)
    handler = toy.ToyHandler(monitor, route="r", max_documents=1)
    kept: list[int] = []
    real_finish = handler._finish

    def spy(run: Any, answer: Any) -> None:
        kept.append(len(run.documents))
        real_finish(run, answer)

    handler._finish = spy
    Framework(handler).run("q?", retrievers=3)
    assert kept == [0]  # no document kept, none counted as dropped
    assert monitor.records == [] and monitor.failures == []
    assert monitor.decisions == [(Decision.NOT_SAMPLED, "r")]
    assert len(monitor.decided) == 1
    counts = handler.tracker.counts
    assert counts["not_sampled"] == 1 and counts["documents_dropped"] == 0
    assert_empty(handler)


def test_documents_past_the_cap_are_dropped_and_the_cut_is_marked() -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor, max_documents=3)
    Framework(handler).run("q?", retrievers=2)
    [record] = monitor.records
    assert record["contexts"] == [*DOCUMENTS, DOCUMENTS[0]]
    assert record["attributes"] == {"groundwatch.contexts.dropped": 1}
    assert handler.tracker.counts["documents_dropped"] == 1


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ({"retriever_error": ValueError("index down")}, "ValueError"),
        ({"pipeline_error": TimeoutError("slow model")}, "TimeoutError"),
        ({"answer": None}, "no_answer"),
    ],
    ids=["retriever", "pipeline", "no-answer"],
)
def test_a_failed_run_is_one_failure(case: dict[str, Any], expected: str) -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor, route="r")
    Framework(handler).run("q?", **case)
    assert monitor.failures == [(expected, "r")]
    assert monitor.records == [] and monitor.decisions == []
    assert handler.tracker.counts["failures"] == 1
    assert handler.tracker.counts["no_answer"] == (expected == "no_answer")
    assert_empty(handler)


def test_a_run_that_never_retrieved_is_ignored_and_counted() -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor)
    framework = Framework(handler)
    framework.run("hello", retrievers=0)
    framework.run("hello", retrievers=0, pipeline_error=RuntimeError("x"))
    assert terminal_calls(monitor) == 0 and monitor.decided == []
    assert handler.tracker.counts["no_retrieval"] == 2
    assert_empty(handler)


def test_a_run_that_ends_before_its_steps_is_cancelled() -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor)
    framework = Framework(handler)
    root = framework.start("q?")
    handler.on_start("model", root, "llm", {})  # still streaming when the pipeline ends
    handler.on_end(root, {"answer": "The Eiffel"})
    handler.on_end("model", {})  # too late: forgotten with its run
    assert monitor.failures == [("cancelled", None)] and monitor.records == []
    assert_empty(handler)


def test_runs_past_the_limits_are_given_up_counted_and_reported_once() -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor, route="r")
    handler.tracker = RunTracker(max_active_runs=2, component="toy.")
    framework = Framework(handler)
    first = framework.start("retrieving, never ends")
    framework.start("never retrieves, never ends", retrieve=False)
    third = framework.start("third")
    # The third run pushed the first out: reported, since it had retrieved.
    assert monitor.failures == [("evicted", "r")]
    assert handler.tracker.active_runs == 2
    framework.start("fourth")  # pushes the one that never retrieved: counted, not reported
    assert monitor.failures == [("evicted", "r")]
    assert handler.tracker.counts["evicted"] == 2
    # Past its age: the third run goes when the next one starts, under the count limit.
    [run] = [r for r in handler.tracker.runs() if r.key == third]
    run.expire_in(-1.0)
    handler.tracker.max_active_runs = 10
    framework.start("fifth")
    assert monitor.failures == [("evicted", "r")] * 2
    assert handler.tracker.counts["evicted"] == 3
    # A given-up run that ends late makes no second call.
    handler.on_end(first, {"answer": ANSWER})
    assert monitor.failures == [("evicted", "r")] * 2 and monitor.records == []


def test_each_run_has_exactly_one_terminal_call() -> None:
    monitor = RecordingMonitor()
    tracker: RunTracker[str, TrackedRun[str]] = RunTracker()
    run: TrackedRun[str] = TrackedRun("a", monitor, "r", None)
    tracker.start(run)
    with tracker.lock:
        assert tracker.decide(run) is Decision.SAMPLED
        assert tracker.decide(run) is Decision.SAMPLED
    assert tracker.end("a") is run
    tracker.record(run, question="q", contexts=[], answer="a", attributes={})
    tracker.fail(run, "late")
    tracker.decline(run)
    tracker.ignore(run)
    assert len(monitor.decided) == 1
    assert terminal_calls(monitor) == 1 and len(monitor.records) == 1
    assert tracker.counts["records"] == 1
    assert tracker.counts["failures"] == tracker.counts["no_retrieval"] == 0


class BrokenMonitor(RecordingMonitor):
    def record(self, **kwargs: Any) -> None:
        raise RuntimeError("bug in the runtime")


def test_a_monitor_that_raises_ends_the_run_with_one_internal_failure() -> None:
    from groundwatch._shared import guard as _guard

    monitor = BrokenMonitor()
    handler = toy.ToyHandler(monitor)
    before = _guard.errors[("toy.on_end", "RuntimeError")]
    assert Framework(handler).run("q?")  # the framework never sees our error
    assert monitor.failures == [("internal", None)]
    assert handler.tracker.counts["internal_errors"] == 1
    assert _guard.errors[("toy.on_end", "RuntimeError")] == before + 1
    assert_empty(handler)


def test_concurrent_runs_are_kept_apart_with_one_decision_and_one_call_each() -> None:
    monitor = RecordingMonitor()
    handler = toy.ToyHandler(monitor)
    framework = Framework(handler)
    questions = [f"question {i}" for i in range(200)]
    barrier = threading.Barrier(8)

    def run(question: str) -> None:
        if question in questions[:8]:
            barrier.wait(timeout=30)  # the first runs start together
        root = framework.new_id()
        handler.on_start(root, None, "pipeline", {"question": question})
        # Three retrievers in parallel inside one run, as a pipeline's branches do.
        with ThreadPoolExecutor(3) as branches:
            list(
                branches.map(
                    lambda _: framework.step(root, "retriever", {"documents": [question]}),
                    range(3),
                )
            )
        handler.on_end(root, {"answer": question.upper()})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, questions))
    assert len(monitor.decided) == len(questions)
    assert sorted(r["question"] for r in monitor.records) == sorted(questions)
    for record in monitor.records:
        assert record["contexts"] == [record["question"]] * 3
        assert record["answer"] == record["question"].upper()
    assert terminal_calls(monitor) == len(questions)
    assert handler.tracker.counts["records"] == len(questions)
    assert_empty(handler)


def test_a_forked_child_starts_with_no_runs_and_a_free_lock() -> None:
    import os

    handler = toy.ToyHandler(RecordingMonitor())
    Framework(handler).start("q?")
    with handler.tracker.lock:  # held by this thread while forking
        pid = os.fork()
        if pid == 0:  # child: must not deadlock, must not see the parent's run
            ok = handler.tracker.active_runs == 0 and handler.tracker.lock.acquire(timeout=1)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert handler.tracker.active_runs == 1
