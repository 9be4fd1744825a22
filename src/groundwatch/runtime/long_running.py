"""What the long-running commands (``groundwatch worker``, ``groundwatch serve``) share, and
the telemetry set-up ``groundwatch feedback import`` uses too.

Both run one asyncio main until SIGTERM or SIGINT, send their telemetry through the global
OpenTelemetry providers, and fail as every command does: what they raise reaches the command
line on top (:mod:`groundwatch.cli`), which says it in one line and exits 2 for a usage problem
(:class:`~groundwatch._shared.errors.UsageError`), 1 at run time. Below the commands, so that
``serve``, ``worker`` and ``feedback`` import it and the command line imports them.

Telemetry: under ``opentelemetry-instrument`` the providers it configured; otherwise, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, OTLP exporters for traces, logs and metrics built from
the standard ``OTEL_EXPORTER_OTLP_*`` variables (OTLP/HTTP unless ``…_PROTOCOL`` says ``grpc``;
``OTEL_<SIGNAL>_EXPORTER=none`` turns one off), flushed when the command ends. Each says at
start where its telemetry goes (:func:`telemetry_destination`), and :class:`Console` shows a
person what it scores.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from .._shared.errors import UsageError

LOG_FORMAT = "%(asctime)s %(source)s%(message)s"

_built_from_env: str | None = None
"""The endpoint of the OTLP exporters :func:`otlp_providers` built, if it built them."""
_had_providers = False
"""Whether a tracer provider was set before the command started (opentelemetry-instrument)."""


class _SourceOnceFormatter(logging.Formatter):
    """Names the logger before its message unless the message names its command already:
    ``groundwatch serve: stopped`` from the ``groundwatch`` logger is not prefixed again,
    ``aiohttp.server: ...`` keeps its source."""

    def format(self, record: logging.LogRecord) -> str:
        root = record.name.partition(".")[0]
        record.source = "" if record.getMessage().startswith(root) else f"{record.name}: "
        return super().format(record)


def _setup_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_SourceOnceFormatter(LOG_FORMAT))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def otlp_providers() -> Callable[[], None]:
    """OTLP exporters when the environment asks for them and nobody set providers; returns
    what flushes them at exit (nothing to do otherwise)."""
    from opentelemetry import trace

    global _built_from_env, _had_providers
    _built_from_env = None
    _had_providers = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or _had_providers:
        return lambda: None
    from opentelemetry import _logs, metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from .._shared import config
    from ..telemetry.worker_export import otlp_exporter, otlp_worker_providers

    # Spans and logs as a worker process of export_from_worker builds them (the SDK's
    # environment resource), and metrics the same way.
    tp, lp = otlp_worker_providers({})
    on = config.otel_signal_enabled("METRICS")
    mp = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(otlp_exporter("METRICS"))] if on else []
    )
    trace.set_tracer_provider(tp)
    _logs.set_logger_provider(lp)
    metrics.set_meter_provider(mp)
    _built_from_env = endpoint

    def flush() -> None:
        tp.shutdown()
        lp.shutdown()
        mp.shutdown()

    return flush


def stop_event() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (call on the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def telemetry_destination() -> str:
    """Where the command's telemetry goes, in words, for its start-up line."""
    if _built_from_env is not None:
        from .._shared import config

        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        signals = [
            s.lower() for s in ("TRACES", "LOGS", "METRICS") if config.otel_signal_enabled(s)
        ]
        return (
            f"telemetry goes over OTLP to {_built_from_env} ({protocol}: "
            f"{', '.join(signals) or 'every signal turned off'})"
        )
    if _had_providers:
        return "telemetry goes to the OpenTelemetry providers this process set up"
    return (
        "telemetry goes nowhere (no OTEL_EXPORTER_OTLP_ENDPOINT, not under "
        "opentelemetry-instrument): evaluations are scored and not exported; --verbose prints them"
    )


