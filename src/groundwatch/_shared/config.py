"""Environment configuration of the runtime, in one place.

Every knob an operator may change without touching code is read here, when a
:class:`~groundwatch.Monitor` is built (not at import, so tests and late ``os.environ`` changes
work). An argument given to ``Monitor(...)`` always wins over the environment. A bad value is a
:class:`ConfigWarning` (on stderr, once per variable and value, with no logging set up) and
falls back to the default; it never raises. Shares take ``0.05`` or ``5%``; whole numbers
``1000``, ``1_000`` or ``1e3``.

| variable | default | meaning |
|---|---|---|
| ``GROUNDWATCH_SAMPLE_RATE`` | ``1.0`` | share of records scored, in [0, 1] |
| ``GROUNDWATCH_RATE_LIMIT_PER_MINUTE`` | unset | cap on records scored per minute |
| ``GROUNDWATCH_AUDIT_RATE`` | ``0`` | share of judged answers in the random audit |
| ``GROUNDWATCH_MAX_QUEUE_SIZE`` | ``1024`` | records waiting for the worker; more are dropped |
| ``GROUNDWATCH_MAX_CONCURRENCY`` | ``8`` | evaluations in flight for async judges |
| ``GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS`` | ``60000`` | per-evaluation deadline |
| ``GROUNDWATCH_CAPTURE_CONTENT`` | ``false`` | put question, answer, claims on spans |
| ``GROUNDWATCH_CONTENT_MAX_CHARS`` | ``2048`` | cap per captured text attribute |
| ``GROUNDWATCH_EXECUTOR`` | ``auto`` | where sync judges run: ``auto``, ``process``, ``thread`` |
| ``GROUNDWATCH_EXPORT_FROM_WORKER`` | ``false`` | worker processes export their spans, events |
| ``GROUNDWATCH_DISABLED`` | ``false`` | records are counted ``not_sampled``, nothing is scored |
| ``OTEL_SDK_DISABLED`` | ``false`` | OpenTelemetry's off switch: nothing is scored either |
| ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` | ``false`` | content capture, |
| | | when ``GROUNDWATCH_CAPTURE_CONTENT`` is not set |
| ``OTEL_EXPORTER_OTLP_PROTOCOL`` | ``http/protobuf`` | OTLP exporters groundwatch builds: |
| | | ``grpc`` or HTTP (per signal too) |
| ``OTEL_<SIGNAL>_EXPORTER`` | ``otlp`` | ``none``: that signal is not exported |
| ``GROUNDWATCH_MAX_ANSWER_CHARS`` | ``20000`` | answers are cut here (marked truncated) |
| ``GROUNDWATCH_MAX_PASSAGE_CHARS`` | ``50000`` | each passage is cut here |
| ``GROUNDWATCH_MAX_PASSAGES`` | ``64`` | passages kept per record |
| ``GROUNDWATCH_JUDGE_CONCURRENCY`` | ``16`` | requests in flight per LLM judge |
| ``GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS`` | ``3000`` | LLM judge: passages cut beyond it |

``groundwatch serve`` (docs/serve.md) reads its own variables, each the default of a flag:

| variable | default | meaning |
|---|---|---|
| ``GROUNDWATCH_SERVE_HOST`` | ``127.0.0.1`` | where serve listens; ``0.0.0.0`` in a container |
| ``GROUNDWATCH_SERVE_PORT`` | ``4328`` | its port (not the Collector's 4317/4318) |
| ``GROUNDWATCH_SERVE_GRPC_PORT`` | ``4327`` | the OTLP/gRPC receiver's port; ``off``: none |
| ``GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS`` | ``10000`` | quiet time that completes a trace |
| ``GROUNDWATCH_SERVE_ORPHAN_TIMEOUT_MILLIS`` | ``60000`` | same, for a trace with no root |
| ``GROUNDWATCH_SERVE_MAX_PENDING_TRACES`` | ``10000`` | traces held; the oldest evicted |
| ``GROUNDWATCH_SERVE_MAX_SPANS_PER_TRACE`` | ``512`` | spans kept per trace; oldest evicted |
| ``GROUNDWATCH_SERVE_MAX_BODY_BYTES`` | ``8388608`` | request body cap (413 past it) |
| ``GROUNDWATCH_SERVE_INTERACTIONS`` | ``trace`` | ``trace`` or ``pair`` (retriever + LLM) |
| ``GROUNDWATCH_SERVE_ROUTE_ATTRIBUTE`` | unset | span attribute naming the route |
| ``GROUNDWATCH_SERVE_TLS_CERT`` | unset | PEM certificate (chain): both transports TLS only |
| ``GROUNDWATCH_SERVE_TLS_KEY`` | unset | its PEM private key (unencrypted) |
| ``GROUNDWATCH_SERVE_TLS_CLIENT_CA`` | unset | CA of client certificates (mutual TLS) |
| ``GROUNDWATCH_SERVE_AUTH_TOKEN_FILE`` | unset | file of accepted bearer tokens, one a line |

``groundwatch worker`` and ``groundwatch serve --redis`` (docs/distributed.md):

| variable | default | meaning |
|---|---|---|
| ``GROUNDWATCH_REDIS_URL`` | unset | the Redis URL when ``--redis`` is not given (out of ``ps``) |

The input caps are read once, when ``groundwatch`` is imported (they size every record).
``GROUNDWATCH_RAISE_INTERNAL_ERRORS`` is a development switch (below).
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

_logger = logging.getLogger(__name__)

T = TypeVar("T")

SAMPLE_RATE = "GROUNDWATCH_SAMPLE_RATE"
DEFAULT_SAMPLE_RATE = 1.0
"""Score everything by default: right for development and modest traffic; set a lower rate (or a
rate limit) in production, where ``groundwatch.records{decision=queue_full}`` shows overload."""

RATE_LIMIT_PER_MINUTE = "GROUNDWATCH_RATE_LIMIT_PER_MINUTE"
DEFAULT_RATE_LIMIT_PER_MINUTE = None

AUDIT_RATE = "GROUNDWATCH_AUDIT_RATE"
DEFAULT_AUDIT_RATE = 0.0
"""No audit by default: an audit asks people to label answers (docs/feedback.md "Audits");
``0.02`` gives about 200 labels per 10,000 judged answers. The app, ``serve`` and every
``worker`` of a deployment read the same variable, so they mark the same traces."""

MAX_QUEUE_SIZE = "GROUNDWATCH_MAX_QUEUE_SIZE"
DEFAULT_MAX_QUEUE_SIZE = 1024
"""Records hold references to the caller's texts; 1024 bounds the memory held at a few MB."""

