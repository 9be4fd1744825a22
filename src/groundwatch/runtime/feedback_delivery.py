"""``groundwatch feedback import``'s delivery: exports whose results are read, and a journal.

A label is delivered in two parts: its counts (``groundwatch.feedback`` and, for an audit label,
the ``groundwatch.audit.*`` sums: one cumulative metrics export holds every label's counts) and
its ``gen_ai.evaluation.result`` event (log exports of up to :data:`EVENT_BATCH` events). Over
OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``) the command builds exporters of its own and calls them
itself, without batch processors or a periodic reader, so each export's result is read: an
unreachable endpoint, a refused request or a timeout is a failure, named, and exit 1.

What was delivered is written to a journal beside each labels file (``FILE.imported``, JSON
Lines: the answer's key, its label and the part delivered), appended and synced right after
the export that delivered it. A rerun reads the journal and sends only what is missing, so no
label is counted twice and no event sent twice: after a failure, fix the endpoint and run the
same command again. The counts are exported only when every one of them can be (one export),
and events only after their counts were delivered.

Under providers set up by others (``opentelemetry-instrument`` without an OTLP endpoint in the
environment) the exporters are theirs and their results cannot be read: the import counts
through those providers and takes their ``force_flush`` as the delivery.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .._shared import config
from .._shared.errors import UsageError
from ..telemetry import Stats, Telemetry
from ..telemetry import semconv as sc
from ..telemetry._rate_counters import RateKey, rate_key
from .feedback import Feedback, Pending

JOURNAL_SUFFIX = ".imported"
"""The journal of ``labels.jsonl`` is ``labels.jsonl.imported``."""
COUNTS = "counts"
EVENT = "event"
EVENT_BATCH = 512
"""Events per log export (the SDK's batch processor's default batch)."""
EXPORT_TIMEOUT_MILLIS = 30_000


class Journal:
    """What of one labels file was delivered (see the module).

    Args:
        path: the journal's path (``FILE.imported``).

    Raises:
        UsageError: the journal cannot be read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parts: dict[str, dict[str, str]] = {COUNTS: {}, EVENT: {}}
        """Per part, each delivered answer's key and its label."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the import journal {path}: {exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            try:
                entry = json.loads(line)
                self.parts[entry["part"]][str(entry["key"])] = str(entry["label"])
            except (ValueError, KeyError, TypeError):
                raise UsageError(
                    f"the import journal {path} is damaged at line {number}: it lists the "
                    "labels already delivered; remove that line only if you know it was not"
                ) from None

    @classmethod
    def beside(cls, labels: Path) -> Journal:
        return cls(labels.with_name(labels.name + JOURNAL_SUFFIX))

    def add(self, part: str, rows: Iterable[Any]) -> None:
        """Write that ``part`` of these rows' labels was delivered (synced to disk)."""
        lines = []
        for row in rows:
            self.parts[part][row.key] = row.human
            lines.append(json.dumps({"key": row.key, "label": row.human, "part": part}) + "\n")
        if not lines:
            return
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.writelines(lines)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise UsageError(
                f"delivered, but cannot write the import journal {self.path}: {exc}; do not "
                "run this import again as it is (what it delivered would be counted twice)"
            ) from None


@dataclass
class Plan:
    """What an import still has to deliver, after its files' journals."""

    count: list[Any] = field(default_factory=list)
    """Rows whose counts are not delivered yet."""
    emit: list[Any] = field(default_factory=list)
    """Rows whose events are not delivered yet."""
    delivered: int = 0
    """Rows delivered whole by an earlier run."""
    conflicts: list[str] = field(default_factory=list)
    journals: dict[Path, Journal] = field(default_factory=dict)

    def journal(self, row: Any) -> Journal | None:
        return self.journals.get(row.path) if row.path is not None else None


def plan(rows: Sequence[Any]) -> Plan:
    """What of ``rows`` their files' journals do not list yet (rows without a file: all)."""
    result = Plan()
    for row in rows:
        journal = None
        if row.path is not None:
            journal = result.journals.get(row.path)
            if journal is None:
                journal = result.journals[row.path] = Journal.beside(row.path)
        parts = journal.parts if journal is not None else {COUNTS: {}, EVENT: {}}
        done = [parts[part].get(row.key) for part in (COUNTS, EVENT)]
        earlier = next((label for label in done if label is not None), None)
        if earlier is not None and earlier != row.human:
            result.conflicts.append(
                f"{row.path}: line {row.line}: the answer {row.key} was imported as {earlier} "
                f"({journal.path if journal else ''}) and is labelled {row.human} now: a label "
                "sent cannot be taken back"
            )
            continue
        if done[0] is None:
            result.count.append(row)
        if done[1] is None:
            result.emit.append(row)
        if done[0] is not None and done[1] is not None:
            result.delivered += 1
    return result