def audit_rate(raw: str) -> float:
    """An ``--audit-rate`` value: ``0.02`` or ``2%``, within [0, 1]."""
    from .._shared import config

    try:
        value = config._parse_fraction(raw.strip())
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share within [0, 1] or 0%-100%, got {raw}")
    return value


def add_audit_option(parser: Any) -> None:
    """``--audit-rate``, as ``serve`` and ``worker`` take it: the same variable as the app's, so
    every part of a deployment marks the same traces."""
    from .._shared import config

    parser.add_argument(
        "--audit-rate",
        type=audit_rate,
        default=config.env_float(config.AUDIT_RATE, config.DEFAULT_AUDIT_RATE, 0.0, 1.0),
        metavar="SHARE",
        help=(
            "share of judged answers in the random audit, chosen by trace id as the app's "
            "Monitor(audit_rate=...) chooses (docs/feedback.md#audits) "
            f"({config.AUDIT_RATE}, default 0)"
        ),
    )
    parser.add_argument(
        "--audit-file",
        metavar="PATH",
        help=(
            "write the audited answers here (JSON Lines, as DatasetSink(when='audit') writes "
            "them) for people to label and bring back with groundwatch feedback import; needs "
            "--capture-content and an audit rate"
        ),
    )


def audit_file(args: argparse.Namespace) -> str | None:
    """The path ``--audit-file`` asks the audited answers to be written to, if any (the
    command builds its ``DatasetSink(path, when="audit")``: this module imports none of the
    runtime's scoring).

    Raises:
        UsageError: ``--audit-file`` without ``--capture-content`` or without an audit rate.
    """
    path: str | None = getattr(args, "audit_file", None)
    if not path:
        return None
    if not args.capture_content:
        raise UsageError(
            "--audit-file writes the question, passages and answer of each audited answer for "
            "people to label: add --capture-content (and keep the file where the content may be)"
        )
    if not args.audit_rate:
        raise UsageError(
            "--audit-file keeps the audited answers and nothing is audited: add --audit-rate "
            "0.02 (say), or set GROUNDWATCH_AUDIT_RATE"
        )
    return path


def add_sink_option(parser: Any) -> None:
    """``--sink NAME`` (repeatable), as ``serve`` and ``worker`` take it: a dashboard sink
    (docs/dashboards.md) that writes each verdict into a tracing tool as its own annotation,
    configured from that tool's own environment variables."""
    from ..dashboards import SINKS

    parser.add_argument(
        "--sink",
        action="append",
        choices=sorted(SINKS),
        default=[],
        metavar="NAME",
        help=(
            "also write each verdict into a tracing tool as its own annotations "
            f"({', '.join(sorted(SINKS))}; configured by the tool's environment variables, "
            "docs/dashboards.md); repeatable"
        ),
    )


def dashboard_sinks(args: argparse.Namespace) -> list[Any]:
    """The dashboard sinks ``--sink`` names, built (the commands add them to ``on_result``)."""
    from ..dashboards import sink_by_name

    return [sink_by_name(name) for name in getattr(args, "sink", None) or ()]


