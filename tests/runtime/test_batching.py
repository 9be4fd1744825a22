"""The worker process path: records go over in batches, results come back as plain fields.

Each record keeps its own outcome (a hanging or raising judge call fails that record alone),
its own deadline, and exact accounting; what reaches telemetry and ``on_result`` is what an
in-process evaluation gives.
"""

from __future__ import annotations

import itertools
import os
import pickle
import threading
import time
from typing import Any

import pytest

import groundwatch as gw
from groundwatch.runtime import worker as worker_module
from groundwatch.runtime.runners import contract as runner_module
from groundwatch.runtime.runners import process_runner, worker_process
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge, TriggerJudge
from .test_lifecycle import decisions, finished

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."
GOOD = "The Eiffel Tower stands 330 metres tall."
MIXED = "The Eiffel Tower stands 330 metres tall. It is painted gold."


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the evaluate_batch messages sent to worker processes."""
    sizes: list[int] = []
    real = worker_process.WorkerProcess.send

    def spy(self: Any, message: Any) -> None:
        if message[0] == "evaluate_batch":
            sizes.append(len(message[1][0]))
        real(self, message)

    monkeypatch.setattr(worker_process.WorkerProcess, "send", spy)
    return sizes


def _warm(capgw: GroundwatchTelemetry, monitor: gw.Monitor) -> None:
    """One scored record: the process is up and the judge's speed known (batches can grow)."""
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()


def test_records_travel_in_batches_and_score_as_in_process(
    capgw: GroundwatchTelemetry, sends: list[int]
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), executor="process")
    _warm(capgw, monitor)
    answers = [GOOD if i % 3 else MIXED for i in range(60)]
    for answer in answers:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    results = capgw.results()[1:]
    assert len(sends) < 20 and max(sends) > 1 and sum(sends) == 61
    assert [r.answer for r, _ in results] == answers
    for record, evaluation in results:
        expected = gw.evaluate(record.answer, [PASSAGE], "q", EchoJudge())
        assert isinstance(evaluation, gw.Evaluation)
        assert evaluation.model_dump() == expected.model_dump()
    assert capgw.metric_total(sc.METRIC_EVALUATIONS) == 61
    mixed_label = gw.evaluate(MIXED, [PASSAGE], "q", EchoJudge()).label
    assert mixed_label != "grounded"
    assert capgw.metric_total(sc.METRIC_EVALUATIONS, groundwatch__label=mixed_label) == 20
    unsupported = capgw.metric_total(sc.METRIC_CLAIMS, groundwatch__verdict="unsupported")
    assert unsupported == answers.count(MIXED)
    assert len(capgw.spans()) == 61


def test_without_callbacks_telemetry_matches_the_full_evaluation(
    capgw: GroundwatchTelemetry, sends: list[int]
) -> None:
    # No on_result callback: the monitor never builds the pydantic Evaluation.
    monitor = gw.Monitor(
        judge=EchoJudge(),
        executor="process",
        tracer_provider=capgw.tracer_provider,
        meter_provider=capgw.meter_provider,
        logger_provider=capgw.logger_provider,
        shutdown_on_exit=False,
        route="faq",
    )
    try:
        for _ in range(5):
            monitor.record(question="q", contexts=[PASSAGE], answer=MIXED)
        assert monitor.force_flush(10_000)
    finally:
        monitor.shutdown()
    expected = gw.evaluate(MIXED, [PASSAGE], "q", EchoJudge())
    spans = capgw.spans()
    assert len(spans) == 5
    for span in spans:
        attrs = dict(span.attributes or {})
        assert attrs[sc.GROUNDWATCH_LABEL] == expected.label
        assert attrs[sc.GROUNDWATCH_GROUNDEDNESS] == expected.groundedness
        assert attrs[sc.GROUNDWATCH_CLAIMS_BY_VERDICT["unsupported"]] == 1
        assert attrs[sc.GROUNDWATCH_CLAIMS_BY_VERDICT["supported"]] == 1
        assert attrs[sc.GROUNDWATCH_ROUTE] == "faq"
    assert len(capgw.events()) == 10
    assert capgw.metric_total(sc.METRIC_EVALUATIONS, groundwatch__route="faq") == 5
    assert capgw.metric_total(sc.METRIC_CLAIMS, groundwatch__verdict="supported") == 5
    [tokens] = [v for a, v in capgw.metric_points(sc.METRIC_JUDGE_TOKENS) if "input" in str(a)]
    assert tokens == 5 * len(MIXED)


