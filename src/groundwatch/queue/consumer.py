"""The consumer side of distributed scoring: :class:`StreamWorker`, run by ``groundwatch worker``.

One consumer of a Redis consumer group. It reads entries (``XREADGROUP``), scores them with
the same runners (:func:`groundwatch.runtime.worker.evaluate_records`) and the same telemetry
(:class:`groundwatch.telemetry.Telemetry`) as the in-process monitor, the evaluation span
parented to the record's captured trace context, and acknowledges an entry only after its
evaluation is emitted. At-least-once, with nothing lost uncounted:

- an entry stays pending until acknowledged; a live worker refreshes its pending entries'
  idle time (a heartbeat), so entries of a dead worker are the ones idle past the visibility
  timeout, and another worker takes them over (``XAUTOCLAIM``);
- an entry that cannot be read, or that was delivered ``max_deliveries`` times, goes to the
  dead-letter stream and is counted (``groundwatch.evaluations.dropped``, ``error.type``
  ``invalid_input`` or ``internal``);
- one marker key per record id suppresses a second evaluation of a record sent twice: the
  first entry to reach a worker takes the record with an atomic check-and-set (a Lua script),
  and every other entry of that record id is acknowledged as a duplicate, whether the first is
  still being scored (here or on another worker) or is done; a reclaimed entry finds the
  record taken by itself and is scored again (at-least-once);
- on stop (SIGTERM) it reads no more, finishes what it holds within a deadline and releases
  the rest for others to take at once.

Acknowledged entries are deleted (``XACK`` + ``XDEL``), so the stream's length is its backlog,
which the producer caps. One consumer group per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import TracerProvider

from .._fields import as_evaluation
from .._shared import guard
from ..judging import scoring
from ..judging.judges import Judge
from ..runtime.pipeline import evaluate_records
from ..runtime.results import AuditDecision, ResultCallback
from ..runtime.runners.choice import runner_for
from ..runtime.runners.contract import Runner
from ..telemetry import Stats, Telemetry
from ..telemetry import semconv as sc
from ..types import RagRecord
from . import stream_json
from .redis import DEFAULT_STREAM, MAX_BACKOFF_S, connect, transport_errors

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["StreamWorker"]

_logger = logging.getLogger("groundwatch")

Entry = tuple[str, dict[bytes, bytes]]
RELEASED_IDLE_MS = 86_400_000
"""The idle time a stopping worker gives the entries it releases: past any worker's
visibility timeout, so the next ``XAUTOCLAIM`` takes them."""
Taken = tuple[str, RagRecord, float | None]
"""``(entry id, record, sampling rate)``."""
DONE = b"1"
"""The marker's value once the record's evaluation is emitted and its entry acknowledged."""
TAKE_SCRIPT = """
local taken = {}
for i, key in ipairs(KEYS) do
  local mine = 'taken:' .. ARGV[i + 1]
  local now = redis.call('GET', key)
  if not now then
    redis.call('SET', key, mine, 'EX', ARGV[1])
    taken[i] = 1
  elseif now == mine then
    taken[i] = 1
  else
    taken[i] = 0
  end
