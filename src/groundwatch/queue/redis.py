"""The producer side of distributed scoring: :class:`RedisQueue`.

``Monitor(queue=RedisQueue(url))`` keeps the request path as it is (``record()`` appends to the
monitor's bounded deque); the monitor's worker thread prepares each sampled record (the same
caps as in-process scoring), encodes it (:mod:`.wire`) and sends it with ``XADD`` in pipelined
batches instead of judging it. ``groundwatch worker`` (:mod:`.consumer`) scores it elsewhere.

Nothing here blocks or raises into the host:

- the monitor's deque is the bounded local buffer: while Redis is down or slow it fills and
  ``record()`` counts ``groundwatch.records{decision=queue_full}``;
- a batch that cannot be sent is retried with exponential backoff and jitter for
  ``send_timeout_millis``, then counted in ``groundwatch.evaluations.dropped{error.type=
  transport}``; one warning a minute says why;
- the stream's backlog is capped: past ``max_backlog`` entries the producer stops accepting
  records (``queue_full``) until the workers catch up; nothing unread is ever trimmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from .._shared import guard
from .._shared.errors import install_hint
from ..runtime.pipeline import InvalidRecord, prepare_record
from ..runtime.sampling import record_sampling_rate
from ..telemetry import Stats
from ..telemetry import semconv as sc
from ..types import RagRecord
from . import stream_json

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ..runtime.runners.contract import Pacer

__all__ = ["DEFAULT_STREAM", "RedisQueue"]

_logger = logging.getLogger("groundwatch")

DEFAULT_STREAM = "groundwatch:records"
INSTALL_HINT = f"RedisQueue needs the redis extra, {install_hint('redis')}"
BACKLOG_POLL_S = 0.25
"""How often a producer that found the stream full looks again."""
MAX_BACKOFF_S = 2.0


def connect(url: str, timeout_s: float) -> Redis:
    """An asyncio Redis client for ``url`` that fails fast: no retries of its own (the caller
    backs off), connect and read deadlines of ``timeout_s``."""
    try:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


def refusal(exc: BaseException) -> str | None:
    """Why Redis will not take us, when ``exc`` says it is the configuration and not an outage
    (retrying cannot help): credentials refused, an ACL user without a permission, a server
    certificate not trusted. ``None`` for anything else. The words carry no secret."""
    from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

    message = str(exc)
    if isinstance(exc, AuthenticationError) or (
        isinstance(exc, ResponseError) and message.startswith(("NOAUTH", "WRONGPASS"))
    ):
        return (
            f"Redis refused the credentials ({message}); give the ACL user and password in "
            "the URL: rediss://USER:PASSWORD@host:port/0"
        )
    if isinstance(exc, NoPermissionError) or message.startswith("NOPERM"):
        return (
            f"the Redis user lacks a permission ({message}); docs/distributed.md lists the ACL "
            "rules a producer and a worker need"
        )
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(
            cause
        ):
            return (
                f"the Redis server's TLS certificate is not trusted ({message}); name its CA in "
                "the URL: rediss://...?ssl_ca_certs=/path/to/ca.pem"
            )
        cause = cause.__cause__ or cause.__context__
    return None


def transport_errors() -> tuple[type[BaseException], ...]:
    """What a lost or slow Redis raises (the client's errors, sockets, deadlines)."""
    from redis.exceptions import RedisError

    return (RedisError, OSError, asyncio.TimeoutError, TimeoutError)


class RedisQueue:
    """Send sampled records to a Redis stream for ``groundwatch worker`` to score.

    Args:
        url: ``redis://host:port/db``; ``rediss://`` for TLS (the CA in
            ``?ssl_ca_certs=/path/ca.pem`` when it is not a public one; a client certificate in
            ``ssl_certfile`` and ``ssl_keyfile``), an ACL user and password as
            ``rediss://user:password@host:port/db`` (docs/distributed.md).
        stream: the stream's key; the workers' ``--stream`` must match.
        max_backlog: entries in the stream (waiting or being scored) past which the producer
            accepts no more records (``groundwatch.records{decision=queue_full}``). The workers
            delete what they acknowledge, so the stream's length is its backlog. Records the
            monitor already holds are still sent: the stream may pass the cap by up to the
            monitor's ``max_queue_size`` plus one batch per producer; nothing unread is trimmed.
        batch_size: records per pipelined ``XADD`` batch.
        timeout_millis: deadline of one connect or one batch.
        send_timeout_millis: how long a batch is retried (with backoff) before it is counted
            ``groundwatch.evaluations.dropped{error.type=transport}``.

    The client connects on first use, on the monitor's worker thread; a forked child starts
    afresh. Needs the ``redis`` extra.
    """

    def __init__(
        self,
        url: str,
        *,
        stream: str = DEFAULT_STREAM,
        max_backlog: int = 100_000,
        batch_size: int = 64,
        timeout_millis: int = 1000,
        send_timeout_millis: int = 30_000,
    ) -> None:
        for name, value in (
            ("max_backlog", max_backlog),
            ("batch_size", batch_size),
            ("timeout_millis", timeout_millis),
            ("send_timeout_millis", send_timeout_millis),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        try:
            import redis  # noqa: F401
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        self.url = url
        self.stream = stream
        self.max_backlog = max_backlog
        self._batch_size = batch_size
        self.timeout_s = timeout_millis / 1000
        self.send_timeout_s = send_timeout_millis / 1000
        self.concurrency = 1
        """Batches in flight: one, so records reach the stream in the order they were taken."""
        self.full = False
        """The stream was at ``max_backlog`` when last looked at (read on the request path)."""
        self.backlog = 0
        """The stream's length after the last batch or poll."""
        self._stats: Stats | None = None
        # Before a monitor attaches: no sampler, so 1.0 for always_score and unknown otherwise.
        self._rate: Callable[[RagRecord], float | None] = partial(record_sampling_rate, None)
        self._client: Redis | None = None
        self._watching: asyncio.Task[None] | None = None
        self._delay = 0.0
        self.down = False
        """The last attempt to reach Redis failed: records lost at shutdown are counted
        ``transport`` (Redis was the reason), not ``shutdown``."""
        self._closing = False
        self._given_up = False  # shutdown began and Redis failed since
        self._wake: asyncio.Event | None = None

    def __repr__(self) -> str:
        # The URL may carry a password.
        return f"RedisQueue(stream={self.stream!r})"

    def attach(self, stats: Stats, sampling_rate: Callable[[RagRecord], float | None]) -> None:
        """Called once by the monitor that owns this queue: where to count, and each record's
        sampling rate (sent along, so the worker's span carries it; 1.0 for ``always_score``)."""
        if self._stats is not None:
            raise ValueError("this RedisQueue already belongs to a Monitor")
        self._stats = stats
        self._rate = sampling_rate

    # --- on the monitor's worker loop ----------------------------------------------------------

    def batch_size(self) -> int:
        """Records per pipelined ``XADD`` batch."""
        return self._batch_size

    def flush(self, timeout_s: float) -> bool:
        """Nothing is held past :meth:`handle`: a batch is sent or counted there."""
        return True

    def close(self) -> None:
        """The connection is closed on the worker's loop (:meth:`aclose`)."""

    async def handle(self, records: list[RagRecord], pacer: Pacer) -> None:
        """The monitor's worker hands a batch over (:class:`~groundwatch.runtime.worker.
        Destination`): encode and send it, counting what cannot be sent. Raises only
        ``asyncio.CancelledError`` (shutdown's deadline), after counting what it still held."""
        stats = self._stats
        assert stats is not None, "RedisQueue.handle before attach"
        entries = self._encode(records, stats)
        try:
            await self._send(entries, stats)
        except asyncio.CancelledError:
            # Wherever the deadline found it (sending, backing off): what it held is lost.
            if entries:
                error_type = sc.ERROR_TRANSPORT if self.down else sc.ERROR_SHUTDOWN
                stats.count_dropped(error_type, len(entries))
            raise

    async def _send(self, entries: list[bytes], stats: Stats) -> None:
        """Send until sent, then clear ``entries``; or count them dropped and clear them."""
        deadline = time.monotonic() + self.send_timeout_s
        while entries:
            if self._given_up:
                # Shutdown began and Redis failed since: what is left is not tried again.
                self._drop(entries, stats, "Redis was unreachable at shutdown")
                return
            try:
                await asyncio.wait_for(self._xadd(entries), self.send_timeout_s)
                self.down = False
                self._delay = 0.0
                entries.clear()
                return
            except transport_errors() as exc:
                self.down = True
                await self._forget_client()
                self._delay = min(MAX_BACKOFF_S, max(0.05, self._delay * 2))
                pause = self._delay * random.uniform(0.5, 1.0)
                if self._closing or time.monotonic() + pause > deadline:
                    self._given_up = self._closing
                    self._drop(entries, stats, f"{type(exc).__name__}: {exc}")
                    return
                guard.warning(
                    "redis queue",
                    "groundwatch: cannot send records to Redis stream %r, retrying with backoff "
                    "(logged at most once a minute): %s: %s",
                    self.stream,
                    type(exc).__name__,
                    exc,
                )
                # The backoff ends early when shutdown begins: one last try, then no retries.
                wake = self._wake = self._wake or asyncio.Event()
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(wake.wait(), pause)

    def _drop(self, entries: list[bytes], stats: Stats, why: str) -> None:
        stats.count_dropped(sc.ERROR_TRANSPORT, len(entries))
        guard.warning(
            "redis queue",
            "groundwatch: %d records could not be sent to Redis stream %r and are "
            "counted as dropped (error.type=transport): %s",
            len(entries),
            self.stream,
            why,
        )
        entries.clear()

    def close_soon(self, deadline: float) -> None:
        """Shutdown began (on the monitor's worker loop): a batch backing off tries once more
        at once, and after a failure nothing is retried, so that shutdown does not wait out
        the retry window of a Redis that is down; what is not sent is counted ``transport``."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()

    def _encode(self, records: list[RagRecord], stats: Stats) -> list[bytes]:
        entries: list[bytes] = []
        now = time.time_ns()
        for record in records:
            try:
                prepare_record(record)
                rate = self._rate(record)
                entries.append(stream_json.encode(record, rate, now))
            except (InvalidRecord, TypeError, ValueError) as exc:
                # The caller's objects: the in-process path fails such a record with
                # invalid_input too; here nobody scores it, so it is a counted drop.
                guard.bad_input("RedisQueue", exc)
                stats.count_dropped(sc.ERROR_INVALID_INPUT)
        return entries

    async def _xadd(self, entries: list[bytes]) -> None:
        client = self._client
        if client is None:
            client = self._client = connect(self.url, self.timeout_s)
        pipe = client.pipeline(transaction=False)
        for entry in entries:
            pipe.xadd(self.stream, {stream_json.FIELD: entry})
        pipe.xlen(self.stream)
        # A connection lost halfway leaves it unknown which entries arrived: the batch is sent
        # again, and the worker's marker by record id drops the duplicates.
        replies: list[Any] = await pipe.execute()
        self._saw_backlog(int(replies[-1]))

    def _saw_backlog(self, length: int) -> None:
        self.backlog = length
        if length >= self.max_backlog and not self.full:
            self.full = True
            if self._watching is None or self._watching.done():
                self._watching = asyncio.get_running_loop().create_task(self._watch_backlog())
        elif length < self.max_backlog:
            self.full = False

    async def _watch_backlog(self) -> None:
        """While the stream is full no record reaches :meth:`send`: look again until the
        workers have made room (or Redis is gone; then the next batch finds out)."""
        while self.full:
            await asyncio.sleep(BACKLOG_POLL_S)
            try:
                client = self._client
                if client is None:
                    client = self._client = connect(self.url, self.timeout_s)
                length = await asyncio.wait_for(client.xlen(self.stream), self.timeout_s)
            except transport_errors():
                self.full = False
                await self._forget_client()
                return
            self.full = length >= self.max_backlog
            self.backlog = length

    async def _forget_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            # A broken connection may fail to close; it is gone anyway.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), self.timeout_s)

    async def aclose(self) -> None:
        """Close the connection (the monitor's worker loop, at shutdown)."""
        await self._forget_client()

    def at_fork_reinit(self) -> None:
        # The parent's sockets and loop are not the child's: start afresh on first use.
        self._client = None
        self._watching = None
        self.full = False
        self._delay = 0.0
        self.down = False
        self._wake = None