MAX_CONCURRENCY = "GROUNDWATCH_MAX_CONCURRENCY"
DEFAULT_MAX_CONCURRENCY = 8
"""Concurrent evaluations for async (LLM) judges. Sync judges run one at a time per worker."""

EVALUATION_TIMEOUT_MILLIS = "GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS"
DEFAULT_EVALUATION_TIMEOUT_MILLIS = 60_000

CAPTURE_CONTENT = "GROUNDWATCH_CAPTURE_CONTENT"
DEFAULT_CAPTURE_CONTENT = False

CONTENT_MAX_CHARS = "GROUNDWATCH_CONTENT_MAX_CHARS"
DEFAULT_CONTENT_MAX_CHARS = 2048

EXECUTOR = "GROUNDWATCH_EXECUTOR"
EXECUTOR_AUTO = "auto"
DEFAULT_EXECUTOR = EXECUTOR_AUTO
"""A worker process for sync judges (the GIL: docs/runtime.md), a thread if that fails."""
EXECUTORS = ("auto", "thread", "process")

DISABLED = "GROUNDWATCH_DISABLED"
EXPORT_FROM_WORKER = "GROUNDWATCH_EXPORT_FROM_WORKER"

OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
"""OpenTelemetry's switch for the whole SDK (the spec's "disable the SDK for all signals"). With
the SDK off, nothing groundwatch emits goes anywhere, so scoring would be wasted CPU: the monitor
then behaves as with ``GROUNDWATCH_DISABLED``."""

