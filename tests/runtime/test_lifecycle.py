"""The worker's life: flush, shutdown, timeouts, failures, fork, atexit, worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundwatch import Decision, Evaluation, RagRecord, RatioSampler
from groundwatch._shared.inputs import MAX_PASSAGES
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import AsyncEchoJudge, EchoJudge, HangingJudge, PidJudge, SleepJudge

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."
GOOD = "The Eiffel Tower stands 330 metres tall."
ROOT = Path(__file__).resolve().parents[2]


def decisions(capgw: GroundwatchTelemetry) -> dict[str, float]:
    out: dict[str, float] = {}
    for attrs, value in capgw.metric_points(sc.METRIC_RECORDS):
        key = attrs[sc.GROUNDWATCH_DECISION]
        if sc.ERROR_TYPE in attrs:
            key += "/" + attrs[sc.ERROR_TYPE]
        out[key] = out.get(key, 0) + value
    return out


def finished(capgw: GroundwatchTelemetry) -> tuple[float, float, float]:
    """(evaluated, failed, dropped) as the metrics tell them."""
    evaluated = failed = 0.0
    for attrs, value in capgw.metric_points(sc.METRIC_EVALUATIONS):
        if attrs[sc.GROUNDWATCH_LABEL] == "error":
            failed += value
        else:
            evaluated += value
    dropped = sum(v for _, v in capgw.metric_points(sc.METRIC_DROPPED))
    return evaluated, failed, dropped


def test_accounting_identity_under_a_burst_with_a_small_queue(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), sampler=RatioSampler(0.5), max_queue_size=50)
    for i in range(10_000):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD, always_score=i % 100 == 0)
    capgw.flush()
    seen = decisions(capgw)
    assert sum(seen.values()) == 10_000
    assert seen["queue_full"] > 0 and seen["not_sampled"] > 0 and seen["sampled"] > 0
    evaluated, failed, dropped = finished(capgw)
    assert seen["sampled"] == evaluated + failed + dropped
    assert (failed, dropped) == (0, 0)
    assert len(capgw.results()) == seen["sampled"]


def test_flush_while_the_first_record_is_still_starting_the_worker(
    capgw: GroundwatchTelemetry,
) -> None:
    # The first record is queued before its submit() starts the worker thread; a flush from
    # another thread in that window must wait for it, not answer False at once.
    import threading

    monitor = capgw.monitor(judge=EchoJudge())
    worker: Any = monitor._worker
    queued, release = threading.Event(), threading.Event()
    wake = worker._wake

    def slow_wake() -> None:
        queued.set()
        release.wait(10)
        wake()

    worker._wake = slow_wake
    recorder = threading.Thread(
        target=lambda: monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    )
    recorder.start()
    assert queued.wait(10)
    try:
        assert monitor.force_flush(5000) is True
        assert len(capgw.results()) == 1
    finally:
        release.set()
        recorder.join(10)
    assert monitor.force_flush(5000) is True
    assert len(capgw.results()) == 1 and decisions(capgw) == {"sampled": 1}


def test_shutdown_with_work_queued_scores_what_fits_and_counts_the_rest(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.05))
    for _ in range(20):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    start = time.monotonic()
    assert monitor.shutdown(timeout_millis=300) is False
    assert time.monotonic() - start < 1.0, "the deadline is honoured"
    assert monitor.shutdown() is True, "a second shutdown is harmless"
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)  # after shutdown: counted
    evaluated, failed, dropped = finished(capgw)
    assert 0 < evaluated < 20 and failed == 0
    assert evaluated + dropped == 20
    counted = [(a, v) for a, v in capgw.metric_points(sc.METRIC_DROPPED) if v]  # known types: 0
    assert counted == [({sc.ERROR_TYPE: "shutdown"}, dropped)]
    assert decisions(capgw) == {"sampled": 20, "error/shutdown": 1}


def test_shutdown_in_time_scores_everything(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.005))
    for _ in range(10):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert monitor.shutdown(timeout_millis=10_000) is True
    assert finished(capgw) == (10, 0, 0)
    assert monitor._worker is not None and not monitor._worker._thread.is_alive()  # type: ignore[union-attr]


def test_hanging_judge_times_out_and_stuck_threads_are_capped(capgw: GroundwatchTelemetry) -> None:
    judge = HangingJudge()
    monitor = capgw.monitor(judge=judge, evaluation_timeout_millis=150)
    try:
        assert monitor.force_flush(timeout_millis=10) is True, "nothing queued yet"
        for _ in range(6):
            monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
        assert monitor.force_flush(timeout_millis=50) is False
        labels = [(e.label, e.error_type) for e in capgw.evaluations()]
    finally:
        judge.release.set()
    assert labels == [("error", "timeout")] * 6
    # The last two failed fast: no thread was left to run them.
    assert all((e.error or "").startswith("judge_unresponsive") for e in capgw.evaluations()[4:])
    assert finished(capgw) == (0, 6, 0)


def test_raising_on_result_is_logged_counted_and_not_fatal(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def bad(record: RagRecord, evaluation: Evaluation) -> None:
        raise ValueError("sink down")

    def good(record: RagRecord, evaluation: Evaluation) -> None:
        seen.append(evaluation.label)

    monitor = capgw.monitor(judge=EchoJudge(), on_result=[bad, good])
    for _ in range(3):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    assert seen == ["grounded"] * 3
    assert finished(capgw) == (3, 0, 0)
    errors = capgw.metric_points(sc.METRIC_ERRORS)
    assert ({sc.GROUNDWATCH_COMPONENT: "on_result", sc.ERROR_TYPE: "ValueError"}, 3) in errors
    logged = [r for r in caplog.records if "on_result raised" in r.getMessage()]
    assert len(logged) <= 1, "rate-limited"


def test_async_judge_runs_concurrently_under_the_limit(capgw: GroundwatchTelemetry) -> None:
    judge = AsyncEchoJudge(delay_s=0.05)
    monitor = capgw.monitor(judge=judge, max_concurrency=3)
    for _ in range(12):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert len(capgw.results()) == 12
    assert judge.max_in_flight == 3


def test_sync_judge_runs_off_the_loop_one_at_a_time(capgw: GroundwatchTelemetry) -> None:
    judge = EchoJudge(delay_s=0.01)
    monitor = capgw.monitor(judge=judge, max_concurrency=8)
    for _ in range(4):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    assert set(judge.threads) == {"groundwatch-judge"}
    assert monitor._worker.concurrency == 1  # type: ignore[union-attr]


def test_record_never_raises_and_counts_bad_input(capgw: GroundwatchTelemetry) -> None:
    class BrokenSampler:
        def decide(self, record: RagRecord) -> Decision:
            raise KeyError("oops")

    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=[PASSAGE], answer=None)  # type: ignore[arg-type]
    monitor.record(question=3, contexts=[PASSAGE], answer=GOOD)  # type: ignore[arg-type]
    monitor.record(question="q", contexts="not a list", answer=GOOD)
    monitor.record(question="q", contexts={"text": PASSAGE}, answer=GOOD)  # a passage, no list
    monitor.record(question="q", contexts=[object()], answer=GOOD)  # fails on the worker
    monitor.record_failure("RetrieverError")
    broken = capgw.monitor(judge=EchoJudge(), sampler=BrokenSampler())
    broken.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert decisions(capgw) == {
        "error/invalid_input": 4,
        "error/RetrieverError": 1,
        "error/sampler_error": 1,
        "sampled": 1,
    }
    [(_, evaluation)] = capgw.results()
    assert (evaluation.label, evaluation.error_type) == ("error", "invalid_input")


def test_a_huge_or_endless_contexts_iterable_is_capped_on_the_request_path(
    capgw: GroundwatchTelemetry,
) -> None:
    def endless() -> Iterator[str]:
        while True:
            yield PASSAGE

    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=endless(), answer=GOOD)
    [(record, evaluation)] = capgw.results()
    assert len(record.contexts) == MAX_PASSAGES
    assert evaluation.truncated


def test_two_monitors_on_one_meter_provider_add_up(capgw: GroundwatchTelemetry) -> None:
    first, second = capgw.monitor(judge=EchoJudge()), capgw.monitor(judge=EchoJudge())
    for monitor in (first, second, second):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert decisions(capgw) == {"sampled": 3}
    assert finished(capgw) == (3, 0, 0)


def test_on_result_sees_prepared_passages(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(
        question="q", contexts=[{"text": PASSAGE, "id": "doc-1"}], answer=GOOD, route="r"
    )
    [(record, _)] = capgw.results()
    assert [(p.text, p.id) for p in record.contexts] == [(PASSAGE, "doc-1")]
    assert record.to_dict()["contexts"][0]["id"] == "doc-1"
    assert "Eiffel" not in repr(record), "no content in reprs"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_gets_a_fresh_worker(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.4))
    for _ in range(2):  # one in flight, one queued at the fork
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    time.sleep(0.05)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: record, flush and report on its own, then leave at once
        try:
            before = len(capgw._results)
            for _ in range(3):
                monitor.record(question="child", contexts=[PASSAGE], answer=GOOD)
            flushed = monitor.force_flush(5_000)
            mine = [r.question for r, _ in capgw._results[before:]]
            report = {
                "flushed": flushed,
                "scored": mine,
                "dropped": dict(monitor.stats.snapshot()[1]),
                "worker": monitor._worker._thread.name,  # type: ignore[union-attr]
            }
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = json.loads(pipe.read().decode() or "{}")
    os.waitpid(pid, 0)
    assert report == {
        "flushed": True,
        "scored": ["child"] * 3,
        "dropped": {"fork": 2},
        "worker": "groundwatch-worker",
    }
    # The parent scores its own two, undisturbed.
    assert [r.question for r, _ in capgw.results()] == ["q", "q"]


def _run_script(body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("hook", [True, False])
def test_atexit_hook_flushes_unless_turned_off(hook: bool) -> None:
    done = _run_script(
        f"""
        import groundwatch as gw
        from tests.runtime.judges import EchoJudge
        monitor = gw.Monitor(
            judge=EchoJudge(delay_s=0.05),
            on_result=lambda record, ev: print("scored", ev.label, flush=True),
            shutdown_on_exit={hook},
        )
        for _ in range(3):
            monitor.record(question="q", contexts=["It is 3 m. "], answer="It is 3 m.")
        """
    )
    assert done.returncode == 0, done.stderr
    scored = done.stdout.count("scored grounded")
    assert scored == 3 if hook else scored < 3


def test_process_executor_scores_in_another_process_and_survives_its_death(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(judge=PidJudge(), executor="process")
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [(_, first)] = capgw.results()
    assert first.label == "grounded"
    assert first.model is not None and first.model != f"pid-{os.getpid()}"
    runner: Any = monitor._worker.destination.runner  # type: ignore[union-attr]
    [child_pid] = runner.pids()
    assert first.model == f"pid-{child_pid}"
    os.kill(child_pid, 9)
    os.waitpid(child_pid, 0)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    results = [(e.label, e.error_type) for e in capgw.evaluations()]
    assert results[1:] == [("error", "internal"), ("grounded", None)]
    assert (capgw.evaluations()[1].error or "").startswith("worker_process_lost")
    assert runner.started == 2
    assert monitor.shutdown() is True
    assert runner.pids() == []


def test_process_executor_with_an_unpicklable_judge_fails_clearly(
    capgw: GroundwatchTelemetry,
) -> None:
    judge = EchoJudge()
    judge.hook = lambda: None  # type: ignore[attr-defined]
    monitor = capgw.monitor(judge=judge, executor="process")
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [evaluation] = capgw.evaluations()
    assert (evaluation.label, evaluation.error_type) == ("error", "internal")
    assert (evaluation.error or "").startswith("judge_not_picklable")


def test_process_executor_timeout_kills_the_stuck_process(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(
        judge=SleepJudge(30), executor="process", evaluation_timeout_millis=1500
    )
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [evaluation] = capgw.evaluations()
    assert (evaluation.label, evaluation.error_type) == ("error", "timeout")
    runner: Any = monitor._worker.destination.runner  # type: ignore[union-attr]
    assert runner.started == 1 and runner.pids() == []


def test_auto_executor_falls_back_to_a_thread_for_an_unpicklable_judge(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    judge = EchoJudge()
    judge.hook = lambda: None  # type: ignore[attr-defined]
    monitor = capgw.monitor(judge=judge, executor="auto")
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [evaluation] = capgw.evaluations()
    assert evaluation.label == "grounded"
    assert judge.threads == ["groundwatch-judge"]
    assert any("runs on a thread" in r.getMessage() for r in caplog.records)


def test_auto_executor_falls_back_when_no_process_can_start(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    judge = EchoJudge()
    monitor = capgw.monitor(judge=judge, executor="auto")
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [evaluation] = capgw.evaluations()
    assert evaluation.label == "grounded" and judge.threads == ["groundwatch-judge"]


def test_the_readme_example_runs_and_prints_the_evaluation() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "monitor_any_function.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert '"name": "groundwatch.evaluation"' in out and '"name": "rag.request"' in out
    assert '"groundwatch.label": "hallucinated"' in out
    assert out.count('"event_name": "gen_ai.evaluation.result"') == 2


def test_accounting_holds_when_shutdown_races_with_recording_threads(
    capgw: GroundwatchTelemetry,
) -> None:
    import threading

    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.002), max_queue_size=200)
    go, stopped = threading.Event(), threading.Event()
    counts: list[int] = []

    def producer() -> None:
        go.wait()
        n = after = 0
        while after < 200:  # until well after the shutdown
            monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
            n += 1
            after += stopped.is_set()
        counts.append(n)

    threads = [threading.Thread(target=producer) for _ in range(4)]
    for t in threads:
        t.start()
    go.set()
    time.sleep(0.05)
    monitor.shutdown(timeout_millis=100)
    stopped.set()
    for t in threads:
        t.join()
    seen = decisions(capgw)
    assert sum(seen.values()) == sum(counts)
    assert seen["error/shutdown"] >= 4 * 200
    evaluated, failed, dropped = finished(capgw)
    assert seen["sampled"] == evaluated + failed + dropped
    assert failed == 0 and dropped > 0


def test_process_executor_does_not_retry_a_failed_start_per_record(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.runtime.runners import worker_process

    attempts: list[str] = []
    real = worker_process.WorkerProcess._popen

    def counting(env: dict[str, str]) -> Any:
        attempts.append(sys.executable)
        return real(env)

    monkeypatch.setattr(worker_process.WorkerProcess, "_popen", staticmethod(counting))
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    monitor = capgw.monitor(judge=EchoJudge(), executor="process")
    for _ in range(3):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    assert [(e.label, e.error_type) for e in capgw.evaluations()] == [("error", "internal")] * 3
    assert all(
        (e.error or "").startswith("worker_process_start_failed") for e in capgw.evaluations()
    )
    assert len(attempts) == 1
