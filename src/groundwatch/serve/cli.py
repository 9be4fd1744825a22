"""``groundwatch serve``: an OTLP/HTTP and OTLP/gRPC receiver that scores the RAG traces it is
sent.

Every option's default comes from a ``GROUNDWATCH_*`` variable (``groundwatch._shared.config``), a
flag overrides it. Telemetry (the evaluation spans, events and metrics, and serve's own
counters) goes out through the global OpenTelemetry providers: run under
``opentelemetry-instrument``, or set ``OTEL_EXPORTER_OTLP_ENDPOINT`` and the command sets up
OTLP/HTTP exporters from the standard ``OTEL_EXPORTER_OTLP_*`` variables, as
``groundwatch worker`` does (both through :mod:`groundwatch.runtime.long_running`).

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class _Option:
    """One of serve's options, declared once: its flag, its help, and where its default comes
    from. :func:`_add` says the default once in the help, beside the variable it is read from
    (``(GROUNDWATCH_SERVE_PORT, default: 4328)``), and nothing for an option without one."""

    flag: str
    help: str
    variable: str | None = None
    """The ``GROUNDWATCH_*`` variable the default is read from, named in the help."""
    default: Callable[[], Any] | None = None
    """Reads the default when the parser is built (the environment of that moment)."""
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    action: Any = None


def _add(group: Any, option: _Option) -> None:
    default = option.default() if option.default is not None else None
    said = [] if option.variable is None else [option.variable]
    if default not in (None, False, []):
        said.append(f"default: {default}")
    note = f" ({', '.join(said)})" if said else ""
    extra = {
        key: value
        for key, value in (
            ("type", option.type),
            ("metavar", option.metavar),
            ("choices", option.choices),
            ("action", option.action),
        )
        if value is not None
    }
    if option.action == "append":
        default = []
    # argparse formats help with %: a literal one in the text or the default is doubled.
    text = (option.help + note).replace("%", "%%")
    group.add_argument(option.flag, default=default, help=text, **extra)


_e = config

_RECEIVER = (
    _Option(
        "--host",
        "address to listen on: loopback unless asked; 0.0.0.0 in a container, with "
        "--tls-cert/--tls-key and --auth-token-file on a shared network",
        _e.SERVE_HOST,
        lambda: _e.env_host(_e.SERVE_HOST, _e.DEFAULT_SERVE_HOST),
    ),
    _Option(
        "--port",
        "port to listen on; 0 picks a free one. Not OTLP's 4318: the Collector that forwards "
        "to serve usually listens there, on the same host",
        _e.SERVE_PORT,
        lambda: _e.env_int(_e.SERVE_PORT, _e.DEFAULT_SERVE_PORT, lo=0, hi=65535),
        type=int,
    ),
    _Option(
        "--grpc-port",
        "port of the OTLP/gRPC receiver (TraceService and LogsService Export), beside "
        "OTLP/HTTP; 0 picks a free one, off serves OTLP/HTTP only. Not OTLP's 4317, for the "
        "same reason as --port",
        _e.SERVE_GRPC_PORT,
        lambda: _e.env_port_or_off(_e.SERVE_GRPC_PORT, _e.DEFAULT_SERVE_GRPC_PORT),
        type=_grpc_port,
        metavar="PORT|off",
    ),
    _Option(
        "--max-body-bytes",
        "request body cap, compressed and decompressed; 413 past it (gRPC: RESOURCE_EXHAUSTED)",
        _e.SERVE_MAX_BODY_BYTES,
        lambda: _e.env_int(_e.SERVE_MAX_BODY_BYTES, _e.DEFAULT_SERVE_MAX_BODY_BYTES),
        type=positive_int,
    ),
)
_ON_A_NETWORK = (
    _Option(
        "--tls-cert",
        "PEM certificate (chain) to serve TLS with, on OTLP/HTTP and OTLP/gRPC alike: with it "
        "both speak TLS only; needs --tls-key",
        _e.SERVE_TLS_CERT,
        lambda: _e.env_str(_e.SERVE_TLS_CERT, None),
        metavar="FILE",
    ),
    _Option(
        "--tls-key",
        "the certificate's PEM private key, unencrypted",
        _e.SERVE_TLS_KEY,
        lambda: _e.env_str(_e.SERVE_TLS_KEY, None),
        metavar="FILE",
    ),
    _Option(
        "--tls-client-ca",
        "PEM CA certificate(s): clients must present a certificate it signed (mutual TLS)",
        _e.SERVE_TLS_CLIENT_CA,
        lambda: _e.env_str(_e.SERVE_TLS_CLIENT_CA, None),
        metavar="FILE",
    ),
    _Option(
        "--auth-token-file",
        "file of accepted bearer tokens, one a line, re-read on SIGHUP: every request but "
        "/livez and /readyz needs the header authorization: Bearer <token>, else 401 (gRPC "
        "UNAUTHENTICATED)",
        _e.SERVE_AUTH_TOKEN_FILE,
        lambda: _e.env_str(_e.SERVE_AUTH_TOKEN_FILE, None),
        metavar="FILE",
    ),
    _Option(
        "--insecure",
        "no warning for a non-loopback --host without TLS or a token (a service mesh that does "
        "TLS and authentication itself)",
        action="store_true",
    ),
)
_ASSEMBLY = (
    _Option(
        "--quiet-period-ms",
        "a trace is complete when its root span arrived and no span came for this long",
        _e.SERVE_QUIET_PERIOD_MILLIS,
        lambda: _e.env_int(_e.SERVE_QUIET_PERIOD_MILLIS, _e.DEFAULT_SERVE_QUIET_PERIOD_MILLIS),
        type=positive_int,
    ),
    _Option(
        "--orphan-timeout-ms",
        "a trace whose root never arrives is assembled under its earliest span after this "
        "quiet time",
        _e.SERVE_ORPHAN_TIMEOUT_MILLIS,
        lambda: _e.env_int(_e.SERVE_ORPHAN_TIMEOUT_MILLIS, _e.DEFAULT_SERVE_ORPHAN_TIMEOUT_MILLIS),
        type=positive_int,
    ),
    _Option(
        "--max-pending-traces",
        "traces held while assembling; the oldest is evicted and counted",
        _e.SERVE_MAX_PENDING_TRACES,
        lambda: _e.env_int(_e.SERVE_MAX_PENDING_TRACES, _e.DEFAULT_SERVE_MAX_PENDING_TRACES),
        type=positive_int,
    ),
    _Option(
        "--max-spans-per-trace",
        "spans kept per trace; the oldest are evicted and counted, the root is always kept",
        _e.SERVE_MAX_SPANS_PER_TRACE,
        lambda: _e.env_int(_e.SERVE_MAX_SPANS_PER_TRACE, _e.DEFAULT_SERVE_MAX_SPANS_PER_TRACE),
        type=positive_int,
    ),
    _Option(
        "--interactions",
        "one interaction per trace (under its root span), or one per retriever + LLM pair "
        "(under their nearest common ancestor span)",
        _e.SERVE_INTERACTIONS,
        lambda: _e.env_choice(
            _e.SERVE_INTERACTIONS, _e.DEFAULT_SERVE_INTERACTIONS, _e.SERVE_INTERACTION_MODES
        ),
        choices=_e.SERVE_INTERACTION_MODES,
    ),
)
_SAMPLING = (
    _Option(
        "--sample-rate",
        "share of traces scored, by trace id exactly as the in-app RatioSampler decides, when "
        "a trace's first span arrives: a trace left out stores nothing",
        _e.SAMPLE_RATE,
        lambda: _e.env_float(_e.SAMPLE_RATE, _e.DEFAULT_SAMPLE_RATE, 0.0, 1.0),
        type=_rate,
    ),
    _Option(
        "--route-attribute",
        "span or resource attribute naming an interaction's route; the root's service.name "
        "otherwise",
        _e.SERVE_ROUTE_ATTRIBUTE,
        lambda: _e.env_name(_e.SERVE_ROUTE_ATTRIBUTE, None),
        metavar="ATTRIBUTE",
    ),
    _Option(
        "--route-rate",
        "sample rate of one route instead of --sample-rate (repeatable)",
        type=_route_rate,
        action="append",
        metavar="ROUTE=RATE",
    ),
    add_audit_option,
    add_sink_option,
)
_SCORING = (
    registry.add_judge_options,
    _Option(
        "--executor",
        "where a local judge runs",
        _e.EXECUTOR,
        lambda: _e.env_choice(_e.EXECUTOR, _e.DEFAULT_EXECUTOR, _e.EXECUTORS),
        choices=_e.EXECUTORS,
    ),
    _Option(
        "--max-queue-size",
        "interactions waiting to be scored; exports are answered 429 with Retry-After when it "
        "is 90% full",
        _e.MAX_QUEUE_SIZE,
        lambda: _e.env_int(_e.MAX_QUEUE_SIZE, _e.DEFAULT_MAX_QUEUE_SIZE),
        type=positive_int,
    ),
    _Option(
        "--evaluation-timeout-ms",
        "deadline of one evaluation",
        _e.EVALUATION_TIMEOUT_MILLIS,
        lambda: _e.env_int(_e.EVALUATION_TIMEOUT_MILLIS, _e.DEFAULT_EVALUATION_TIMEOUT_MILLIS),
        type=positive_int,
    ),
    _Option(
        "--capture-content",
        "put question, answer and claims on the evaluation span",
        _e.CAPTURE_CONTENT,
        _e.capture_content_default,
        action=argparse.BooleanOptionalAction,
    ),
    _Option(
        "--redis",
        "send interactions to this Redis stream for `groundwatch worker`s to score, instead of "
        "scoring here; rediss://user:password@host:port/0 for TLS and an ACL user (needs the "
        f"redis extra; docs/distributed.md); {_e.REDIS_URL} when not given (out of ps, and "
        "never printed: it may hold a password)",
        metavar="URL",
    ),
    _Option("--stream", "the Redis stream (default groundwatch:records)"),
)
_SHUTDOWN = (
    _Option(
        "--shutdown-timeout-ms",
        "on SIGTERM, how long pending interactions may take to be scored or sent",
        default=lambda: 20_000,
        type=positive_int,
    ),
    add_console_options,
)

_GROUPS: tuple[tuple[str | None, tuple[_Option | Callable[[Any], None], ...]], ...] = (
    ("receiver", _RECEIVER),
    ("on a network (docs/serve.md)", _ON_A_NETWORK),
    ("assembly", _ASSEMBLY),
    ("sampling", _SAMPLING),
    ("scoring", _SCORING),
    (None, _SHUTDOWN),
)
"""serve's options, group by group (``None``: the command's own, outside a group); an entry
that is not an :class:`_Option` is a helper adding options that other commands take too (the
audit, the judge, the console)."""


def add_parser(subparsers: Any) -> None:
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
    )
    for title, options in _GROUPS:
        group = p if title is None else p.add_argument_group(title)
        for option in options:
            if isinstance(option, _Option):
                _add(group, option)
            else:
                option(group)  # options serve shares with other commands, from their helper
    p.set_defaults(run=run)


def _sampler(args: argparse.Namespace) -> Any:
    from ..runtime.sampling import RatioSampler, RouteSampler

    default = RatioSampler(args.sample_rate)
    if not args.route_rate:
        return default
    return RouteSampler(
        {route: RatioSampler(rate) for route, rate in args.route_rate}, default=default
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
    from ..queue.redis import RedisQueue
    from ..runtime.monitor import Monitor
    from ._assemble import TraceAssembler
    from ._service import TraceService

    queue = None
    if args.redis:
        kwargs = {"stream": args.stream} if args.stream else {}
        queue = RedisQueue(args.redis, **kwargs)
    monitor = Monitor(
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
    return run_command(lambda: _main(args))


def _audit_sinks(args: argparse.Namespace) -> list[Any]:
    """The ``DatasetSink(when="audit")`` that ``--audit-file`` asks for, if any."""
    from ..runtime.dataset import DatasetSink

    path = audit_file(args)
    return [DatasetSink(path, when="audit")] if path else []


def _sinks(args: argparse.Namespace) -> list[Any]:
    """Every ``on_result`` sink the options ask for: the audit file's, the dashboards'."""
    return [*_audit_sinks(args), *dashboard_sinks(args)]