def test_a_hanging_call_in_a_batch_times_out_alone(
    capgw: GroundwatchTelemetry, sends: list[int]
) -> None:
    monitor = capgw.monitor(
        judge=TriggerJudge(), executor="process", evaluation_timeout_millis=1500
    )
    _warm(capgw, monitor)
    answers = [GOOD, GOOD, "SLOW " + GOOD, GOOD, GOOD]
    for answer in answers:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    got = [(r.answer, e.label, e.error_type) for r, e in capgw.results()[1:]]
    assert got == [
        (GOOD, "grounded", None),
        (GOOD, "grounded", None),
        ("SLOW " + GOOD, "error", "timeout"),
        (GOOD, "grounded", None),
        (GOOD, "grounded", None),
    ]
    assert len(sends) >= 3  # what followed the stuck call went to a fresh process
    runner: Any = monitor._worker.destination.runner
    assert runner.started == 2 and len(runner.pids()) == 1


def test_a_raising_call_in_a_batch_fails_alone_and_keeps_the_process(
    capgw: GroundwatchTelemetry, sends: list[int]
) -> None:
    monitor = capgw.monitor(judge=TriggerJudge(), executor="process")
    _warm(capgw, monitor)
    for answer in (GOOD, "BOOM " + GOOD, GOOD):
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    got = [(e.label, e.error_type) for e in capgw.evaluations()[1:]]
    assert got == [("grounded", None), ("error", "internal"), ("grounded", None)]
    assert (capgw.evaluations()[2].error or "").startswith("RuntimeError")
    assert sum(sends[1:]) == 3
    runner: Any = monitor._worker.destination.runner
    assert runner.started == 1
    # Background work: the worker process yields the CPU to the host's requests.
    [pid] = runner.pids()
    assert os.getpriority(os.PRIO_PROCESS, pid) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + 1)


def test_unpicklable_metadata_fails_its_record_only(
    capgw: GroundwatchTelemetry, sends: list[int]
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), executor="process")
    _warm(capgw, monitor)
    bad = {"text": PASSAGE, "metadata": {"lock": __import__("threading").Lock()}}
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    monitor.record(question="q", contexts=[bad], answer=GOOD)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    got = [(e.label, e.error_type) for e in capgw.evaluations()[1:]]
    assert got == [("grounded", None), ("error", "internal"), ("grounded", None)]
    assert "TypeError" in (capgw.evaluations()[2].error or "")


def test_accounting_is_exact_when_shutdown_cuts_batches(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.01), executor="process")
    _warm(capgw, monitor)
    for _ in range(200):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    monitor.shutdown(timeout_millis=150)
    seen = decisions(capgw)
    evaluated, failed, dropped = finished(capgw)
    assert seen["sampled"] == 201 == evaluated + failed + dropped
    assert failed == 0 and dropped > 0 and evaluated > 1


class _IdentJudge(TriggerJudge):
    """TriggerJudge noting the thread of each call (thread executor: no pickling needed)."""

    def __init__(self) -> None:
        super().__init__()
        self.idents: list[int] = []

    def judge(self, answer: str, contexts: Any, question: str | None) -> gw.Judgement:
        self.idents.append(threading.get_ident())
        return super().judge(answer, contexts, question)


def test_thread_executor_runs_a_batch_on_one_thread(capgw: GroundwatchTelemetry) -> None:
    judge = _IdentJudge()
    monitor = capgw.monitor(judge=judge, executor="thread")
    _warm(capgw, monitor)
    for _ in range(40):
        monitor.record(question="q", contexts=[PASSAGE], answer=MIXED)
    evaluations = capgw.evaluations()[1:]
    expected = gw.evaluate(MIXED, [PASSAGE], "q", EchoJudge()).model_dump()
    assert [e.model_dump() | {"judge": "echo"} for e in evaluations] == [expected] * 40
    assert len(set(judge.idents)) < 10  # not one thread per call
    assert set(judge.threads) == {"groundwatch-judge"}


def test_thread_executor_a_hanging_call_in_a_batch_times_out_alone(
    capgw: GroundwatchTelemetry,
) -> None:
    judge = _IdentJudge()
    monitor = capgw.monitor(judge=judge, executor="thread", evaluation_timeout_millis=300)
    _warm(capgw, monitor)
    answers = [GOOD, "SLOW " + GOOD, GOOD, "BOOM " + GOOD, GOOD]
    for answer in answers:
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    got = [(r.answer, e.label, e.error_type) for r, e in capgw.results()[1:]]
    assert got == [
        (GOOD, "grounded", None),
        ("SLOW " + GOOD, "error", "timeout"),
        (GOOD, "grounded", None),
        ("BOOM " + GOOD, "error", "internal"),
        (GOOD, "grounded", None),
    ]
    # The stuck thread is abandoned: what came after it ran on another thread.
    slow = answers.index("SLOW " + GOOD)
    assert judge.idents[1 + slow] != judge.idents[-1]
    evaluated, failed, dropped = finished(capgw)
    assert (evaluated, failed, dropped) == (4, 2, 0)