@dataclass
class Outcome:
    """What a delivery sent, and what it could not."""

    counted: int = 0
    """Rows whose counts were delivered."""
    emitted: int = 0
    """Rows whose events were delivered."""
    failures: list[str] = field(default_factory=list)
    """What was not delivered, and why, in words."""
    off: list[str] = field(default_factory=list)
    """Signals turned off in the environment (``OTEL_METRICS_EXPORTER=none``)."""


def expect_series(rows: Iterable[Any], stats: Stats) -> set[RateKey]:
    """Publish the audit sums of each route and judge, and the feedback counter's routes, at
    0: exported before the labels, so that Prometheus's ``increase()`` sees every label."""
    keys: set[RateKey] = set()
    routes: set[str | None] = set()
    for row in rows:
        if row.verdict is not None:
            routes.add(row.verdict.route)
            if row.audit:
                keys.add(rate_key(row.verdict.route, row.verdict.judge))
    for key in keys:
        stats.audit.expect(key)
    stats.feedback_routes = frozenset(routes)
    return keys


def pending_event(feedback: Feedback, row: Any, sampled_flags: int) -> Pending:
    """The event of one imported row, as ``Monitor.feedback`` would have emitted it."""
    return feedback.pending(
        row.trace_id,
        0,
        sampled_flags,
        row.human,
        row.verdict,
        audited=row.audit,
        source=sc.GROUNDWATCH_FEEDBACK_AUDIT_SOURCE if row.audit else "human",
    )


def _succeeded(result: Any) -> bool:
    # LogExportResult / LogRecordExportResult / MetricExportResult: an enum named SUCCESS.
    return getattr(result, "name", None) == "SUCCESS"


def _exported(export: Callable[[], Any]) -> bool:
    """Whether one export delivered: its result says SUCCESS. An exporter may also raise on a
    refused connection (the OTLP/HTTP exporters of SDK 1.39 do): that is a failed export too,
    named like any other, not a crash of the command."""
    try:
        return _succeeded(export())
    except Exception:
        return False


def _exporter(signal: str) -> Any:
    """The OTLP exporter of ``signal``, or the install line when its package is missing."""
    from ..telemetry.worker_export import otlp_exporter

    try:
        return otlp_exporter(signal)
    except ImportError as exc:
        grpc = config.otlp_protocol(signal) == "grpc"
        package = "opentelemetry-exporter-otlp-proto-grpc" if grpc else "'groundwatch[otlp]'"
        raise UsageError(
            f"sending the labels over OTLP needs the exporter: pip install {package} "
            f"({exc.name or exc} is not installed)"
        ) from None


