"""RedisQueue and StreamWorker in this process, against a real redis-server: the stream, the
backlog cap, an unreachable Redis, duplicates, dead letters, the lag gauge, release on stop."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import pytest

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.queue import stream_json
from groundwatch.queue.consumer import StreamWorker
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .conftest import RedisServer, _free_port, wait_for

STREAM = "groundwatch:records"
ANSWER = "Refunds are accepted within 30 days of purchase."
CONTEXTS = ["Refunds are accepted within 30 days of purchase with a receipt."]


class SlowJudge(gw.LocalJudge):
    def __init__(self, sleep_s: float) -> None:
        super().__init__()
        self.sleep_s = sleep_s

    def judge(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.sleep_s)
        return super().judge(*args, **kwargs)


class InProcessWorker:
    """A StreamWorker on its own thread and loop, on the test's telemetry."""

    def __init__(
        self, capgw: GroundwatchTelemetry, url: str, shutdown_timeout_s: float = 5.0, **kwargs: Any
    ) -> None:
        kwargs.setdefault("judge", gw.LocalJudge())
        kwargs.setdefault("executor", "thread")
        self.worker = StreamWorker(
            url,
            group="scorers",
            tracer_provider=capgw.tracer_provider,
            meter_provider=capgw.meter_provider,
            logger_provider=capgw.logger_provider,
            block_millis=100,
            **kwargs,
        )
        self.shutdown_timeout_s = shutdown_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        self._started.wait(5)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        await self.worker.run(self._stop, shutdown_timeout_s=self.shutdown_timeout_s)

    def stop(self) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive()


def _queue_monitor(capgw: GroundwatchTelemetry, url: str, **kwargs: Any) -> gw.Monitor:
    queue = gw.RedisQueue(url, **{"timeout_millis": 500, **kwargs})
    return capgw.monitor(sampler=gw.RatioSampler(1.0), queue=queue)


def test_records_go_to_the_stream_and_are_scored_in_their_trace(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    monitor = _queue_monitor(capgw, redis_server.url)
    parents = {}
    for i in range(12):
        with capgw.tracer.start_as_current_span("request") as request:
            monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=ANSWER, route="faq")
        parents[f"q{i}"] = request.get_span_context()
    assert monitor.force_flush(10_000)
    # Nothing is judged here: the records wait in the stream, in the wire format.
    assert capgw.span_exporter.get_finished_spans()[-1].name == "request"
    entries = redis_server.client().xrange(STREAM)
    assert len(entries) == 12
    docs = [stream_json.decode(fields[b"record"]) for _, fields in entries]
    assert [d.question for d in docs] == [f"q{i}" for i in range(12)]
    assert all(d.sampling_rate == 1.0 and d.route == "faq" for d in docs)

    worker = InProcessWorker(capgw, redis_server.url)
    wait_for(lambda: len(capgw.span_exporter.get_finished_spans()) >= 24, 30, "12 evaluations")
    worker.stop()
    spans = [s for s in capgw.span_exporter.get_finished_spans() if s.name == sc.SPAN_EVALUATION]
    assert len(spans) == 12
    by_id = {d.record_id: d for d in docs}
    for span in spans:
        assert span.attributes is not None
        doc = by_id[str(span.attributes[sc.GROUNDWATCH_RECORD_ID])]
        parent = parents[str(doc.question)]
        assert span.parent is not None and span.parent.span_id == parent.span_id
        assert span.context.trace_id == parent.trace_id
        assert span.attributes[sc.GROUNDWATCH_ROUTE] == "faq"
        assert span.attributes[sc.GROUNDWATCH_SAMPLING_RATE] == 1.0
        assert span.attributes[sc.GROUNDWATCH_LABEL] == "grounded"
    # Acknowledged entries are deleted: the stream's length is its backlog.
    assert redis_server.client().xlen(STREAM) == 0
    sampled = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled")
    assert sampled == 12 == capgw.metric_total(sc.METRIC_EVALUATIONS)


