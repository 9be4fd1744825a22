"""``groundwatch worker``: score records from a Redis stream (see docs/distributed.md).

Telemetry goes out through the global OpenTelemetry providers, set up from the standard
``OTEL_EXPORTER_OTLP_*`` variables when none are configured
(:mod:`groundwatch.runtime.long_running`).
The worker reaches Redis before it says it is consuming: a URL that is not one is a usage
error (exit 2); a Redis it cannot reach is said once, in one line, and waited for (its probes
answer live and not ready meanwhile, as during an outage later), since in a deployment the
worker often starts before Redis does. A Redis that answers but will not take it (credentials
refused, an ACL permission missing, a TLS certificate not trusted) is a configuration error
(exit 2): waiting cannot mend it.

The URL may carry a password: it can come from ``GROUNDWATCH_REDIS_URL`` instead of
``--redis`` (out of ``ps``), and messages show it redacted. The health port answers
``/livez`` and ``/readyz`` to anyone (a kubelet's probe has no credentials, and they say only
``ok``); ``/health``, which reports the worker's state, only to a loopback peer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .._shared import config
from .._shared.errors import CommandError, UsageError, install_hint
from ..check.cli import positive_int
from ..judging import registry
from ..runtime.long_running import (
    Console,
    add_audit_option,
    add_console_options,
    add_sink_option,
    audit_file,
    dashboard_sinks,
    run_command,
    stop_event,
    telemetry_destination,
)
from .consumer import StreamWorker
from .redis import DEFAULT_STREAM

_logger = logging.getLogger("groundwatch")

LIVENESS_S = 60.0
INSTALL_HINT = f"groundwatch worker needs the redis extra, {install_hint('redis')}"
DEFAULT_HEALTH_HOST = "127.0.0.1"
"""Loopback, as the OpenTelemetry Collector's own endpoints default to: a probe port is not
opened to the network unless asked (``--health-host 0.0.0.0`` in a container)."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "worker",
        help="score records from a Redis stream (distributed scoring)",
        description=(
            "One consumer of a Redis consumer group: reads the records that "
            "Monitor(queue=RedisQueue(...)) sends, scores them and emits the evaluation span "
            "(in the request's trace), events and metrics. Stops on SIGTERM after finishing "
            "or releasing what it holds."
        ),
    )
    p.add_argument(
        "--redis",
        metavar="URL",
        help=(
            "redis://host:port/db, rediss://user:password@host:port/db for TLS and an ACL user "
            f"({config.REDIS_URL} when not given: a password stays out of ps)"
        ),
    )
    p.add_argument("--group", required=True, help="the consumer group")
    p.add_argument("--stream", default=DEFAULT_STREAM, help=f"default {DEFAULT_STREAM}")
    p.add_argument("--consumer", help="this consumer's name in the group (default host-pid)")
    registry.add_judge_options(p)
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="N",
        help="LLM calls in flight, or judge processes for local judges (default 1)",
    )
    p.add_argument("--executor", choices=("auto", "process", "thread"), default="auto")
    p.add_argument("--visibility-timeout-ms", type=positive_int, default=30_000)
    p.add_argument("--max-deliveries", type=positive_int, default=5)
    p.add_argument("--evaluation-timeout-ms", type=positive_int, default=60_000)
    p.add_argument("--shutdown-timeout-ms", type=positive_int, default=20_000)
    p.add_argument(
        "--health-port",
        type=int,
        metavar="PORT",
        help="serve GET /livez, /readyz (Kubernetes probes) and /health (JSON) on this port",
    )
    p.add_argument(
        "--health-host",
        default=DEFAULT_HEALTH_HOST,
        metavar="ADDRESS",
        help=f"address of the health port (default {DEFAULT_HEALTH_HOST}; 0.0.0.0 in a "
        "container, where the kubelet probes the pod's address). /livez and /readyz answer "
        "anyone, /health a loopback peer only",
    )
    p.add_argument(
        "--capture-content",
        action=argparse.BooleanOptionalAction,
        default=config.capture_content_default(),
        help="put question, answer and claims on the evaluation span (and --verbose lines); "
        f"default from {config.CAPTURE_CONTENT}, as for groundwatch serve",
    )
    add_audit_option(p)
    add_sink_option(p)
    add_console_options(p)
    p.set_defaults(run=run)


def _redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return url


def _check_url(url: str | None) -> str:
    """``url``, unless redis-py cannot read it as a Redis URL (a usage error)."""
    from .redis import connect

    if url is None:
        raise UsageError(f"--redis is required (or {config.REDIS_URL}): the Redis URL to read")
    try:
        # Parses the URL and builds a pool; the connection object is made, not connected,
        # so that an unknown ?option= is found now.
        connect(url, 1.0).connection_pool.make_connection()  # type: ignore[no-untyped-call]
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"--redis {_redacted(url)!r}: {exc}; for example redis://localhost:6379/0"
        ) from exc
    return url


async def _wait_for_redis(url: str, console: Console, stop: asyncio.Event) -> bool:
    """Until Redis answers a PING (``True``) or ``stop`` is set (``False``); says once, in one
    line, why it is waiting."""
    from .redis import MAX_BACKOFF_S, connect, refusal, transport_errors

    delay = 0.1
    said = False
    while not stop.is_set():
        client = connect(url, 5.0)
        try:
            await client.ping()
            return True
        except transport_errors() as exc:
            refused = refusal(exc)
            if refused is not None:
                raise UsageError(f"Redis at {_redacted(url)} (--redis): {refused}") from exc
            if not said:
                console.say(
                    f"cannot reach Redis at {_redacted(url)} (--redis): {type(exc).__name__}: "
                    f"{exc}; waiting for it (start redis-server there, or point --redis at a "
                    "running one)"
                )
                said = True
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        delay = min(MAX_BACKOFF_S, delay * 2)
    return False