end
return taken
"""
"""Take each record for one entry, atomically: ``KEYS`` the markers, ``ARGV`` the marker's
lifetime then each key's entry id. 1: this entry has the record (taken now, or by this same
entry before: a redelivery); 0: another entry has it, or it is done (a duplicate). One script,
so two workers that read copies of a record at once cannot both find it free."""


def _decode_entries(raw: Iterable[Any]) -> list[Entry]:
    return [(i.decode() if isinstance(i, bytes) else str(i), dict(f or {})) for i, f in raw]


async def _slot(semaphore: asyncio.Semaphore, stop: asyncio.Event) -> bool:
    """Acquire ``semaphore`` unless ``stop`` is set first; whether it was acquired."""
    if stop.is_set():
        return False
    if not semaphore.locked():
        await semaphore.acquire()
        return True
    acquire = asyncio.ensure_future(semaphore.acquire())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not acquire.done():
        acquire.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await acquire
    if acquire.cancelled():
        return False
    if stop.is_set():
        semaphore.release()
        return False
    return True


class StreamWorker:
    """Score records from a Redis stream as one consumer of ``group``.

    Args:
        url: the Redis URL.
        group: the consumer group (created at the start of the stream if missing).
        judge: the judge (any groundwatch judge, sync or async).
        stream: the stream the producers write (``RedisQueue(stream=...)``).
        consumer: this consumer's name, unique in the group (default ``host-pid``).
        concurrency: judge calls in flight (async judges) or judge processes (sync judges).
        executor: where a sync judge runs, as for ``Monitor`` (``auto``, ``process``, ``thread``).
        visibility_timeout_millis: an entry pending this long without a heartbeat from its
            consumer is taken over by another.
        max_deliveries: deliveries after which an entry is dead-lettered instead.
        dead_letter_stream: default ``<stream>:dead``.
        dedup_ttl_s: lifetime of the per-record marker that suppresses duplicates.
        evaluation_timeout_millis, policy, capture_content, redact, content_max_chars,
        tracer_provider, meter_provider, logger_provider, audit_rate: as for ``Monitor``
            (``audit_rate``: the same as the producers', so that both mark the same traces).
        on_result: callbacks ``(record, evaluation)`` after each evaluation is emitted, as
            for ``Monitor`` (a :class:`~groundwatch.DatasetSink`, ``--audit-file``); flushed
            and closed when :meth:`run` ends.
    """

    def __init__(
        self,
        url: str,
        *,
        group: str,
        judge: Judge,
        stream: str = DEFAULT_STREAM,
        consumer: str | None = None,
        concurrency: int = 1,
        executor: str = "auto",
        visibility_timeout_millis: int = 30_000,
        max_deliveries: int = 5,
        dead_letter_stream: str | None = None,
        dedup_ttl_s: int = 86_400,
        evaluation_timeout_millis: int = 60_000,
        policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
        capture_content: bool = False,
        redact: Callable[[str], str] | None = None,
        content_max_chars: int = 2048,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        block_millis: int = 1000,
        timeout_millis: int = 2000,
        audit_rate: float = 0.0,
        on_result: Sequence[ResultCallback] = (),
    ) -> None:
        for name, value in (
            ("concurrency", concurrency),
            ("visibility_timeout_millis", visibility_timeout_millis),
            ("max_deliveries", max_deliveries),
            ("dedup_ttl_s", dedup_ttl_s),
            ("evaluation_timeout_millis", evaluation_timeout_millis),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if not 0.0 <= audit_rate <= 1.0:
            raise ValueError(f"audit_rate must be within [0, 1], got {audit_rate!r}")
        self.url = url
        self.stream = stream
        self.group = group
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.dead_letter_stream = dead_letter_stream or f"{stream}:dead"
        self.visibility_ms = visibility_timeout_millis
        self.max_deliveries = max_deliveries
        self.dedup_ttl_s = dedup_ttl_s
        self.timeout_s = evaluation_timeout_millis / 1000
        self.policy = policy
        self.block_ms = block_millis
        self.redis_timeout_s = timeout_millis / 1000
        self.runner: Runner = runner_for(judge, executor, concurrency, concurrency)
        self.capture_content = capture_content
        self.stats = Stats(lambda: len(self._held))
        self._telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
            redact=redact,
            content_max_chars=content_max_chars,
            stats=self.stats,
            audit_rate=audit_rate,
        )
        self._audit = AuditDecision(self._telemetry)
        """One audit decision per record: the span, the events and the bound callbacks (a
        DatasetSink's audit file) read the one :meth:`_score` takes."""
        self.on_result = list(on_result)
        for callback in self.on_result:
            bind = getattr(callback, "bind_monitor", None)
            if callable(bind):  # a DatasetSink: this worker's content settings and audit
                bind(
                    capture_content=capture_content,
                    redact=redact,
                    audited=self._audit,
                    audit_rate=audit_rate,
                )
        mp = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        mp.get_meter(sc.INSTRUMENTATION_NAME).create_observable_gauge(
            sc.METRIC_QUEUE_LAG,
            callbacks=[self._observe_lag],
            unit="{record}",
            description="Entries of the stream not yet delivered to the consumer group",
        )
        self.lag: int | None = None
        """The group's lag when last polled (``None`` before the first poll)."""
        self.ready = False
        """Connected, the group exists, and not stopping (the readiness probe)."""
        self.alive_at = time.monotonic()
        """When the loop last went round (the liveness probe)."""
        self.scored = 0
        self.duplicates = 0
        self.dead_lettered = 0
        self._held: dict[str, float] = {}  # entry id -> when taken
        self._client: Redis | None = None
        self._take_script: AsyncScript | None = None
        self._room = asyncio.Event()

    def _observe_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        if self.lag is not None:
            yield Observation(self.lag)

    # --- the loop ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, *, shutdown_timeout_s: float = 30.0) -> None:
        """Consume until ``stop`` is set, then finish or release what is held within
        ``shutdown_timeout_s``. Redis outages are waited out with backoff."""
        self._client = connect(self.url, self.redis_timeout_s + self.block_ms / 1000)
        self._take_script = self._client.register_script(TAKE_SCRIPT)
        tasks: set[asyncio.Task[None]] = set()
        semaphore = asyncio.Semaphore(self.runner.concurrency)
        side = [
            asyncio.create_task(self._every(self.visibility_ms / 3000, self._heartbeat)),
            asyncio.create_task(self._every(1.0, self._poll_lag)),
        ]
        delay = 0.0
        next_reclaim = 0.0
        try:
            while not stop.is_set():
                self.alive_at = time.monotonic()
                try:
                    if not self.ready:
                        await self._ensure_group()
                        self.ready = True
                    room = self._capacity() - len(self._held)
                    if room <= 0:
                        self._room.clear()
                        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                            await asyncio.wait_for(self._room.wait(), self.block_ms / 1000)
                        continue
                    entries: list[Entry] = []
                    claimed = False
                    if time.monotonic() >= next_reclaim:
                        next_reclaim = time.monotonic() + min(5.0, self.visibility_ms / 2000)
                        entries = await self._reclaim(room)
                        claimed = bool(entries)
                    if not entries:
                        entries = await self._read(room)
                    batches = await self._accept(entries, claimed) if entries else []
                    delay = 0.0
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    # Redis lost or restarted (NOGROUP: the group went with its data), or a
                    # bug of ours: back off and start over; what is pending stays pending.
                    if not isinstance(exc, transport_errors()) and "NOGROUP" not in str(exc):
                        guard.internal_error("worker", exc, reraise=False)
                    self.ready = False
                    delay = min(MAX_BACKOFF_S, max(0.05, delay * 2))
                    guard.warning(
                        "redis worker",
                        "groundwatch worker: Redis unavailable, retrying (logged at most once a "
                        "minute): %s: %s",
                        type(exc).__name__,
                        exc,
                    )
                    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    continue
                for batch in batches:
                    if not await _slot(semaphore, stop):
                        break  # stopping: what is left is still held, and released
                    task = asyncio.create_task(self._score(batch, semaphore))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            self.ready = False
            for task in side:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=shutdown_timeout_s)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            await self._release()
            self.runner.close()
            for callback in self.on_result:
                close = getattr(callback, "close", None)
                if callable(close):
                    try:
                        await asyncio.to_thread(close, shutdown_timeout_s)
                    except Exception as exc:
                        guard.user_error("on_result", exc)
            with contextlib.suppress(Exception):
                await self._client.aclose()

    def _capacity(self) -> int:
        # Twice what the runner takes at once: the next round is read while this one is
        # judged, so a Redis round trip does not sit between two judge calls.
        return 2 * self.runner.concurrency * max(1, self.runner.batch_size())

    async def _every(self, interval_s: float, step: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await step()
            except transport_errors():
                pass  # the main loop reports and backs off

    async def _ensure_group(self) -> None:
        from redis.exceptions import ResponseError

        assert self._client is not None
        try:
            await self._client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _read(self, count: int) -> list[Entry]:
        assert self._client is not None
        reply: Any = await self._client.xreadgroup(
            self.group, self.consumer, {self.stream: ">"}, count=count, block=self.block_ms
        )
        entries: list[Entry] = []
        for _stream, raw in reply or []:
            entries.extend(_decode_entries(raw))
        return entries

    async def _reclaim(self, count: int) -> list[Entry]:
        """Entries other consumers left pending past the visibility timeout."""
        assert self._client is not None
        reply: Any = await self._client.xautoclaim(
            self.stream, self.group, self.consumer, self.visibility_ms, "0-0", count=count
        )
        return _decode_entries(reply[1])

    async def _deliveries(self, ids: Sequence[str]) -> dict[str, int]:
        assert self._client is not None
        rows: Any = await self._client.xpending_range(
            self.stream,
            self.group,
            min=ids[0],
            max=ids[-1],
            count=len(ids) + 100,
            consumername=self.consumer,
        )
        return {
            (
                r["message_id"].decode() if isinstance(r["message_id"], bytes) else r["message_id"]
            ): int(r["times_delivered"])
            for r in rows
        }

    async def _accept(self, entries: list[Entry], claimed: bool) -> list[list[Taken]]:
        """Decode, dead-letter what cannot be scored, drop duplicates; batches to score."""
        assert self._client is not None
        deliveries = await self._deliveries([e for e, _ in entries]) if claimed else {}
        good: list[Taken] = []
        for entry_id, fields in entries:
            if entry_id in self._held:
                # Reclaimed by this worker while it scores it (a heartbeat came late): it is
                # neither a new copy to score nor a duplicate to acknowledge.
                continue
            raw = fields.get(stream_json.FIELD.encode())
            try:
                if raw is None:
                    raise stream_json.MalformedRecord(f"no {stream_json.FIELD!r} field")
                doc = stream_json.decode(raw)
            except stream_json.MalformedRecord as exc:
                await self._dead_letter(entry_id, fields, str(exc), sc.ERROR_INVALID_INPUT)
                continue
            if deliveries.get(entry_id, 1) > self.max_deliveries:
                reason = f"delivered {deliveries[entry_id]} times"
                await self._dead_letter(entry_id, fields, reason, sc.ERROR_INTERNAL)
                continue
            good.append((entry_id, doc.to_record(), doc.sampling_rate))
        if good:
            # Checked and marked in one step on Redis: a check here and a mark after scoring
            # left a window in which two copies (on two workers, or here while the first
            # finished) both found the record free and were both scored.
            assert self._take_script is not None
            mine = await self._take_script(
                keys=[self._marker(record.record_id) for _, record, _ in good],
                args=[self.dedup_ttl_s, *(entry_id for entry_id, _, _ in good)],
            )
            done = [t[0] for t, ok in zip(good, mine, strict=True) if not int(ok)]
            good = [t for t, ok in zip(good, mine, strict=True) if int(ok)]
            if done:
                # Another entry has the record: if it fails it stays pending and is taken
                # over, so acknowledging this copy loses nothing. Had this acknowledgement
                # failed, the round fails: the entries taken stay pending, and their own
                # redelivery finds the record still theirs.
                self.duplicates += len(done)
                await self._ack(done)
        # Held (heartbeat, release) only once they are to be scored: if this round fails on
        # the way, its entries stay pending and another round reclaims them.
        now = time.monotonic()
        for entry_id, _, _ in good:
            self._held[entry_id] = now
        size = max(1, self.runner.batch_size())
        return [good[i : i + size] for i in range(0, len(good), size)]

    def _marker(self, record_id: str) -> str:
        return f"{self.stream}:done:{record_id}"

    async def _score(self, batch: list[Taken], semaphore: asyncio.Semaphore) -> None:
        try:
            records = [r for _, r, _ in batch]
            results = await evaluate_records(self.runner, records, self.policy, self.timeout_s)
            metric_batch = self._telemetry.batch()
            for (_, record, rate), result in zip(batch, results, strict=True):
                try:
                    self._telemetry.emit(
                        record,
                        result.evaluation,
                        sampling_rate=rate,
                        start_ns=result.start_ns,
                        end_ns=result.end_ns,
                        batch=metric_batch,
                        audited=self._audit.decide(record, result.evaluation),
                    )
                except Exception as exc:
                    guard.internal_error("telemetry", exc, reraise=False)
                for callback in self.on_result:
                    try:
                        callback(record, as_evaluation(result.evaluation))
                    except BaseException as exc:  # user code must not end the worker
                        guard.user_error("on_result", exc)
            metric_batch.flush()
            self.scored += len(batch)
            await self._ack([e for e, _, _ in batch], [r.record_id for _, r, _ in batch])
        except asyncio.CancelledError:
            raise  # still held: run() releases it on the way out
        except Exception as exc:
            # Not acknowledged: no longer held (no heartbeat), so the entries are taken over
            # after the visibility timeout. A lost Redis is the main loop's to report.
            if not isinstance(exc, transport_errors()):
                guard.internal_error("worker", exc, reraise=False)
            for entry_id, _, _ in batch:
                self._held.pop(entry_id, None)
        finally:
            semaphore.release()
            self._room.set()

    async def _ack(self, entry_ids: list[str], record_ids: Sequence[str] = ()) -> None:
        """Mark the records done, acknowledge and delete their entries (one round trip).

        Retried with backoff for half the visibility timeout (every command is idempotent):
        an evaluation already emitted must not be scored again elsewhere for want of its
        acknowledgement. Raises the transport error when Redis stays away."""
        assert self._client is not None
        deadline = time.monotonic() + self.visibility_ms / 2000
        delay = 0.05
        while True:
            pipe = self._client.pipeline(transaction=False)
            for record_id in record_ids:
                pipe.set(self._marker(record_id), DONE, ex=self.dedup_ttl_s)
            pipe.xack(self.stream, self.group, *entry_ids)
            pipe.xdel(self.stream, *entry_ids)
            try:
                await pipe.execute()
                break
            except transport_errors():
                if time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(MAX_BACKOFF_S, delay * 2)
        for entry_id in entry_ids:
            self._held.pop(entry_id, None)

    async def _dead_letter(
        self, entry_id: str, fields: dict[bytes, bytes], reason: str, error_type: str
    ) -> None:
        assert self._client is not None
        dead: dict[Any, Any] = dict(fields)
        dead.update({b"entry_id": entry_id, b"reason": reason[:500], b"stream": self.stream})
        pipe = self._client.pipeline(transaction=False)
        pipe.xadd(self.dead_letter_stream, dead)
        pipe.xack(self.stream, self.group, entry_id)
        pipe.xdel(self.stream, entry_id)
        await pipe.execute()
        self._held.pop(entry_id, None)
        self.dead_lettered += 1
        self.stats.count_dropped(error_type)
        guard.warning(
            "redis dead letter",
            "groundwatch worker: entry %s moved to %r (logged at most once a minute): %s",
            entry_id,
            self.dead_letter_stream,
            reason,
        )

    async def _heartbeat(self) -> None:
        """Reset the idle time of the entries this worker holds, so nobody reclaims them."""
        ids = list(self._held)
        if ids and self._client is not None:
            await self._client.xclaim(
                self.stream, self.group, self.consumer, 0, list[Any](ids), justid=True
            )

    async def _poll_lag(self) -> None:
        assert self._client is not None
        for info in await self._client.xinfo_groups(self.stream):
            name = info.get("name")
            if (name.decode() if isinstance(name, bytes) else name) == self.group:
                lag = info.get("lag")
                if lag is None:  # Redis cannot tell (deleted entries): the stream less pending
                    lag = await self._client.xlen(self.stream) - int(info.get("pending", 0))
                self.lag = max(0, int(lag))

    async def _release(self) -> None:
        """Make what this worker still holds look idle for a day: the next ``XAUTOCLAIM`` of
        any other worker takes it at once."""
        ids = list(self._held)
        if not ids or self._client is None:
            return
        with contextlib.suppress(*transport_errors()):
            await asyncio.wait_for(
                self._client.xclaim(
                    self.stream,
                    self.group,
                    self.consumer,
                    0,
                    list[Any](ids),
                    idle=RELEASED_IDLE_MS,
                    justid=True,
                ),
                self.redis_timeout_s,
            )
        self._held.clear()