def test_a_full_stream_counts_queue_full_and_trims_nothing(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    monitor = _queue_monitor(capgw, redis_server.url, max_backlog=5)
    for i in range(9):
        monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=ANSWER)
        assert monitor.force_flush(10_000)
    client = redis_server.client()
    assert client.xlen(STREAM) == 5  # every sent record is still there
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled") == 5
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="queue_full") == 4
    # Workers make room: the producer sees it and accepts records again.
    worker = InProcessWorker(capgw, redis_server.url)
    wait_for(lambda: client.xlen(STREAM) == 0, 30, "the workers to drain the stream")
    time.sleep(0.6)  # two backlog polls
    monitor.record(question="again", contexts=CONTEXTS, answer=ANSWER)
    assert monitor.force_flush(10_000)
    wait_for(lambda: capgw.metric_total(sc.METRIC_EVALUATIONS) == 6, 30, "6 evaluations")
    worker.stop()
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled") == 6


def test_unreachable_redis_never_blocks_or_raises_and_counts_every_record(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "_last_logged", {})
    url = f"redis://127.0.0.1:{_free_port()}/0"  # nobody listens
    queue = gw.RedisQueue(url, timeout_millis=100, send_timeout_millis=300)
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0), queue=queue, max_queue_size=20)
    slowest = 0.0
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        for i in range(300):
            start = time.perf_counter()
            monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=ANSWER)
            slowest = max(slowest, time.perf_counter() - start)
            if i % 50 == 0:
                time.sleep(0.2)  # let batches time out meanwhile
        monitor.shutdown(3_000)
    assert slowest < 0.05, f"record() took {slowest * 1000:.1f} ms"
    decided = capgw.metric_total(sc.METRIC_RECORDS)
    sampled = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled")
    full = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="queue_full")
    transport = capgw.metric_total(sc.METRIC_DROPPED, error__type="transport")
    shutdown = capgw.metric_total(sc.METRIC_DROPPED, error__type="shutdown")
    assert decided == 300 and sampled + full == 300
    assert transport > 0 and full > 0
    assert sampled == transport + shutdown  # nothing sent, nothing lost uncounted
    redis_warnings = [r for r in caplog.records if "Redis" in r.getMessage()]
    assert len(redis_warnings) == 1, [r.getMessage() for r in redis_warnings]


@pytest.mark.parametrize("outage", ["closed port", "stopped server"])
def test_shutdown_keeps_its_deadline_with_redis_down_and_counts_the_lost_as_transport(
    capgw: GroundwatchTelemetry, request: pytest.FixtureRequest, outage: str
) -> None:
    if outage == "closed port":
        url, server = f"redis://127.0.0.1:{_free_port()}/0", None
    else:
        server = request.getfixturevalue("redis_server")
        url = server.url
    # The queue's own retry window (send_timeout_millis) is longer than the shutdown deadline.
    queue = gw.RedisQueue(url, batch_size=16, send_timeout_millis=60_000)
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0), queue=queue)
    sent = 0
    if server is not None:
        for i in range(5):
            monitor.record(question=f"before{i}", contexts=CONTEXTS, answer=ANSWER)
        assert monitor.force_flush(10_000)
        sent = server.client().xlen(STREAM)
        assert sent == 5
        server.stop()
    for i in range(200):  # more than one batch: some wait in the monitor's queue
        monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=ANSWER)
    time.sleep(0.3)  # the first batch fails and backs off
    start = time.monotonic()
    delivered = monitor.shutdown(timeout_millis=1_500)
    took = time.monotonic() - start
    assert took < 1.5 + 1.5, f"shutdown(1500 ms) took {took:.1f} s"
    assert delivered is False  # it says whether everything was delivered
    sampled = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled")
    transport = capgw.metric_total(sc.METRIC_DROPPED, error__type="transport")
    assert sampled == 205 if server is not None else 200
    # Every record Redis did not take is counted, and counted as what it was: a lost Redis.
    assert transport == sampled - sent == 200
    assert capgw.metric_total(sc.METRIC_DROPPED, error__type="shutdown") == 0