def test_flush_after_a_shutdown_that_ran_out_of_time_waits_for_the_worker(
    capgw: GroundwatchTelemetry,
) -> None:
    # A batch's telemetry and callbacks run without a break, so the worker can outlive a short
    # shutdown deadline; a flush then must wait for it to wind down, not post to its stopped
    # loop and sit out its whole timeout.
    entered, release = threading.Event(), threading.Event()

    def slow(record: Any, evaluation: Any) -> None:
        entered.set()
        release.wait(5)

    monitor = capgw.monitor(judge=EchoJudge(), on_result=slow)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert entered.wait(5)
    assert monitor.shutdown(timeout_millis=50) is False
    threading.Timer(0.2, release.set).start()
    start = time.monotonic()
    assert monitor.force_flush(5_000) is True
    assert time.monotonic() - start < 2.5
    evaluated, failed, dropped = finished(capgw)
    assert (evaluated, failed, dropped) == (1, 0, 0)


def test_spans_keep_the_child_s_timing_when_replies_are_read_together(
    capgw: GroundwatchTelemetry,
) -> None:
    # A judge faster than REPLY_GATHER_S: the pipe thread takes several replies per wake-up,
    # yet each span runs over its own judge call, one after another as the child judged them.
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.004), executor="process")
    _warm(capgw, monitor)
    for _ in range(20):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    spans = sorted(capgw.spans()[1:], key=lambda s: s.start_time or 0)
    assert len(spans) == 20
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        assert span.end_time - span.start_time >= 4_000_000
    for earlier, later in itertools.pairwise(spans):
        assert earlier.end_time is not None and later.start_time is not None
        assert earlier.end_time <= later.start_time + 1_000_000  # judged in turn, not overlapping


def test_the_pipe_thread_takes_a_batch_s_replies_in_a_wake_up_or_two(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch, sends: list[int]
) -> None:
    # Each wake-up of the pipe thread is a few takes of the host's GIL: it waits for every reply
    # still due, not for half of them each time (about log2 of the batch wake-ups).
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.004), executor="process")
    _warm(capgw, monitor)
    sleeps: list[float] = []

    class Clock:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            time.sleep(seconds)

    monkeypatch.setattr(process_runner, "time", Clock())
    # The worker sleeps until a record wakes it, then lets the batch gather: one batch of 12.
    # A batch is cut at BATCH_TARGET_S of the judge's recent speed, some 25 records at 0.1 s
    # here, but only 11 when a loaded machine made the warm-up record take 9 ms: a second of
    # target keeps all 12 in one batch up to 80 ms a record.
    monkeypatch.setattr(runner_module, "BATCH_TARGET_S", 1.0)
    monkeypatch.setattr(worker_module, "STAY_AWAKE_S", 0.0)
    time.sleep(2 * worker_module.BATCH_DELAY_S)
    sends.clear()
    for _ in range(12):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    assert len(capgw.results()) == 13
    assert sends == [12]
    assert 1 <= len(sleeps) <= 3, sleeps  # halving each time: 4 for 12 replies
    assert sleeps[0] >= 11 * 0.004  # the whole batch's worth, from the judge's speed


def _pipe_child() -> tuple[worker_process.WorkerProcess, Any]:
    """A ``WorkerProcess`` reading from a plain pipe: what arrives on it is up to the test."""
    read_fd, write_fd = os.pipe()
    child = object.__new__(worker_process.WorkerProcess)
    child.stdout = os.fdopen(read_fd, "rb", buffering=0)
    child._fd = read_fd
    child._buffer = bytearray()
    child.proc = None  # type: ignore[assignment]
    return child, os.fdopen(write_fd, "wb", buffering=0)


def test_replies_read_ahead_in_one_chunk_are_each_returned() -> None:
    child, writer = _pipe_child()
    for value in ("first", "second"):
        # Both replies sit in the pipe before the first is asked for.
        worker_process.write_message(writer, ("ok", value))
    worker_process.write_message(writer, ("error", ("ValueError", "bad")))
    assert child.reply(1.0) == "first"
    assert child._buffer  # the second came with the same read
    assert child.reply(1.0) == "second"
    with pytest.raises(worker_process.WorkerProcessError, match="ValueError"):
        child.reply(1.0)
    with pytest.raises(TimeoutError):
        child.reply(0.05)  # nothing more: the deadline holds
    writer.close()
    child.stdout.close()


def test_a_reply_split_across_reads_is_waited_for_whole() -> None:
    child, writer = _pipe_child()
    data = pickle.dumps(("ok", "x" * 200_000))
    frame = worker_process._HEADER.pack(len(data)) + data
    writer.write(frame[:10])  # the header and a little: larger than one read after that

    def rest() -> None:
        time.sleep(0.1)
        worker_process._write_all(writer, frame[10:])

    sender = threading.Thread(target=rest)
    sender.start()
    assert child.reply(0.05) == "x" * 200_000  # started in time; the rest may come later
    sender.join()
    writer.close()
    child.stdout.close()


