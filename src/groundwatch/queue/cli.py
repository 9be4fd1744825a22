"""``groundwatch worker``: score records from a Redis stream (see docs/distributed.md).

Telemetry goes out through the global OpenTelemetry providers, set up from the standard
``OTEL_EXPORTER_OTLP_*`` variables when none are configured (:mod:`groundwatch._commands`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from typing import Any

from .._commands import run_command, stop_event
from ..check.cli import add_judge_options, close_judge, judge_from_args, positive_int
from .consumer import StreamWorker
from .redis import DEFAULT_STREAM, INSTALL_HINT

_logger = logging.getLogger("groundwatch")

LIVENESS_S = 60.0


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
    p.add_argument("--redis", required=True, metavar="URL", help="redis://host:port/db")
    p.add_argument("--group", required=True, help="the consumer group")
    p.add_argument("--stream", default=DEFAULT_STREAM, help=f"default {DEFAULT_STREAM}")
    p.add_argument("--consumer", help="this consumer's name in the group (default host-pid)")
    add_judge_options(p)
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
        help="serve GET /livez and /readyz on this port (0.0.0.0) for Kubernetes probes",
    )
    p.set_defaults(run=run)


async def _serve_health(worker: StreamWorker, port: int) -> asyncio.AbstractServer:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            path = line.split()[1].decode() if len(line.split()) > 1 else ""
            if path == "/readyz":
                ok = worker.ready
            elif path == "/livez":
                # The consuming loop goes round at least once per read block (1 s) or backoff
                # (at most 2 s): a minute without a round is a stuck worker.
                ok = time.monotonic() - worker.alive_at < LIVENESS_S
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            body = b"ok\n" if ok else b"not ready\n"
            status = b"200 OK" if ok else b"503 Service Unavailable"
            writer.write(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: text/plain\r\nContent-Length: "
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

    return await asyncio.start_server(handle, "0.0.0.0", port)


async def _main(args: argparse.Namespace) -> int:
    judge = judge_from_args(args)
    # --concurrency is the LLM judge's own limit too (a cascade's second judge), which it
    # reads on first use: otherwise its default would decide.
    for part in (judge, getattr(judge, "then", None)):
        if isinstance(getattr(part, "concurrency", None), int):
            part.concurrency = args.concurrency  # type: ignore[union-attr]
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
    )
    stop = stop_event()
    server = None
    if args.health_port is not None:
        server = await _serve_health(worker, args.health_port)
    _logger.warning(
        "groundwatch worker %s: consuming %r as group %r", worker.consumer, args.stream, args.group
    )
    try:
        await worker.run(stop, shutdown_timeout_s=args.shutdown_timeout_ms / 1000)
    finally:
        if server is not None:
            server.close()
        await close_judge(judge)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        import redis  # noqa: F401
    except ImportError:
        print(f"groundwatch worker: {INSTALL_HINT}", file=sys.stderr)
        return 2
    return run_command("groundwatch worker", lambda: _main(args))