def test_an_app_losing_records_to_a_stopped_redis_says_so_on_stderr(
    redis_server: RedisServer,
) -> None:
    from ..runtime.test_said_once import run_app, said

    redis_server.stop()  # an outage: the app starts while Redis is down
    result = run_app(
        f"""
        monitor = gw.Monitor(queue=gw.RedisQueue({redis_server.url!r}))
        for i in range(5):
            monitor.record(question="q", contexts=["c"], answer="a")
        time.sleep(0.3)
        print(monitor.shutdown(timeout_millis=5_000), monitor.stats.snapshot()[1])
        """
    )
    assert result.stdout.split("\n")[0] == "False {'transport': 5}", result.stderr
    # Once the first failure, once what shutdown dropped; each on a line of its own.
    assert said(result.stderr, "cannot send records to Redis stream") == 1, result.stderr
    assert said(result.stderr, "5 not handed over: RedisQueue(stream=") == 1, result.stderr
    assert "Connection refused" in result.stderr or "Error 111" in result.stderr


def test_shutdown_does_not_wait_out_the_retry_window_of_a_redis_that_refuses(
    capgw: GroundwatchTelemetry,
) -> None:
    # A deadline of a minute is the most shutdown may take, not what it must take: with Redis
    # refusing, one last attempt fails at once and there is nothing left to wait for (the
    # queue's retry window of 30 s is for an outage while the app runs).
    queue = gw.RedisQueue(f"redis://127.0.0.1:{_free_port()}/0")
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0), queue=queue)
    for i in range(100):
        monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=ANSWER)
    time.sleep(0.3)
    start = time.monotonic()
    monitor.shutdown(timeout_millis=60_000)
    took = time.monotonic() - start
    assert took < 15, f"shutdown took {took:.1f} s with Redis refusing every connection"
    assert capgw.metric_total(sc.METRIC_DROPPED, error__type="transport") == 100


def _entry(record_id: str, question: str = "q") -> dict[str, bytes]:
    record = gw.RagRecord(question, [gw.Passage(text=CONTEXTS[0])], ANSWER, record_id=record_id)
    return {stream_json.FIELD: stream_json.encode(record, 0.5, time.time_ns())}


