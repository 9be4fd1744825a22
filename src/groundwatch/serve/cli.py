"""``groundwatch serve``: an OTLP/HTTP and OTLP/gRPC receiver that scores the RAG traces it is
sent.

Every option's default comes from a ``GROUNDWATCH_*`` variable (``groundwatch._shared.config``), a
flag overrides it. Telemetry (the evaluation spans, events and metrics, and serve's own
counters) goes out through the global OpenTelemetry providers: run under
``opentelemetry-instrument``, or set ``OTEL_EXPORTER_OTLP_ENDPOINT`` and the command sets up
OTLP/HTTP exporters from the standard ``OTEL_EXPORTER_OTLP_*`` variables, as
``groundwatch worker`` does (both through :mod:`groundwatch.cli._long_running`).

On a network (docs/serve.md, "On a network"): ``--tls-cert`` / ``--tls-key`` put both
transports on TLS only (``--tls-client-ca``: mutual TLS), ``--auth-token-file`` asks every
export for a bearer token. Both are read and checked before anything listens (exit 2 naming
the option); a non-loopback address with neither is said once at start, unless
``--insecure``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import ipaddress
import logging
import signal
import socket
from typing import TYPE_CHECKING, Any

from .._shared import config
from ..check.cli import positive_int
from ..cli._errors import CommandError, UsageError, install_hint
from ..cli._long_running import (
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
from ..judging import registry
from . import INSTALL_HINT

if TYPE_CHECKING:
    from ._auth import TokenFile
    from ._tls import TlsFiles

_logger = logging.getLogger("groundwatch")

_REQUIRED = ("aiohttp", "opentelemetry.proto")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False


def _rate(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate must be within [0, 1], got {raw}")
    return value


def _grpc_port(raw: str) -> int | None:
    try:
        return config.parse_port_or_off(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a port (0: a free one) or off, got {raw!r}"
        ) from None


def _route_rate(raw: str) -> tuple[str, float]:
    route, sep, rate = raw.rpartition("=")
    if not sep or not route:
        raise argparse.ArgumentTypeError(f"expected ROUTE=RATE, got {raw!r}")
    return route, _rate(rate)


def add_parser(subparsers: Any) -> None:
    e = config
    p = subparsers.add_parser(
        "serve",
        help="score RAG traces received over OTLP (from a Collector or an SDK)",
        description=(
            "An OTLP trace receiver, over HTTP (POST /v1/traces, protobuf or JSON, gzip; POST "
            "/v1/logs for GenAI content sent as log records) and gRPC (the TraceService and "
            "LogsService Export methods): it "
            "assembles each trace, finds its RAG interaction in OpenInference or OpenLLMetry "
            "spans (retrieved documents, answer, question), scores a sampled share and emits "
            "the evaluation span as a child of the trace's root span, with the "
            "gen_ai.evaluation.result events and the metrics. GET /livez and /readyz answer "
            "probes, GET /health reports its state as JSON. "
            "Stops on SIGTERM: answers 503, scores what is pending within "
            "--shutdown-timeout-ms, counts the rest. Every default below comes from the "
            "GROUNDWATCH_* variable named with it."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("receiver")
    g.add_argument(
        "--host",
        default=e.env_host(e.SERVE_HOST, e.DEFAULT_SERVE_HOST),
        help=(
            "address to listen on: loopback unless asked; 0.0.0.0 in a container, with "
            f"--tls-cert/--tls-key and --auth-token-file on a shared network ({e.SERVE_HOST})"
        ),
    )
    g.add_argument(
        "--port",
        type=int,
        default=e.env_int(e.SERVE_PORT, e.DEFAULT_SERVE_PORT, lo=0, hi=65535),
        help=(
            "port to listen on; 0 picks a free one. Not OTLP's 4318: the Collector that "
            f"forwards to serve usually listens there, on the same host ({e.SERVE_PORT})"
        ),
    )
    g.add_argument(
        "--grpc-port",
        type=_grpc_port,
        default=e.env_port_or_off(e.SERVE_GRPC_PORT, e.DEFAULT_SERVE_GRPC_PORT),
        metavar="PORT|off",
        help=(
            "port of the OTLP/gRPC receiver (TraceService and LogsService Export), beside "
            "OTLP/HTTP; 0 picks a free one, off serves OTLP/HTTP only. Not OTLP's 4317, for "
            f"the same reason as --port ({e.SERVE_GRPC_PORT})"
        ),
    )
    g.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=e.env_int(e.SERVE_MAX_BODY_BYTES, e.DEFAULT_SERVE_MAX_BODY_BYTES),
        help=f"request body cap, compressed and decompressed; 413 past it (gRPC: "
        f"RESOURCE_EXHAUSTED) ({e.SERVE_MAX_BODY_BYTES})",
    )
    g = p.add_argument_group("on a network (docs/serve.md)")
    g.add_argument(
        "--tls-cert",
        default=e.env_str(e.SERVE_TLS_CERT, None),
        metavar="FILE",
        help=(
            "PEM certificate (chain) to serve TLS with, on OTLP/HTTP and OTLP/gRPC alike: "
            f"with it both speak TLS only; needs --tls-key ({e.SERVE_TLS_CERT})"
        ),
    )
    g.add_argument(
        "--tls-key",
        default=e.env_str(e.SERVE_TLS_KEY, None),
        metavar="FILE",
        help=f"the certificate's PEM private key, unencrypted ({e.SERVE_TLS_KEY})",
    )
    g.add_argument(
        "--tls-client-ca",
        default=e.env_str(e.SERVE_TLS_CLIENT_CA, None),
        metavar="FILE",
        help=(
            "PEM CA certificate(s): clients must present a certificate it signed (mutual TLS)"
            f" ({e.SERVE_TLS_CLIENT_CA})"
        ),
    )
    g.add_argument(
        "--auth-token-file",
        default=e.env_str(e.SERVE_AUTH_TOKEN_FILE, None),
        metavar="FILE",
        help=(
            "file of accepted bearer tokens, one a line, re-read on SIGHUP: every request but "
            "/livez and /readyz needs the header authorization: Bearer <token>, else 401 "
            f"(gRPC UNAUTHENTICATED) ({e.SERVE_AUTH_TOKEN_FILE})"
        ),
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help=(
            "no warning for a non-loopback --host without TLS or a token (a service mesh "
            "that does TLS and authentication itself)"
        ),
    )
    g = p.add_argument_group("assembly")
    g.add_argument(
        "--quiet-period-ms",
        type=positive_int,
        default=e.env_int(e.SERVE_QUIET_PERIOD_MILLIS, e.DEFAULT_SERVE_QUIET_PERIOD_MILLIS),
        help=(
            "a trace is complete when its root span arrived and no span came for this long "
            f"({e.SERVE_QUIET_PERIOD_MILLIS})"
        ),
    )
    g.add_argument(
        "--orphan-timeout-ms",
        type=positive_int,
        default=e.env_int(e.SERVE_ORPHAN_TIMEOUT_MILLIS, e.DEFAULT_SERVE_ORPHAN_TIMEOUT_MILLIS),
        help=(
            "a trace whose root never arrives is assembled under its earliest span after "
            f"this quiet time ({e.SERVE_ORPHAN_TIMEOUT_MILLIS})"
        ),
    )
    g.add_argument(
        "--max-pending-traces",
        type=positive_int,
        default=e.env_int(e.SERVE_MAX_PENDING_TRACES, e.DEFAULT_SERVE_MAX_PENDING_TRACES),
        help="traces held while assembling; the oldest is evicted and counted "
        f"({e.SERVE_MAX_PENDING_TRACES})",
    )
    g.add_argument(
        "--max-spans-per-trace",
        type=positive_int,
        default=e.env_int(e.SERVE_MAX_SPANS_PER_TRACE, e.DEFAULT_SERVE_MAX_SPANS_PER_TRACE),
        help=(
            "spans kept per trace; the oldest are evicted and counted, the root is always "
            f"kept ({e.SERVE_MAX_SPANS_PER_TRACE})"
        ),
    )
    g.add_argument(
        "--interactions",
        choices=e.SERVE_INTERACTION_MODES,
        default=e.env_choice(
            e.SERVE_INTERACTIONS, e.DEFAULT_SERVE_INTERACTIONS, e.SERVE_INTERACTION_MODES
        ),
        help=(
            "one interaction per trace (under its root span), or one per retriever + LLM "
            "pair (under their nearest common ancestor span) "
            f"({e.SERVE_INTERACTIONS})"
        ),
    )
    g = p.add_argument_group("sampling")
    g.add_argument(
        "--sample-rate",
        type=_rate,
        default=e.env_float(e.SAMPLE_RATE, e.DEFAULT_SAMPLE_RATE, 0.0, 1.0),
        help=(
            "share of traces scored, by trace id exactly as the in-app RatioSampler decides, "
            "when a trace's first span arrives: a trace left out stores nothing "
            f"({e.SAMPLE_RATE})"
        ),
    )
    g.add_argument(
        "--route-attribute",
        default=e.env_name(e.SERVE_ROUTE_ATTRIBUTE, None),
        metavar="ATTRIBUTE",
        help=(
            "span or resource attribute naming an interaction's route; the root's "
            f"service.name otherwise ({e.SERVE_ROUTE_ATTRIBUTE})"
        ),
    )
    g.add_argument(
        "--route-rate",
        type=_route_rate,
        action="append",
        default=[],
        metavar="ROUTE=RATE",
        help="sample rate of one route instead of --sample-rate (repeatable)",
    )
    add_audit_option(g)
    add_sink_option(g)
    g = p.add_argument_group("scoring")
    registry.add_judge_options(g)
    g.add_argument(
        "--executor",
        choices=config.EXECUTORS,
        default=e.env_choice(e.EXECUTOR, e.DEFAULT_EXECUTOR, e.EXECUTORS),
        help=f"where a local judge runs ({e.EXECUTOR})",
    )
    g.add_argument(
        "--max-queue-size",
        type=positive_int,
        default=e.env_int(e.MAX_QUEUE_SIZE, e.DEFAULT_MAX_QUEUE_SIZE),
        help=(
            "interactions waiting to be scored; exports are answered 429 with Retry-After "
            f"when it is 90%% full ({e.MAX_QUEUE_SIZE})"
        ),
    )
    g.add_argument(
        "--evaluation-timeout-ms",
        type=positive_int,
        default=e.env_int(e.EVALUATION_TIMEOUT_MILLIS, e.DEFAULT_EVALUATION_TIMEOUT_MILLIS),
        help=f"deadline of one evaluation ({e.EVALUATION_TIMEOUT_MILLIS})",
    )
    g.add_argument(
        "--capture-content",
        action=argparse.BooleanOptionalAction,
        default=e.capture_content_default(),
        help=f"put question, answer and claims on the evaluation span ({e.CAPTURE_CONTENT})",
    )
    g.add_argument(
        "--redis",
        metavar="URL",
        help=(
            "send interactions to this Redis stream for `groundwatch worker`s to score, "
            "instead of scoring here; rediss://user:password@host:port/0 for TLS and an ACL "
            f"user (needs the redis extra; docs/distributed.md); {e.REDIS_URL} when not given "
            "(out of ps, and never printed: it may hold a password)"
        ),
    )
    g.add_argument("--stream", default=None, help="the Redis stream (default groundwatch:records)")
    p.add_argument(
        "--shutdown-timeout-ms",
        type=positive_int,
        default=20_000,
        help="on SIGTERM, how long pending interactions may take to be scored or sent",
    )
    add_console_options(p)
    p.set_defaults(run=run)


def _sampler(args: argparse.Namespace) -> Any:
    import groundwatch as gw

    default = gw.RatioSampler(args.sample_rate)
    if not args.route_rate:
        return default
    return gw.RouteSampler(
        {route: gw.RatioSampler(rate) for route, rate in args.route_rate}, default=default
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``): a
    name is loopback when every address it resolves to is."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def load_security(args: argparse.Namespace) -> tuple[TlsFiles | None, TokenFile | None]:
    """The checked TLS files and token file the options name (each ``None`` when not
    asked for); a :class:`UsageError` naming the option otherwise, before anything
    listens."""
    from ._auth import TokenFile, TokenFileError
    from ._tls import TlsConfigError, load

    try:
        tls = load(args.tls_cert, args.tls_key, args.tls_client_ca)
        auth = None if args.auth_token_file is None else TokenFile(args.auth_token_file)
    except (TlsConfigError, TokenFileError) as exc:
        raise UsageError(str(exc)) from None
    return tls, auth


def exposure_warning(
    args: argparse.Namespace, tls: TlsFiles | None, auth: TokenFile | None
) -> str | None:
    """The one start-up warning for a non-loopback address without TLS or without a token
    (client certificates count as one); ``None`` when there is nothing to say (loopback, both
    set, or ``--insecure``)."""
    if args.insecure or is_loopback(args.host):
        return None
    missing = []
    if tls is None:
        missing.append("no TLS (--tls-cert, --tls-key: traces cross the network readable)")
    if auth is None and (tls is None or tls.client_ca is None):
        missing.append("no token (--auth-token-file: anyone who reaches it can send spans)")
    if not missing:
        return None
    return (
        f"groundwatch serve: {args.host} is not loopback and serve has {' and '.join(missing)}; "
        "--insecure silences this where a service mesh does TLS and authentication"
    )


def build_service(args: argparse.Namespace, judge: Any, auth: TokenFile | None = None) -> Any:
    """The monitor, assembler and service the options describe (``auth``: the token file
    of :func:`load_security`)."""
    import groundwatch as gw

    from ._assemble import TraceAssembler
    from ._service import TraceService

    queue = None
    if args.redis:
        kwargs = {"stream": args.stream} if args.stream else {}
        queue = gw.RedisQueue(args.redis, **kwargs)
    monitor = gw.Monitor(
        on_result=_sinks(args),
        judge=judge,
        sampler=_sampler(args),
        max_queue_size=args.max_queue_size,
        capture_content=args.capture_content,
        executor=args.executor,
        evaluation_timeout_millis=args.evaluation_timeout_ms,
        queue=queue,
        shutdown_on_exit=False,
        audit_rate=args.audit_rate,
    )
    assembler = TraceAssembler(
        quiet_s=args.quiet_period_ms / 1000,
        orphan_s=args.orphan_timeout_ms / 1000,
        max_traces=args.max_pending_traces,
        max_spans=args.max_spans_per_trace,
    )
    return TraceService(
        monitor,
        assembler,
        per_pair=args.interactions == "pair",
        max_body_bytes=args.max_body_bytes,
        max_queue_size=args.max_queue_size,
        route_attribute=args.route_attribute,
        auth=auth,
    )


async def _main(args: argparse.Namespace) -> int:
    from ._http import ListenError, Receiver

    name = "groundwatch serve"
    tls, auth = load_security(args)
    judge = registry.judge_from_args(args)
    console = Console(name, args)
    service = build_service(args, judge, auth)
    poll_s = min(0.5, args.quiet_period_ms / 4000)
    grpc_port = args.grpc_port
    if grpc_port is not None and not _importable("grpc"):
        _logger.warning("groundwatch serve: OTLP/gRPC is off: %s", INSTALL_HINT)
        grpc_port = None
    receiver = Receiver(service, args.host, args.port, poll_s, grpc_port=grpc_port, tls=tls)
    stop = stop_event()
    if auth is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, auth.reload)
    warning = exposure_warning(args, tls, auth)
    if warning is not None:
        _logger.warning("%s", warning)
    try:
        await receiver.start()
    except ListenError as exc:
        await asyncio.to_thread(service.monitor.shutdown, 0)
        await registry.close(judge)
        option = "--grpc-port" if exc.transport == "grpc" else "--port"
        if not exc.in_use:
            option = "--host"
        raise CommandError(
            f"cannot listen on {exc.address} ({option}): {exc.reason}; stop what uses it, or "
            f"choose another {option}" + (" (0 picks a free port)" if exc.in_use else "")
        ) from exc
    # One line a supervisor (or a test) can wait for; the ports are the real ones with 0.
    grpc = "" if receiver.grpc_port is None else f" and grpc://{args.host}:{receiver.grpc_port}"
    scheme = "http" if tls is None else "https"
    how = []
    if tls is not None:
        how.append("mutual TLS" if tls.client_ca is not None else "TLS")
    if auth is not None:
        how.append("bearer tokens")
    over = f" ({', '.join(how)})" if how else ""
    print(f"{name}: listening on {scheme}://{args.host}:{receiver.port}{grpc}{over}", flush=True)
    console.say(telemetry_destination())

    def counts() -> str:
        health = service.health()
        dropped = sum(service.monitor.stats.snapshot()[1].values())
        scored = sum(console.labels.values())
        errors = "-" if console.errors < 0 else str(console.errors)
        return (
            f"scored {scored if console.watching else '-'}, errors {errors}, dropped {dropped}, "
            f"pending traces {health['pending_traces']}, queue {health['queue_size']}"
        )

    progress = asyncio.create_task(console.progress(counts))
    try:
        await stop.wait()
    finally:
        progress.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await progress
        ok = await receiver.stop(args.shutdown_timeout_ms)
        await registry.close(judge)
    spans, traces = service.assembler.counts.snapshot()
    _logger.warning("groundwatch serve: stopped (spans %s, traces %s)", spans, traces)
    return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    # Read here, not as the flag's default, which --help would print with its password.
    args.redis = args.redis or config.env_str(config.REDIS_URL, None)
    if not all(_importable(m) for m in _REQUIRED):
        raise UsageError(INSTALL_HINT)
    if args.redis and not _importable("redis"):
        raise UsageError(f"--redis needs the redis extra, {install_hint('redis')}")
    return run_command("groundwatch serve", lambda: _main(args))


def _audit_sinks(args: argparse.Namespace) -> list[Any]:
    """The ``DatasetSink(when="audit")`` that ``--audit-file`` asks for, if any."""
    from ..runtime.dataset import DatasetSink

    path = audit_file(args)
    return [DatasetSink(path, when="audit")] if path else []


def _sinks(args: argparse.Namespace) -> list[Any]:
    """Every ``on_result`` sink the options ask for: the audit file's, the dashboards'."""
    return [*_audit_sinks(args), *dashboard_sinks(args)]
