"""The shared delivery of the dashboard sinks: batches, bounded queue, retries with backoff, the
bounded wait for spans not ingested yet, deadlines, counting, fork safety.

The exporter here is a test double of the *server* side only (it records what it is handed and
answers per write); the sinks' real exporters are tested against their real servers
(test_phoenix.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from groundwatch.dashboards import Delivery, Outcome, Reply, Write

from .conftest import EXPLODING, LostWrites

pytestmark = pytest.mark.usefixtures("fast_backoff")

DONE = Reply(Outcome.DONE)


class Server:
    """Takes batches; ``answer(write, attempt)`` decides each write's reply."""

    def __init__(
        self,
        answer: Callable[[Write], Reply] = lambda w: DONE,
        component: str = "test",
        hold: threading.Event | None = None,
    ) -> None:
        self.component = component
        self.answer = answer
        self.batches: list[list[str]] = []
        self.taken: dict[str, int] = {}
        self.hold = hold

    def export(self, writes: Sequence[Write], timeout_s: float) -> Sequence[Reply]:
        if self.hold is not None:
            self.hold.wait(10)
        self.batches.append([w.key for w in writes])
        replies = [self.answer(w) for w in writes]
        for w, r in zip(writes, replies, strict=True):
            if r.outcome is Outcome.DONE:
                self.taken[w.key] = self.taken.get(w.key, 0) + 1
        return replies


def writes(n: int) -> list[Write]:
    return [Write(key=f"w{i}", body={"i": i}) for i in range(n)]


def test_batches_of_at_most_max_batch_size_all_delivered() -> None:
    server = Server()
    delivery = Delivery(server, max_batch_size=10, schedule_delay_millis=5000)
    for w in writes(35):
        assert delivery.offer(w)
    # A full batch wakes the thread before the schedule delay; flush sends the rest.
    assert delivery.force_flush(5000)
    assert sorted(server.taken) == sorted(f"w{i}" for i in range(35))
    assert max(len(b) for b in server.batches) <= 10
    assert delivery.delivered == 35 and delivery.lost == 0
    assert delivery.shutdown(1000)


def test_schedule_delay_sends_a_partial_batch_without_a_flush() -> None:
    server = Server()
    delivery = Delivery(server, max_batch_size=100, schedule_delay_millis=50)
    delivery.offer(Write("a", {}))
    deadline = time.monotonic() + 5
    while not server.taken and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.taken == {"a": 1}
    delivery.shutdown(1000)


def test_a_full_queue_refuses_and_counts_queue_full(lost: LostWrites) -> None:
    hold = threading.Event()
    server = Server(hold=hold)
    delivery = Delivery(server, max_queue_size=4, max_batch_size=2, schedule_delay_millis=10)
    results = [delivery.offer(w) for w in writes(10)]
    hold.set()
    assert results.count(True) >= 4 and results.count(False) >= 4
    assert delivery.force_flush(5000)
    refused = results.count(False)
    assert lost.counts("test") == {"queue_full": refused}
    assert delivery.lost == refused and delivery.delivered == 10 - refused
    delivery.shutdown(1000)


def test_transient_failures_are_retried_with_backoff_then_delivered_once(
    lost: LostWrites,
) -> None:
    tries: dict[str, int] = {}

    def answer(w: Write) -> Reply:
        tries[w.key] = tries.get(w.key, 0) + 1
        return DONE if tries[w.key] >= 3 else Reply(Outcome.RETRY, "connection")

    server = Server(answer)
    delivery = Delivery(server, schedule_delay_millis=10)
    for w in writes(3):
        delivery.offer(w)
    assert delivery.force_flush(5000)
    assert tries == {"w0": 3, "w1": 3, "w2": 3}
    assert server.taken == {"w0": 1, "w1": 1, "w2": 1}
    assert lost.counts("test") == {}
    delivery.shutdown(1000)