def test_the_same_record_twice_is_scored_once(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    for _ in range(3):  # a producer that resent a batch after a lost reply
        client.xadd(STREAM, _entry("00000000000000aa"))
    client.xadd(STREAM, _entry("00000000000000bb"))
    worker = InProcessWorker(capgw, redis_server.url)
    wait_for(lambda: client.xlen(STREAM) == 0, 30, "the stream to drain")
    worker.stop()
    spans = capgw.spans()
    assert sorted(str((s.attributes or {})[sc.GROUNDWATCH_RECORD_ID]) for s in spans) == [
        "00000000000000aa",
        "00000000000000bb",
    ]
    assert worker.worker.duplicates == 2
    assert spans[0].attributes is not None
    assert spans[0].attributes[sc.GROUNDWATCH_SAMPLING_RATE] == 0.5


class HeldJudge(gw.LocalJudge):
    """A LocalJudge whose calls wait until the test lets them go."""

    def __init__(self, go: threading.Event) -> None:
        super().__init__()
        self.go = go

    def judge(self, *args: Any, **kwargs: Any) -> Any:
        self.go.wait(30)
        return super().judge(*args, **kwargs)


def test_two_workers_taking_copies_of_one_record_score_it_once(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    # The race of a check then a later mark, made certain: the first copy is being judged (no
    # record of it in Redis yet) when a second worker takes the resent copy.
    client = redis_server.client()
    go = threading.Event()
    client.xadd(STREAM, _entry("00000000000000aa"))
    client.xadd(STREAM, _entry("00000000000000cc"))
    first = InProcessWorker(capgw, redis_server.url, judge=HeldJudge(go), consumer="first")
    workers = [first]
    try:
        # Both held (one judged, one waiting for the judge): the first worker has no room.
        wait_for(lambda: len(first.worker._held) == 2, 10, "the first worker to hold both")
        client.xadd(STREAM, _entry("00000000000000aa"))  # the producer resent it
        second = InProcessWorker(capgw, redis_server.url, judge=HeldJudge(go), consumer="second")
        workers.append(second)
        wait_for(
            lambda: second.worker._held or second.worker.duplicates, 10, "the copy to be taken"
        )
    finally:
        go.set()
    wait_for(lambda: client.xlen(STREAM) == 0, 30, "the stream to drain")
    for worker in workers:
        worker.stop()
    ids = sorted(str((s.attributes or {})[sc.GROUNDWATCH_RECORD_ID]) for s in capgw.spans())
    assert ids == ["00000000000000aa", "00000000000000cc"]
    assert (first.worker.duplicates, second.worker.duplicates) == (0, 1)
    assert client.xpending(STREAM, "scorers")["pending"] == 0


def test_an_entry_a_worker_takes_back_while_scoring_it_is_neither_acknowledged_nor_rescored(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A heartbeat that comes too late (here: none) lets the worker's own XAUTOCLAIM take back
    # the entry it is judging. That copy is the same entry, not a duplicate: acknowledging it
    # would lose the record if the judging then failed; scoring it would score it twice.
    async def no_heartbeat(self: StreamWorker) -> None:
        return None

    monkeypatch.setattr(StreamWorker, "_heartbeat", no_heartbeat)
    client = redis_server.client()
    go = threading.Event()
    entry = client.xadd(STREAM, _entry("00000000000000aa"))
    worker = InProcessWorker(
        capgw, redis_server.url, judge=HeldJudge(go), visibility_timeout_millis=200
    )

    def deliveries() -> int:
        pending = client.xpending_range(STREAM, "scorers", "-", "+", 10)
        return int(pending[0]["times_delivered"]) if pending else 0

    try:
        wait_for(lambda: worker.worker._held, 10, "the entry held")
        wait_for(
            lambda: deliveries() >= 3 or worker.worker.duplicates,
            20,
            "the worker to take its entry back twice (scoring it again stalls it here)",
        )
        assert worker.worker.duplicates == 0
        assert [e for e, _ in client.xrange(STREAM)] == [entry]  # not acknowledged
    finally:
        go.set()
    wait_for(lambda: client.xlen(STREAM) == 0, 30, "the stream to drain")
    worker.stop()
    assert [str((s.attributes or {})[sc.GROUNDWATCH_RECORD_ID]) for s in capgw.spans()] == [
        "00000000000000aa"
    ]
    assert worker.worker.duplicates == worker.worker.dead_lettered == 0


def test_malformed_and_poison_entries_are_dead_lettered_and_counted(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    client.xadd(STREAM, {"record": b"not json"})
    client.xadd(STREAM, {"record": json.dumps({"version": 99}).encode()})
    client.xadd(STREAM, {"something": b"else"})
    client.xadd(STREAM, _entry("00000000000000cc"))
    # A valid entry some consumer received over and over (it crashed the worker each time).
    client.xgroup_create(STREAM, "scorers", id="0", mkstream=True)
    poison = client.xadd(STREAM, _entry("00000000000000dd"))
    client.xreadgroup("scorers", "ghost", {STREAM: ">"}, count=5)
    client.xclaim(STREAM, "scorers", "ghost", 0, [poison], idle=10**6, retrycount=9)
    for entry_id, _ in client.xrange(STREAM):
        if entry_id != poison:  # the others go back to the group's pending list, unread
            client.xclaim(STREAM, "scorers", "ghost", 0, [entry_id], idle=10**6, retrycount=0)
    client.xadd(STREAM, _entry("00000000000000ee"))  # after the bad ones: the worker goes on

    worker = InProcessWorker(capgw, redis_server.url, visibility_timeout_millis=1000)
    wait_for(lambda: client.xlen(STREAM) == 0, 30, "the stream to drain")
    worker.stop()
    ids = sorted(str((s.attributes or {})[sc.GROUNDWATCH_RECORD_ID]) for s in capgw.spans())
    assert ids == ["00000000000000cc", "00000000000000ee"]
    dead = client.xrange(f"{STREAM}:dead")
    reasons = sorted(fields[b"reason"].decode() for _, fields in dead)
    assert len(dead) == 4
    assert any("delivered 10 times" in r for r in reasons)
    assert sum("not a version 1 record" in r or "no 'record' field" in r for r in reasons) == 3
    assert capgw.metric_total(sc.METRIC_DROPPED, error__type="invalid_input") == 3
    assert capgw.metric_total(sc.METRIC_DROPPED, error__type="internal") == 1
    assert client.xpending(STREAM, "scorers")["pending"] == 0


async def test_lag_gauge_reports_the_groups_backlog(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    for i in range(7):
        client.xadd(STREAM, _entry(f"{i:016x}"))
    worker = StreamWorker(
        redis_server.url,
        group="scorers",
        judge=gw.LocalJudge(),
        meter_provider=capgw.meter_provider,
        tracer_provider=capgw.tracer_provider,
        logger_provider=capgw.logger_provider,
    )
    from groundwatch.queue.redis import connect

    worker._client = connect(redis_server.url, 1.0)
    await worker._ensure_group()
    await worker._poll_lag()
    assert [v for _, v in capgw.metric_points(sc.METRIC_QUEUE_LAG)] == [7]
    taken = await worker._read(3)
    await worker._ack([e for e, _ in taken])
    await worker._poll_lag()
    assert [v for _, v in capgw.metric_points(sc.METRIC_QUEUE_LAG)] == [4]
    await worker._client.aclose()


def test_stop_releases_held_entries_for_others_at_once(
    capgw: GroundwatchTelemetry, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    for i in range(4):
        client.xadd(STREAM, _entry(f"{i:016x}"))
    slow = InProcessWorker(capgw, redis_server.url, 0.2, judge=SlowJudge(2.0), consumer="slow")
    wait_for(lambda: slow.worker._held, 10, "entries held")
    slow.stop()
    assert slow.worker.scored == 0
    pending = client.xpending_range(STREAM, "scorers", "-", "+", 10)
    assert pending and all(p["time_since_delivered"] >= 60_000 for p in pending)
    # A visibility timeout of a minute, yet the next worker takes them over at once.
    fast = InProcessWorker(capgw, redis_server.url, visibility_timeout_millis=60_000)
    wait_for(lambda: client.xlen(STREAM) == 0, 20, "the released entries to be scored")
    fast.stop()
    assert len(capgw.spans()) == 4


def test_the_worker_decides_each_records_audit_once_and_its_audit_file_agrees(
    capgw: GroundwatchTelemetry,
    redis_server: RedisServer,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As Results.finish does in the app: one decision per record, which the span, the events
    # and the DatasetSink's audit file all read (not one for the span and another for the sink).
    from groundwatch.rates import _audit

    calls: list[int] = []
    real = _audit.is_audited

    def counted(key: int, audit_rate: float) -> bool:
        calls.append(key)
        return real(key, audit_rate)

    monkeypatch.setattr(_audit, "is_audited", counted)
    monitor = _queue_monitor(capgw, redis_server.url)
    n = 30
    for i in range(n):
        with capgw.tracer.start_as_current_span("request"):
            monitor.record(question=f"q{i}", contexts=CONTEXTS, answer=f"{ANSWER} Case {i}.")
    assert monitor.force_flush(10_000)
    path = tmp_path / "audit.jsonl"
    sink = gw.DatasetSink(path, when="audit")
    worker = InProcessWorker(
        capgw, redis_server.url, audit_rate=0.5, capture_content=True, on_result=[sink]
    )
    wait_for(lambda: len(capgw.spans()) >= n, 30, f"{n} evaluations")
    worker.stop()
    assert len(calls) == n  # one hash per judged record
    spans = capgw.spans()
    marked = {
        f"{s.context.trace_id:032x}"
        for s in spans
        if (s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)
    }
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert 3 < len(marked) < n - 3
    assert {row["id"] for row in rows} == marked
