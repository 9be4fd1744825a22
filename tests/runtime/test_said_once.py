"""Loss is said where a person sees it: each scenario runs as a fresh app with Python's default
set-up (no logging configured, the library's ``NullHandler`` in place), and its stderr must
carry the first occurrence of each kind once, while the counters keep counting every one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from groundwatch._shared import guard
from groundwatch.testing import GroundwatchTelemetry

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import threading, time
import groundwatch as gw
from opentelemetry.sdk.trace import TracerProvider

class Slow:
    name = "slow"
    def judge(self, answer, contexts, question):
        time.sleep(0.05)
        return gw.Judgement(claims=[])

class Raising:
    name = "raising"
    def judge(self, answer, contexts, question):
        raise ValueError("the judge's own bug")
"""


def run_app(code: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``code`` as an app's ``__main__``, default Python warnings and logging."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDWATCH_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        cwd=ROOT,
    )


def said(stderr: str, words: str) -> int:
    return sum(words in line for line in stderr.splitlines())


def test_a_full_queue_is_said_once_and_every_drop_counted() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Slow(), executor="thread", max_queue_size=4,
                             tracer_provider=TracerProvider())
        def burst():
            for _ in range(200):
                monitor.record(question="q", contexts=["c"], answer="a")
        threads = [threading.Thread(target=burst) for _ in range(16)]
        for t in threads: t.start()
        for t in threads: t.join()
        decisions, _ = monitor.stats.snapshot()
        print("queue_full", decisions.get(("queue_full", None), 0))
        monitor.shutdown(timeout_millis=100)
        """
    )
    full = int(result.stdout.split("queue_full ")[1].split()[0])
    assert full > 100, result.stdout  # 3,200 calls against a queue of 4
    assert said(result.stderr, "the monitor's queue is full") == 1, result.stderr
    assert "GROUNDWATCH_MAX_QUEUE_SIZE" in result.stderr  # what to do
    assert "LossWarning" in result.stderr


def test_each_kind_of_bad_feedback_is_said_once_a_minute() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Slow(), executor="thread", tracer_provider=TracerProvider())
        for _ in range(3):
            monitor.feedback(label="grounded", trace_id="not-a-trace")
            monitor.feedback(label="sort of", trace_id="0" * 31 + "1")
        print(sum(monitor.stats.feedback.values()))
        monitor.shutdown()
        """
    )
    assert result.stdout.split() == ["6"]
    # Each kind of mistake is said (a bad trace id, a bad label), its repeats within the minute
    # not: rate-limited per kind (issue #45), not once per process for all of them.
    assert said(result.stderr, "invalid input to Monitor.feedback") == 2, result.stderr
    assert said(result.stderr, "trace_id must be 32 hex digits") == 1
    assert said(result.stderr, "label must be one of") == 1


def test_a_raising_judge_is_said_once_with_its_exception_class() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Raising(), executor="thread",
                             tracer_provider=TracerProvider())
        for _ in range(5):
            monitor.record(question="q", contexts=["c"], answer="a")
        monitor.force_flush()
        monitor.shutdown()
        """
    )
    assert said(result.stderr, "judge raising failed an evaluation") == 1, result.stderr
    assert "error.type=internal, exception.type=ValueError" in result.stderr
    assert "the judge's own bug" not in result.stderr  # its message may quote content


def test_a_judge_defined_in_main_says_why_it_runs_on_a_thread() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Slow(), executor="auto", tracer_provider=TracerProvider())
        monitor.record(question="q", contexts=["c"], answer="a")
        monitor.force_flush()
        monitor.shutdown()
        """
    )
    assert said(result.stderr, "runs on a thread of this interpreter") == 1, result.stderr
    assert "ConfigWarning" in result.stderr
    assert "executor='thread'" in result.stderr


def test_no_opentelemetry_sdk_is_said_once() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Slow(), executor="thread")
        for _ in range(3):
            monitor.record(question="q", contexts=["c"], answer="a")
            monitor.force_flush()
        monitor.shutdown()
        """
    )
    assert said(result.stderr, "no OpenTelemetry SDK is set up") == 1, result.stderr
    assert "opentelemetry-instrument" in result.stderr


def test_an_sdk_set_up_after_the_monitor_is_not_reported_missing() -> None:
    result = run_app(
        """
        from opentelemetry import trace
        monitor = gw.Monitor(judge=Slow(), executor="thread")
        trace.set_tracer_provider(TracerProvider())
        monitor.record(question="q", contexts=["c"], answer="a")
        monitor.force_flush()
        monitor.shutdown()
        """
    )
    assert result.returncode == 0, result.stderr
    assert "no OpenTelemetry SDK" not in result.stderr
    assert result.stderr == "", result.stderr  # nothing lost, nothing said


def test_say_once_never_raises_under_an_error_filter(caplog: pytest.LogCaptureFixture) -> None:
    import warnings

    kind = "test: error filter"
    guard._said.discard(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard.say_once(kind, "groundwatch: said under an error filter")
        guard.say_once(kind, "groundwatch: said under an error filter")
    assert [r.getMessage() for r in caplog.records] == ["groundwatch: said under an error filter"]


def test_a_raising_judge_puts_its_exception_class_on_the_span(
    capgw: GroundwatchTelemetry,
) -> None:
    from .judges import RaisingJudge

    monitor = capgw.monitor(judge=RaisingJudge(), executor="thread")
    monitor.record(question="q", contexts=["c"], answer="a")
    capgw.flush()
    (span,) = capgw.spans()
    attrs = dict(span.attributes or {})
    assert attrs.pop("error.type") == "internal"
    assert attrs.pop("exception.type") == "RuntimeError"


def test_exit_with_work_queued_says_what_was_dropped_and_why() -> None:
    result = run_app(
        """
        monitor = gw.Monitor(judge=Slow(), executor="thread", tracer_provider=TracerProvider())
        for _ in range(1000):
            monitor.record(question="q", contexts=["c"], answer="a")
        """
    )
    assert result.returncode == 0, result.stderr
    assert said(result.stderr, "sampled records were dropped unscored") == 1, result.stderr
    line = next(x for x in result.stderr.splitlines() if "dropped unscored" in x)
    assert "at exit" in line
    assert "the 5 s deadline passed (error.type=shutdown)" in line
    assert "monitor.shutdown(timeout_millis=" in line  # what to do
    dropped = int(line.split("after ")[1].split(" s, ")[1].split()[0])
    assert 800 < dropped <= 1000  # about 100 scored in 5 s at 50 ms each


def test_shutdown_says_whether_everything_was_delivered(capgw: GroundwatchTelemetry) -> None:
    from .judges import SleepJudge

    monitor = capgw.monitor(judge=SleepJudge(0.2), executor="thread")
    for _ in range(20):
        monitor.record(question="q", contexts=["c"], answer="a")
    assert monitor.shutdown(timeout_millis=100) is False
    _, dropped = monitor.stats.snapshot()
    assert dropped.get("shutdown", 0) > 0

    quick = capgw.monitor(judge=SleepJudge(0.0), executor="thread")
    quick.record(question="q", contexts=["c"], answer="a")
    assert quick.shutdown(timeout_millis=10_000) is True