def deliver_otlp(
    plan: Plan, stats: Stats, make_telemetry: Callable[..., Telemetry], sampled_flags: int
) -> Outcome:
    """Count and send what ``plan`` holds through exporters of this process, reading each
    export's result; journal what was delivered (see the module).

    Raises:
        UsageError: the OpenTelemetry SDK or the OTLP exporter is not installed.
    """
    try:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.resources import Resource
    except ImportError as exc:
        raise UsageError(
            "sending the labels over OTLP needs the OpenTelemetry SDK and exporter: pip "
            f"install 'groundwatch[otlp]' ({exc.name or exc} is not installed)"
        ) from None
    outcome = Outcome()
    metric_exporter: Any = _exporter("METRICS") if config.otel_signal_enabled("METRICS") else None
    log_exporter: Any = _exporter("LOGS") if config.otel_signal_enabled("LOGS") else None
    resource = Resource.create()
    # The reader reads as the exporter prefers (temporality, aggregation), as the SDK's
    # periodic reader does; collected only when this function asks.
    reader = InMemoryMetricReader(
        preferred_temporality=getattr(metric_exporter, "_preferred_temporality", None),
        preferred_aggregation=getattr(metric_exporter, "_preferred_aggregation", None),
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    collected: list[Any] = []
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(cast(Any, _Collect(collected)))
    )
    telemetry = make_telemetry(meter_provider=meter_provider, logger_provider=logger_provider)
    feedback = Feedback(telemetry, stats, memory=0)

    def export_metrics() -> bool:
        data = reader.get_metrics_data()
        if data is None:
            return True
        return _exported(lambda: metric_exporter.export(data, timeout_millis=EXPORT_TIMEOUT_MILLIS))

    try:
        if plan.count and metric_exporter is None:
            outcome.off.append(
                f"metrics (OTEL_METRICS_EXPORTER=none): the counts of {len(plan.count)} labels "
                "were not sent"
            )
        elif plan.count:
            expect_series(plan.count, stats)
            if not export_metrics():
                outcome.failures.append(
                    f"the counts of {len(plan.count)} labels (the metrics export failed: "
                    "the endpoint took nothing)"
                )
                return outcome
            for row in plan.count:
                feedback.tally(row.human, row.verdict, audited=row.audit)
            if not export_metrics():
                outcome.failures.append(
                    f"the counts of {len(plan.count)} labels (the metrics export failed)"
                )
                return outcome
            _journal(plan, COUNTS, plan.count)
            outcome.counted = len(plan.count)
        # Past a failed counts export nothing gets here: an event follows its label's counts.
        emit = plan.emit
        if emit and log_exporter is None:
            outcome.off.append(
                f"logs (OTEL_LOGS_EXPORTER=none): the events of {len(emit)} labels were not sent"
            )
            return outcome
        for start in range(0, len(emit), EVENT_BATCH):
            rows = emit[start : start + EVENT_BATCH]
            del collected[:]
            for row in rows:
                feedback.events.emit(pending_event(feedback, row, sampled_flags))
            if len(collected) != len(rows) or not _exported(lambda: log_exporter.export(collected)):
                outcome.failures.append(
                    f"the events of {len(emit) - start} labels (the logs export failed)"
                )
                return outcome
            _journal(plan, EVENT, rows)
            outcome.emitted += len(rows)
        return outcome
    finally:
        for exporter in (metric_exporter, log_exporter):
            if exporter is not None:
                exporter.shutdown()
        meter_provider.shutdown()
        logger_provider.shutdown()


def deliver_through_providers(
    plan: Plan,
    stats: Stats,
    telemetry: Telemetry,
    sampled_flags: int,
    *,
    meter_provider: Any,
    timeout_s: float = 30.0,
) -> Outcome:
    """Count and emit what ``plan`` holds through ``telemetry``'s providers (another's: the
    caller flushes them and journals when the flush finishes)."""
    outcome = Outcome()
    if expect_series(plan.count, stats):
        flush = getattr(meter_provider, "force_flush", None)
        if callable(flush):
            flush()
    feedback = Feedback(telemetry, stats, memory=0)
    for row in plan.count:
        feedback.tally(row.human, row.verdict, audited=row.audit)
    for row in plan.emit:
        feedback.events.submit(pending_event(feedback, row, sampled_flags))
    if not feedback.close(timeout_s):
        outcome.failures.append("the events were not all emitted in time")
    else:
        outcome.counted, outcome.emitted = len(plan.count), len(plan.emit)
    return outcome


def _journal(plan: Plan, part: str, rows: Sequence[Any]) -> None:
    by_file: dict[Path, list[Any]] = {}
    for row in rows:
        if row.path is not None:
            by_file.setdefault(row.path, []).append(row)
    for path, delivered in by_file.items():
        plan.journals[path].add(part, delivered)


def journal_all(plan: Plan) -> None:
    """Journal every row of ``plan`` as delivered whole (providers of others, flushed)."""
    _journal(plan, COUNTS, plan.count)
    _journal(plan, EVENT, plan.emit)


class _Collect:
    """An exporter for :class:`SimpleLogRecordProcessor` that keeps what it is given: the
    records, converted by the SDK into what exporters take, for this module to export."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def export(self, batch: Sequence[Any]) -> Any:
        self.into.extend(batch)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


__all__ = [
    "Journal",
    "Outcome",
    "Plan",
    "deliver_otlp",
    "deliver_through_providers",
    "expect_series",
    "journal_all",
    "plan",
]