def test_transient_failures_past_the_retry_window_are_counted_with_their_type(
    lost: LostWrites,
) -> None:
    server = Server(lambda w: Reply(Outcome.RETRY, "http_503"))
    delivery = Delivery(server, schedule_delay_millis=10, retry_window_millis=200)
    for w in writes(2):
        delivery.offer(w)
    assert delivery.force_flush(5000)
    assert lost.counts("test") == {"http_503": 2}
    assert len(server.batches) >= 3  # tried, backed off, tried again
    delivery.shutdown(1000)


def test_a_span_not_ingested_yet_is_waited_for_then_counted_span_not_found(
    lost: LostWrites,
) -> None:
    ingested_after = time.monotonic() + 0.15

    def answer(w: Write) -> Reply:
        if w.key == "late" and time.monotonic() < ingested_after:
            return Reply(Outcome.NOT_INGESTED)
        if w.key == "never":
            return Reply(Outcome.NOT_INGESTED)
        return DONE

    server = Server(answer)
    delivery = Delivery(server, schedule_delay_millis=10, span_wait_millis=400)
    delivery.offer(Write("late", {}))
    delivery.offer(Write("never", {}))
    assert delivery.force_flush(5000)
    assert server.taken == {"late": 1}
    assert lost.counts("test") == {"span_not_found": 1}
    delivery.shutdown(1000)


def test_a_refusal_is_counted_and_not_retried(lost: LostWrites) -> None:
    server = Server(lambda w: Reply(Outcome.FAILED, "http_422"))
    delivery = Delivery(server, schedule_delay_millis=10)
    delivery.offer(Write("a", {}))
    assert delivery.force_flush(5000)
    assert server.batches == [["a"]]
    assert lost.counts("test") == {"http_422": 1}
    delivery.shutdown(1000)


def test_an_exporter_that_raises_loses_its_batch_as_internal_and_the_thread_goes_on(
    lost: LostWrites,
) -> None:
    def answer(w: Write) -> Reply:
        if w.key == "bad":
            raise RuntimeError("exporter bug")
        return DONE

    server = Server(answer, component=EXPLODING)
    delivery = Delivery(server, schedule_delay_millis=10)
    delivery.offer(Write("bad", {}))
    assert delivery.force_flush(5000)
    delivery.offer(Write("good", {}))
    assert delivery.force_flush(5000)
    assert server.taken == {"good": 1}
    assert lost.counts(EXPLODING) == {"RuntimeError": 1, "internal": 1}
    delivery.shutdown(1000)


def test_shutdown_keeps_its_deadline_and_counts_what_is_left(lost: LostWrites) -> None:
    server = Server(lambda w: Reply(Outcome.RETRY, "connection"))
    delivery = Delivery(server, schedule_delay_millis=10, retry_window_millis=60_000)
    for w in writes(5):
        delivery.offer(w)
    time.sleep(0.05)
    started = time.monotonic()
    assert delivery.shutdown(300) is False
    assert time.monotonic() - started < 1.5
    assert lost.counts("test") == {"connection": 5}
    # After shutdown: refused and counted, never raised.
    assert delivery.offer(Write("late", {})) is False
    assert lost.counts("test") == {"connection": 5, "shutdown": 1}
    assert delivery.shutdown(100) is True  # a second call: nothing to do


def test_force_flush_says_false_while_the_server_is_down() -> None:
    server = Server(lambda w: Reply(Outcome.RETRY, "connection"))
    delivery = Delivery(server, schedule_delay_millis=10)
    delivery.offer(Write("a", {}))
    assert delivery.force_flush(200) is False
    assert delivery.pending() == 1
    delivery.shutdown(50)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_empty_with_a_thread_of_its_own() -> None:
    hold = threading.Event()
    server = Server(hold=hold)
    delivery = Delivery(server, schedule_delay_millis=10)
    delivery.offer(Write("parent", {}))
    pid = os.fork()
    if pid == 0:  # the child: the parent's write is not its to send
        code = 1
        try:
            ok = delivery.pending() == 0
            hold.set()
            ok = ok and delivery.offer(Write("child", {})) and delivery.force_flush(5000)
            ok = ok and server.taken == {"child": 1}
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    hold.set()
    assert delivery.force_flush(5000)
    assert server.taken == {"parent": 1}
    assert os.waitstatus_to_exitcode(status) == 0
    delivery.shutdown(1000)