GENAI_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' content-capture switch, honoured so that one variable turns
content on for every GenAI instrumentation; ``GROUNDWATCH_CAPTURE_CONTENT`` wins when set. Besides
booleans it takes the GenAI utilities' modes: ``span_only`` and ``span_and_event`` capture
(groundwatch puts content on spans), ``event_only`` and ``no_content`` do not."""
_GENAI_MODES = {"span_only": True, "span_and_event": True, "event_only": False, "no_content": False}

MAX_ANSWER_CHARS = "GROUNDWATCH_MAX_ANSWER_CHARS"
DEFAULT_MAX_ANSWER_CHARS = 20_000
MAX_PASSAGE_CHARS = "GROUNDWATCH_MAX_PASSAGE_CHARS"
DEFAULT_MAX_PASSAGE_CHARS = 50_000
MAX_PASSAGES = "GROUNDWATCH_MAX_PASSAGES"
DEFAULT_MAX_PASSAGES = 64
"""Input caps: one pathological input must not cost unbounded time or memory on the worker.
Raise them knowingly, to score very long answers."""

JUDGE_CONCURRENCY = "GROUNDWATCH_JUDGE_CONCURRENCY"
JUDGE_MAX_CONTEXT_TOKENS = "GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS"
"""Defaults of :class:`~groundwatch.OpenAIJudge` (its arguments win); the judge reads them."""

SERVE_HOST = "GROUNDWATCH_SERVE_HOST"
DEFAULT_SERVE_HOST = "127.0.0.1"
SERVE_PORT = "GROUNDWATCH_SERVE_PORT"
DEFAULT_SERVE_PORT = 4328
"""Not OTLP's 4318: serve usually runs beside the app's Collector, which listens on 4317 and 4318
and forwards to serve (4318 + 10 is easy to remember and free of the Collector's other ports)."""
SERVE_GRPC_PORT = "GROUNDWATCH_SERVE_GRPC_PORT"
DEFAULT_SERVE_GRPC_PORT = 4327
"""Not OTLP's 4317, for the same reason (4317 + 10)."""
SERVE_QUIET_PERIOD_MILLIS = "GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS"
DEFAULT_SERVE_QUIET_PERIOD_MILLIS = 10_000
"""Exporters batch (the SDK's BatchSpanProcessor waits up to 5 s, a Collector's batch processor
about as long), so a trace's spans can arrive seconds apart: 10 s covers both hops."""
SERVE_ORPHAN_TIMEOUT_MILLIS = "GROUNDWATCH_SERVE_ORPHAN_TIMEOUT_MILLIS"
DEFAULT_SERVE_ORPHAN_TIMEOUT_MILLIS = 60_000
SERVE_MAX_PENDING_TRACES = "GROUNDWATCH_SERVE_MAX_PENDING_TRACES"
DEFAULT_SERVE_MAX_PENDING_TRACES = 10_000
SERVE_MAX_SPANS_PER_TRACE = "GROUNDWATCH_SERVE_MAX_SPANS_PER_TRACE"
DEFAULT_SERVE_MAX_SPANS_PER_TRACE = 512
SERVE_MAX_BODY_BYTES = "GROUNDWATCH_SERVE_MAX_BODY_BYTES"
DEFAULT_SERVE_MAX_BODY_BYTES = 8 * 1024 * 1024
"""The OpenTelemetry Collector's exporters send batches of at most a few MB; 8 MiB leaves room
and bounds what one request can make us hold (a gzip bomb is cut at the same size)."""
SERVE_INTERACTIONS = "GROUNDWATCH_SERVE_INTERACTIONS"
SERVE_INTERACTION_MODES = ("trace", "pair")
DEFAULT_SERVE_INTERACTIONS = "trace"
SERVE_ROUTE_ATTRIBUTE = "GROUNDWATCH_SERVE_ROUTE_ATTRIBUTE"
SERVE_TLS_CERT = "GROUNDWATCH_SERVE_TLS_CERT"
SERVE_TLS_KEY = "GROUNDWATCH_SERVE_TLS_KEY"
SERVE_TLS_CLIENT_CA = "GROUNDWATCH_SERVE_TLS_CLIENT_CA"
SERVE_AUTH_TOKEN_FILE = "GROUNDWATCH_SERVE_AUTH_TOKEN_FILE"
"""Paths, not secrets: a token is never taken from a variable or a flag, so that it stays out
of ``ps``, shell history and ``--help``; the file it is in is checked when serve starts."""

REDIS_URL = "GROUNDWATCH_REDIS_URL"
"""The default of ``--redis``: a URL with an ACL password, kept out of the command line (and so
out of ``ps``) where the deployment sets it from a secret."""

RAISE_INTERNAL_ERRORS = "GROUNDWATCH_RAISE_INTERNAL_ERRORS"
"""Development switch: re-raise groundwatch's own bugs instead of logging them (our test suite
sets it so our bugs cannot hide; never set it in production)."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigWarning(UserWarning):
    """A configuration variable's value could not be read; its default is used instead.

    A Python warning, not a log record: it reaches a person (on stderr, once per variable and
    value under Python's default filter) with no logging set up, where the library's
    ``NullHandler`` would swallow a log line. ``logging.captureWarnings(True)`` sends it to
    logging instead; ``warnings.filterwarnings("error", category=ConfigWarning)`` makes tests
    strict about it (reading the environment still never raises: see :func:`_report`)."""


def _report(name: str, raw: str, expected: str, default: object) -> None:
    """Say that ``name``'s value ``raw`` is ignored: a :class:`ConfigWarning`, or a logged
    warning where a filter turns warnings into errors (configuration is read inside the host's
    code, e.g. ``Monitor()``, which must not raise for it)."""
    message = f"groundwatch: ignoring {name}={raw!r} (expected {expected}); using {default!r}"
    try:
        # Located at "environment", not at a line of ours (the default display would print
        # that line's source); one registry, so the default filter's "once per location and
        # text" is once per variable and value, however many monitors read it.
        warnings.warn_explicit(
            message,
            ConfigWarning,
            "environment",
            0,
            module=__name__,
            registry=_WARNED,
        )
    except Exception:
        _logger.warning("%s", message)


_WARNED: dict[Any, Any] = {}
"""The warnings registry of :func:`_report` (what the default filter has shown)."""


def _read(
    name: str,
    default: T,
    parse: Callable[[str], T],
    check: Callable[[T], bool],
    expected: str,
) -> T:
    """``parse`` of the variable's value if it parses (it raises ``ValueError`` or
    ``TypeError`` if not; ``None`` is a value like any other) and passes ``check``; otherwise
    a :class:`ConfigWarning` saying what was ``expected``, and ``default``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = parse(raw.strip())
    except (TypeError, ValueError):
        pass
    else:
        if check(value):
            return value
    _report(name, raw, expected, default)
    return default


def _parse_bool(raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(raw)


_BOOL_FORMS = "true or false (1/0, yes/no, on/off)"


def _parse_fraction(raw: str) -> float:
    """``0.05`` or ``5%``."""
    if raw.endswith("%"):
        return float(raw[:-1].strip()) / 100
    return float(raw)


def parse_share(value: object, name: str) -> float:
    """A share in [0, 1] as the environment variables take it: a number, or a string such as
    ``"0.02"`` or ``"2%"`` (``Monitor(audit_rate="2%")``, ``--max-rate-upper-bound 25%``).

    Raises:
        ValueError: not a share within [0, 1] (the message names ``name``).
    """
    try:
        if isinstance(value, str):
            share = _parse_fraction(value.strip())
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            share = float(value)
        else:
            share = math.nan
    except ValueError:
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise ValueError(
            f"{name} must be a share within [0, 1] or 0%-100% (0.02 or '2%'), got {value!r}"
        )
    return share


def _parse_int(raw: str) -> int:
    """``1000``, ``1_000``, ``1e3`` or ``1000.0``: a whole number however it is written."""
    try:
        return int(raw)
    except ValueError:
        value = float(raw)
        if not value.is_integer():
            raise
        return int(value)


def env_float(name: str, default: float, lo: float, hi: float) -> float:
    """A number in ``[lo, hi]``; a share (``hi <= 1``) may be written as a percentage too."""
    if hi <= 1.0:
        return _read(
            name,
            default,
            _parse_fraction,
            lambda v: lo <= v <= hi,
            f"a number from {lo:g} to {hi:g}, or a percentage such as 5%",
        )
    return _read(name, default, float, lambda v: lo <= v <= hi, f"a number from {lo:g} to {hi:g}")


def env_int(name: str, default: int, lo: int = 1, hi: int | None = None) -> int:
    expected = f"a whole number >= {lo}" if hi is None else f"a whole number from {lo} to {hi}"
    return _read(name, default, _parse_int, lambda v: v >= lo and (hi is None or v <= hi), expected)


def parse_port_or_off(raw: str) -> int | None:
    """A TCP port (0: the system picks a free one), or ``None`` for ``off``.

    Raises:
        ValueError: anything else.
    """
    if raw.strip().lower() == "off":
        return None
    port = int(raw)
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return port


def env_port_or_off(name: str, default: int | None) -> int | None:
    return _read(name, default, parse_port_or_off, lambda v: True, "a port (0-65535) or off")


def env_bool(name: str, default: bool) -> bool:
    return _read(name, default, _parse_bool, lambda v: True, _BOOL_FORMS)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    return _read(name, default, str.lower, lambda v: v in choices, "one of " + ", ".join(choices))


_HOST = re.compile(r"[A-Za-z0-9._\-:%\[\]]+")
"""A host name or an IPv4/IPv6 address (no scheme, path or port)."""


def env_host(name: str, default: str) -> str:
    """An address to listen on: a host name or an IP address."""
    return _read(
        name,
        default,
        str,
        lambda v: _HOST.fullmatch(v) is not None and v.count(":") != 1,
        "a host name or IP address, without scheme or port",
    )


def env_name(name: str, default: str | None) -> str | None:
    """An attribute name: any text without spaces."""
    return _read(
        name, default, str, lambda v: v is not None and v.split() == [v], "a name, no spaces"
    )


def _parse_capture(raw: str) -> bool:
    mode = _GENAI_MODES.get(raw.lower())
    return _parse_bool(raw) if mode is None else mode


def capture_content_default() -> bool:
    """``GROUNDWATCH_CAPTURE_CONTENT`` if set, else the GenAI switch, else off."""
    genai = _read(
        GENAI_CAPTURE_CONTENT,
        DEFAULT_CAPTURE_CONTENT,
        _parse_capture,
        lambda v: True,
        f"{_BOOL_FORMS}, or one of {', '.join(_GENAI_MODES)}",
    )
    return env_bool(CAPTURE_CONTENT, genai)


def input_caps() -> tuple[int, int, int]:
    """(max answer chars, max passage chars, max passages) from the environment."""
    return (
        env_int(MAX_ANSWER_CHARS, DEFAULT_MAX_ANSWER_CHARS),
        env_int(MAX_PASSAGE_CHARS, DEFAULT_MAX_PASSAGE_CHARS),
        env_int(MAX_PASSAGES, DEFAULT_MAX_PASSAGES),
    )


@dataclass(frozen=True)
class RuntimeConfig:
    """The environment's view of the runtime knobs (see the module docstring)."""

    sample_rate: float
    rate_limit_per_minute: float | None
    audit_rate: float
    max_queue_size: int
    max_concurrency: int
    evaluation_timeout_millis: int
    capture_content: bool
    content_max_chars: int
    executor: str
    disabled: bool
    export_from_worker: bool


_PREFIX = "GROUNDWATCH_"


def known_variables() -> frozenset[str]:
    """Every ``GROUNDWATCH_*`` variable groundwatch reads (the names declared above)."""
    return frozenset(
        value
        for key, value in globals().items()
        if key.isupper()
        and isinstance(value, str)
        and value.startswith(_PREFIX)
        and value != _PREFIX
    )


def warn_unknown_variables() -> None:
    """A :class:`ConfigWarning` for each ``GROUNDWATCH_*`` variable set in the environment
    that groundwatch does not read (once per name), naming the nearest known one: a misspelled
    ``GROUNDWATCH_SAMPLING_RATE=0.0`` would otherwise score everything in silence. Only the
    name is said, never the value (it may be a key)."""
    known = known_variables()
    for name in sorted(n for n in os.environ if n.startswith(_PREFIX) and n not in known):
        # Compared without the prefix, which every name shares.
        tails = sorted(k[len(_PREFIX) :] for k in known)
        import difflib  # only to name the variable a misspelt one was meant to be

        nearest = difflib.get_close_matches(name[len(_PREFIX) :], tails, n=1, cutoff=0.6)
        hint = (
            f"did you mean {_PREFIX}{nearest[0]}?"
            if nearest
            else "docs/configuration.md lists them"
        )
        message = f"groundwatch: ignoring {name}, which is not a groundwatch variable; {hint}"
        try:
            warnings.warn_explicit(
                message, ConfigWarning, "environment", 0, module=__name__, registry=_WARNED
            )
        except Exception:
            _logger.warning("%s", message)


def from_env() -> RuntimeConfig:
    """Read every runtime variable now; bad values warn and fall back, unknown
    ``GROUNDWATCH_*`` names warn too (:func:`warn_unknown_variables`)."""
    warn_unknown_variables()
    limit: float | None = _read(
        RATE_LIMIT_PER_MINUTE,
        None,
        float,
        lambda v: v is not None and 0 < v < math.inf,
        "a number of records per minute > 0",
    )
    return RuntimeConfig(
        sample_rate=env_float(SAMPLE_RATE, DEFAULT_SAMPLE_RATE, 0.0, 1.0),
        rate_limit_per_minute=limit,
        audit_rate=env_float(AUDIT_RATE, DEFAULT_AUDIT_RATE, 0.0, 1.0),
        max_queue_size=env_int(MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SIZE),
        max_concurrency=env_int(MAX_CONCURRENCY, DEFAULT_MAX_CONCURRENCY),
        evaluation_timeout_millis=env_int(
            EVALUATION_TIMEOUT_MILLIS, DEFAULT_EVALUATION_TIMEOUT_MILLIS
        ),
        capture_content=capture_content_default(),
        content_max_chars=env_int(CONTENT_MAX_CHARS, DEFAULT_CONTENT_MAX_CHARS),
        executor=env_choice(EXECUTOR, DEFAULT_EXECUTOR, EXECUTORS),
        # Both are read (and a bad value of either reported) whatever the other says.
        disabled=any([env_bool(DISABLED, False), env_bool(OTEL_SDK_DISABLED, False)]),
        export_from_worker=env_bool(EXPORT_FROM_WORKER, False),
    )


OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
"""OpenTelemetry's own variables, read here for the exporters groundwatch builds itself (the
worker processes of ``export_from_worker``, ``groundwatch worker`` and ``serve``); the OTLP
exporters read their endpoint, headers and timeout themselves. Per signal:
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (``…_LOGS_…``, ``…_METRICS_…``), and
``OTEL_TRACES_EXPORTER`` (``OTEL_LOGS_EXPORTER``, ``OTEL_METRICS_EXPORTER``)."""


_OTLP_PROTOCOLS = ("http/protobuf", "grpc")
"""What the OTLP exporters groundwatch builds speak (the Python exporters have no
``http/json``)."""
_SIGNAL_EXPORTERS = frozenset({"otlp", "none", "console", "zipkin", "prometheus", "logging"})
"""The values OpenTelemetry's ``OTEL_<SIGNAL>_EXPORTER`` takes; groundwatch's own exporters
follow ``otlp`` and ``none``, the rest are the app's business."""


def otlp_protocol(signal: str) -> str:
    """``http/protobuf`` (the default) or ``grpc`` for ``signal``: its own variable, else
    ``OTEL_EXPORTER_OTLP_PROTOCOL``."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", OTLP_PROTOCOL):
        if env_str(name, None) is not None:
            return env_choice(name, "http/protobuf", _OTLP_PROTOCOLS)
    return "http/protobuf"


def otel_signal_enabled(signal: str) -> bool:
    """``OTEL_<signal>_EXPORTER`` is not ``none`` (for the exporters groundwatch builds)."""
    name = f"OTEL_{signal}_EXPORTER"
    raw = env_str(name, None)
    if raw is None:
        return True
    names = [n.strip() for n in raw.lower().split(",")]
    unknown = [n for n in names if n not in _SIGNAL_EXPORTERS]
    if unknown:
        _report(name, raw, "otlp, none or another OpenTelemetry exporter name", "otlp")
    return names != ["none"]


def env_str(name: str, default: str | None) -> str | None:
    raw = os.environ.get(name)
    return raw.strip() if raw is not None and raw.strip() else default


def raise_internal_errors() -> bool:
    return env_bool(RAISE_INTERNAL_ERRORS, False)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