def add_console_options(parser: Any) -> None:
    """``--verbose`` and ``--progress-interval-ms``, as :class:`Console` reads them."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print a line per evaluation (its trace id, label and scores; the question with "
        "--capture-content) and a periodic progress line (printed on a terminal anyway)",
    )
    parser.add_argument(
        "--progress-interval-ms",
        type=int,
        default=10_000,
        metavar="MS",
        help="how often the progress line is printed when something changed (default 10000)",
    )


def _printer(console: Console) -> Any:
    """A span processor that counts the evaluation spans by label and, when verbose, prints
    one line for each (an SDK ``SpanProcessor``: the SDK is imported only here)."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    from ..telemetry import semconv as sc

    class Printer(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if span.name != sc.SPAN_EVALUATION:
                return
            try:
                attrs = dict(span.attributes or {})
                console.labels[str(attrs.get(sc.GROUNDWATCH_LABEL, "?"))] += 1
                if console.verbose:
                    trace_id = span.context.trace_id if span.context is not None else 0
                    console.evaluation(attrs, trace_id)
            except Exception:  # printing must never break the export of the span
                pass

    return Printer()


class Console:
    """What a long-running command shows a person: with ``--verbose`` a line per evaluation
    (read from the evaluation spans, so it shows exactly what is exported) and, with
    ``--verbose`` or on a terminal, a periodic progress line.

    Args:
        name: the command (``"groundwatch worker"``), the prefix of every line.
        args: the parsed options of :func:`add_console_options`.
    """

    def __init__(self, name: str, args: argparse.Namespace, stream: TextIO | None = None) -> None:
        self.name = name
        self.verbose = bool(getattr(args, "verbose", False))
        self.interval_s = max(0.05, getattr(args, "progress_interval_ms", 10_000) / 1000)
        self.err = stream if stream is not None else sys.stderr
        self.progress_on = self.verbose or self.err.isatty()
        self.labels: Counter[str] = Counter()
        """Evaluation spans seen, by label (``error`` among them)."""
        self.watching = self._watch()

    def _watch(self) -> bool:
        """Put the printer on the global tracer provider (an SDK one without exporters when
        none is set, so that spans are made to be read): whether it is on."""
        from opentelemetry import trace

        try:
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError:  # no SDK: no spans to read
            return False
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            if not self.progress_on:
                return False
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        if not isinstance(provider, TracerProvider):
            return False
        provider.add_span_processor(_printer(self))
        return True

    def say(self, message: str) -> None:
        """One status line on stderr."""
        print(f"{self.name}: {message}", file=self.err, flush=True)

    def evaluation(self, attrs: dict[str, Any], trace_id: int) -> None:
        from ..telemetry import semconv as sc

        # The trace id is what a person looks the answer up by in a trace backend; the record
        # id (random, on the span) names an answer only where it had no trace.
        if trace_id:
            answer = f"trace={trace_id:032x}"
        else:
            answer = f"record={attrs.get(sc.GROUNDWATCH_RECORD_ID) or '?'}"
        parts = [f"scored {answer}", str(attrs.get(sc.GROUNDWATCH_LABEL, "?"))]
        if attrs.get(sc.ERROR_TYPE):
            parts.append(f"({attrs[sc.ERROR_TYPE]})")
        for key, name in (
            (sc.GROUNDWATCH_FAITHFULNESS, "faithfulness"),
            (sc.GROUNDWATCH_GROUNDEDNESS, "groundedness"),
        ):
            if isinstance(attrs.get(key), (int, float)):
                parts.append(f"{name}={attrs[key]:.2f}")
        if attrs.get(sc.GROUNDWATCH_ROUTE):
            parts.append(f"route={attrs[sc.GROUNDWATCH_ROUTE]}")
        if attrs.get(sc.GROUNDWATCH_CONTENT_QUESTION):
            parts.append(f"q={attrs[sc.GROUNDWATCH_CONTENT_QUESTION]!r}")
        print(f"{self.name}: {' '.join(parts)}", flush=True)

    @property
    def errors(self) -> int:
        """Evaluations that ended in ``error`` (``-1`` when they cannot be seen)."""
        return self.labels["error"] if self.watching else -1

    async def progress(self, line: Callable[[], str]) -> None:
        """Print ``line()`` every interval when it changed, until cancelled."""
        if not self.progress_on:
            return
        last = None
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                text = line()
            except Exception:  # a count that cannot be read: skip this round
                continue
            if text != last:
                self.say(text)
                last = text


def run_command(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's asyncio ``main`` with logging and telemetry set up; its exit code.

    Args:
        main: builds the coroutine to run; what it raises goes on up to the command line
            (:func:`groundwatch.cli.main`), which reports it in one line: a ``UsageError``
            exits 2, anything else 1. The telemetry is flushed either way.
    """
    _setup_logging()
    flush = otlp_providers()
    try:
        return asyncio.run(main())
    finally:
        flush()