class _Rests:
    """runner's clock, with the Pacer's sleeps recorded."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.perf_counter = time.perf_counter

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        time.sleep(seconds)


def test_the_worker_rests_between_records_so_request_threads_get_the_gil(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.runtime.runners import contract as runner

    scored = threading.Semaphore(0)
    monitor = capgw.monitor(
        judge=EchoJudge(), executor="thread", on_result=lambda r, e: scored.release()
    )
    _warm(capgw, monitor)
    assert scored.acquire(timeout=5)
    rests = _Rests()
    monkeypatch.setattr(runner, "time", rests)
    pacer = monitor._worker.pacer
    assert (pacer.slice_s, pacer.rest_s) == (runner.PACE_SLICE_S, runner.PACE_REST_S)
    pacer.slice_s = 0.0  # a rest before every record
    for _ in range(10):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    # No flush here: a flush waiting makes the worker hurry (below).
    for _ in range(10):
        assert scored.acquire(timeout=10)
    # Preparing and emitting each record: a rest before each, each of PACE_REST_S.
    assert rests.sleeps == [runner.PACE_REST_S] * 20
    pacer.slice_s = 3600.0
    rests.sleeps.clear()
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert scored.acquire(timeout=10)
    assert not rests.sleeps


def test_the_worker_does_not_rest_when_a_flush_waits_or_its_queue_fills(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.runtime.runners import contract as runner

    rests = _Rests()
    monkeypatch.setattr(runner, "time", rests)
    hurry = [False]
    pacer = runner.Pacer(lambda: hurry[0], slice_s=0.0)
    pacer.start()
    pacer.maybe()
    hurry[0] = True
    pacer.maybe()
    runner.NO_PACING.maybe()  # the remote worker's: never rests
    assert rests.sleeps == [runner.PACE_REST_S]

    # The monitor's worker: behind while its queue holds an eighth of max_queue_size.
    monitor = capgw.monitor(judge=EchoJudge(), executor="thread", max_queue_size=64)
    worker = monitor._worker
    worker.pacer.slice_s = 0.0
    assert not worker._behind()
    worker.queue.extend([gw.RagRecord(answer=GOOD, contexts=[PASSAGE])] * 8)
    assert worker._behind()
    worker.queue.pop()
    assert not worker._behind()
    worker.queue.clear()
    worker._stopping = True  # shutting down: score what is left as fast as it goes
    assert worker._behind()
    worker._stopping = False
    # A flush waiting: the records it waits for are scored without a rest. The worker's loop
    # is held until the flush has asked for them (what Worker.flush posts to it), so it cannot
    # take one before that (it would rightly rest then: nothing waits yet).
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert len(capgw.results()) == 1  # the worker runs; what it rested so far does not count
    del rests.sleeps[:]
    loop = worker._loop
    assert loop is not None
    gate, flushed = threading.Event(), threading.Event()
    loop.call_soon_threadsafe(gate.wait, 30.0)
    for _ in range(10):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    loop.call_soon_threadsafe(worker._add_flush_waiter, flushed)
    gate.set()
    assert flushed.wait(30.0)
    assert len(capgw.results()) == 11
    assert rests.sleeps == []


def _count_wakes(monkeypatch: pytest.MonkeyPatch, monitor: gw.Monitor) -> list[float]:
    wakes: list[float] = []
    worker = monitor._worker
    real = worker._wake

    def counted() -> None:
        wakes.append(time.monotonic())
        real()

    monkeypatch.setattr(worker, "_wake", counted)
    return wakes


def test_steady_traffic_never_wakes_the_worker_from_the_request_thread(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wake-up is a system call on the request thread, during which the woken worker takes
    the GIL: under steady traffic the worker looks on its timer instead, so only the first
    record of a quiet spell wakes it, however many batches follow."""
    monitor = capgw.monitor(judge=EchoJudge())
    wakes = _count_wakes(monkeypatch, monitor)
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 4 * worker_module.BATCH_DELAY_S:  # several batches
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
        n += 1
        time.sleep(0.005)
    capgw.flush()
    assert len(capgw.evaluations()) == n
    assert len(wakes) == 1  # the first record, which starts the worker


def test_a_quiet_worker_sleeps_and_the_next_record_wakes_it(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "STAY_AWAKE_S", 0.3)
    monitor = capgw.monitor(judge=EchoJudge())
    wakes = _count_wakes(monkeypatch, monitor)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    deadline = time.monotonic() + 0.3 + 3 * worker_module.BATCH_DELAY_S + 5
    while monitor._worker._awake and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not monitor._worker._awake  # no timer runs for an idle worker
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    assert len(wakes) == 2 and len(capgw.evaluations()) == 2