def _health(worker: StreamWorker) -> dict[str, Any]:
    return {
        "status": "ok" if worker.ready else "not ready",
        "ready": worker.ready,
        "live": time.monotonic() - worker.alive_at < LIVENESS_S,
        "scored": worker.scored,
        "duplicates": worker.duplicates,
        "dead_lettered": worker.dead_lettered,
        "lag": worker.lag,
    }


def _loopback_peer(writer: asyncio.StreamWriter) -> bool:
    peer = writer.get_extra_info("peername")
    try:
        return bool(peer) and ipaddress.ip_address(peer[0]).is_loopback
    except (ValueError, TypeError, IndexError):
        return False


async def _serve_health(worker: StreamWorker, host: str, port: int) -> asyncio.Server:
    """``GET /livez`` and ``/readyz`` (``ok`` or 503), ``/health`` (JSON), as serve answers
    them; ``/health`` to a loopback peer only (403 otherwise): the probes carry no data and
    need no credentials, the state stays on the pod (``kubectl exec``, ``port-forward``)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            path = line.split()[1].decode() if len(line.split()) > 1 else ""
            content_type = b"text/plain"
            if path == "/readyz":
                ok = worker.ready
            elif path == "/livez":
                # The consuming loop goes round at least once per read block (1 s) or backoff
                # (at most 2 s): a minute without a round is a stuck worker.
                ok = time.monotonic() - worker.alive_at < LIVENESS_S
            elif path == "/health" and not _loopback_peer(writer):
                body = b"/health answers a loopback peer only; /livez and /readyz answer anyone\n"
                writer.write(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + body
                )
                return
            elif path == "/health":
                ok = worker.ready
                content_type = b"application/json"
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            if path == "/health":
                body = json.dumps(_health(worker)).encode()
            else:
                body = b"ok\n" if ok else b"not ready\n"
            status = b"200 OK" if ok else b"503 Service Unavailable"
            writer.write(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: "
                + content_type
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
        except Exception:
            pass
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
                writer.close()

    try:
        return await asyncio.start_server(handle, host, port)
    except OSError as exc:
        option = "--health-port" if exc.errno == errno.EADDRINUSE else "--health-host"
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise CommandError(
            f"cannot listen on {host}:{port} ({option}): {reason}; stop what uses it or choose "
            f"another {option}"
        ) from exc


async def _main(args: argparse.Namespace) -> int:
    name = "groundwatch worker"
    # The variable is read here, not as the flag's default, which --help could print.
    args.redis = _check_url(args.redis or config.env_str(config.REDIS_URL, None))
    judge = registry.judge_from_args(args)
    try:
        # --concurrency is the LLM judge's own limit too (a cascade's second judge), which it
        # reads on first use: otherwise its default would decide.
        for part in registry.parts(judge):
            if isinstance(getattr(part, "concurrency", None), int):
                part.concurrency = args.concurrency
        console = Console(name, args)
        worker = StreamWorker(
            args.redis,
            group=args.group,
            judge=judge,
            stream=args.stream,
            consumer=args.consumer,
            concurrency=args.concurrency,
            executor=args.executor,
            visibility_timeout_millis=args.visibility_timeout_ms,
            max_deliveries=args.max_deliveries,
            evaluation_timeout_millis=args.evaluation_timeout_ms,
            capture_content=args.capture_content,
            audit_rate=args.audit_rate,
            on_result=_sinks(args),
        )
        stop = stop_event()
        server = None
        if args.health_port is not None:
            server = await _serve_health(worker, args.health_host, args.health_port)
            port = server.sockets[0].getsockname()[1]
            console.say(f"health probes on http://{args.health_host}:{port}/livez and /readyz")

        def counts() -> str:
            dropped = sum(worker.stats.snapshot()[1].values())
            errors = "-" if console.errors < 0 else str(console.errors)
            lag = "-" if worker.lag is None else str(worker.lag)
            return f"scored {worker.scored}, errors {errors}, dropped {dropped}, lag {lag}"

        try:
            if not await _wait_for_redis(args.redis, console, stop):
                worker.runner.close()
                console.say(f"stopped before Redis answered ({counts()})")
                return 0
            # One line a supervisor (or a test) can wait for, once Redis answered.
            print(
                f"{name} {worker.consumer}: consuming {args.stream!r} as group {args.group!r}",
                flush=True,
            )
            console.say(telemetry_destination())
            progress = asyncio.create_task(console.progress(counts))
            try:
                await worker.run(stop, shutdown_timeout_s=args.shutdown_timeout_ms / 1000)
            finally:
                progress.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await progress
        finally:
            if server is not None:
                server.close()
        console.say(f"stopped ({counts()})")
    finally:
        await registry.close(judge)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        import redis  # noqa: F401
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return run_command(lambda: _main(args))


def _audit_sinks(args: argparse.Namespace) -> list[Any]:
    """The ``DatasetSink(when="audit")`` that ``--audit-file`` asks for, if any."""
    from ..runtime.dataset import DatasetSink

    path = audit_file(args)
    return [DatasetSink(path, when="audit")] if path else []


def _sinks(args: argparse.Namespace) -> list[Any]:
    """Every ``on_result`` sink the options ask for: the audit file's, the dashboards'."""
    return [*_audit_sinks(args), *dashboard_sinks(args)]
