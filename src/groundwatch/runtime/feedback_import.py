"""``groundwatch feedback import``: people's labels of audited answers, back into telemetry.

Where the verdict was made in ``groundwatch serve`` or ``groundwatch worker``, no app's monitor
remembers it, so ``Monitor.feedback`` cannot say what the judge thought. The rows people label
carry it instead: a ``DatasetSink(when="audit")`` row (or one built from the evaluation spans)
names the trace, the route, the judge, its label and its probability. Each labelled row is
counted as ``Monitor.feedback`` counts it (``groundwatch.feedback``, a ``gen_ai.evaluation.result``
event in the answer's trace) and, for a row of the random audit (``"audit": true``, a judged
answer, its trace's first label in the import), in the ``groundwatch.audit.*`` sums the
hallucination-rate estimate reads. A row without the audit marker (a thumbs-down, a
hand-picked answer) is feedback only: it never enters the estimate.

A file is checked whole before anything is counted: one row that cannot be read imports
nothing (exit 1, each bad line named), so fixing the file and running again never counts a
label twice. Counters are cumulative: import each file once.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.trace import TraceFlags

from .._shared.errors import CommandError, UsageError
from ..telemetry import Stats, Telemetry
from ..telemetry import semconv as sc
from ..telemetry._rate_counters import RateKey, rate_key
from ..types import LABELS
from .feedback import HUMAN_LABELS, Feedback, Verdict

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_SAMPLED = int(TraceFlags(TraceFlags.SAMPLED))
MAX_REPORTED = 10
"""Bad lines named in the error (the count says how many more)."""

_KEPT: list[Stats] = []
"""The counts of this process's imports, kept for its lifetime: the instruments hold their
sources weakly (as a monitor's), and providers set up by others (``opentelemetry-instrument``)
may collect them last at exit."""


@dataclass(frozen=True)
class LabelRow:
    """One labelled row, read and checked."""

    line: int
    trace_id: int
    """0 for a row whose answer had no trace (its event carries none)."""
    human: str
    """``grounded`` or ``hallucinated``."""
    verdict: Verdict | None
    """The judge's verdict the row carries (``None``: it carries none)."""
    audit: bool
    """A label of the random audit, counted in ``groundwatch.audit.*``."""
    key: str
    """What a repeated row is told apart by: the trace id, else the row's ``id``."""


@dataclass
class ImportSummary:
    """What an import read and counted."""

    rows: list[LabelRow] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Rows not counted at all, by reason (``unlabelled``: a row nobody labelled yet)."""
    errors: list[str] = field(default_factory=list)
    repeated: int = 0
    """Audit rows of a trace labelled earlier in the import: counted as feedback only (one
    label per answer in the estimate)."""

    @property
    def audit_labels(self) -> int:
        return sum(row.audit for row in self.rows)

    def describe(self) -> str:
        other = len(self.rows) - self.audit_labels
        text = f"{len(self.rows)} labels: {self.audit_labels} audit, {other} other feedback"
        if self.repeated:
            text += f" ({self.repeated} repeated audit labels among them)"
        if self.skipped:
            text += "; skipped " + ", ".join(
                f"{n} {why}" for why, n in sorted(self.skipped.items())
            )
        return text


def _trace_id(row: Mapping[str, Any]) -> tuple[int, str] | str:
    """The row's trace id (``trace_id``, else an ``id`` of 32 hex digits) and its key."""
    for name in ("trace_id", "id"):
        value = row.get(name)
        if isinstance(value, str) and _HEX32.match(value.strip().lower()):
            text = value.strip().lower()
            if int(text, 16):
                return int(text, 16), text
    record_id = row.get("id")
    if row.get("trace_id") not in (None, ""):
        return "trace_id must be 32 hex digits"
    if isinstance(record_id, str) and record_id:
        return 0, record_id
    return "the row names no answer (trace_id or id)"


def _verdict(row: Mapping[str, Any]) -> Verdict | str:
    """The judge's verdict a row carries, or what is wrong with it."""
    label = row.get("judge_label")
    if label not in LABELS:
        return f"judge_label must be one of {', '.join(LABELS)}, got {label!r:.40}"
    judge = row.get("judge", "")
    route = row.get("route")
    if not isinstance(judge, str) or (route is not None and not isinstance(route, str)):
        return "judge and route must be strings"
    probability = row.get("hallucination_probability")
    if probability is not None and (
        isinstance(probability, bool)
        or not isinstance(probability, (int, float))
        or not 0.0 <= probability <= 1.0
    ):
        return f"hallucination_probability must be a number in [0, 1], got {probability!r:.40}"
    return Verdict(
        label,
        route,
        0,
        _SAMPLED,
        judge,
        None if probability is None else float(probability),
        bool(row.get("audit") is True and label != "error"),
    )


def read_labels(lines: Iterable[str], summary: ImportSummary | None = None) -> ImportSummary:
    """Read labelled rows (JSON Lines): every readable row, and each bad line's reason."""
    summary = summary if summary is not None else ImportSummary()
    seen: set[str] = {row.key for row in summary.rows if row.audit}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            summary.errors.append(f"line {number}: not JSON")
            continue
        if not isinstance(row, dict):
            summary.errors.append(f"line {number}: not a JSON object")
            continue
        label = row.get("label")
        if label is None or label == "":
            summary.skipped["unlabelled"] += 1
            continue
        if not isinstance(label, str) or label.strip().lower() not in HUMAN_LABELS:
            summary.errors.append(
                f"line {number}: label must be one of {', '.join(sorted(HUMAN_LABELS))}, "
                f"got {label!r:.40}"
            )
            continue
        ids = _trace_id(row)
        verdict = _verdict(row) if "judge_label" in row or row.get("audit") is True else None
        if isinstance(ids, str) or isinstance(verdict, str):
            summary.errors.append(f"line {number}: {ids if isinstance(ids, str) else verdict}")
            continue
        trace_id, key = ids
        audit = verdict is not None and verdict.audited and key not in seen
        if verdict is not None and verdict.audited and not audit:
            summary.repeated += 1
        if audit:
            seen.add(key)
        summary.rows.append(
            LabelRow(number, trace_id, HUMAN_LABELS[label.strip().lower()], verdict, audit, key)
        )
    return summary


def import_labels(
    rows: Sequence[LabelRow],
    telemetry: Telemetry,
    stats: Stats,
    *,
    meter_provider: Any = None,
    timeout_s: float = 30.0,
) -> bool:
    """Count ``rows`` and emit their events, as ``Monitor.feedback`` would have; whether every
    event was emitted within ``timeout_s``.

    The audit sums of each route and judge are published at 0 and exported first (through
    ``meter_provider``'s ``force_flush``, when it has one), so that a Prometheus ``increase()``
    over the import's series sees every label.
    """
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
    flush = getattr(meter_provider, "force_flush", None)
    if keys and callable(flush):
        flush()
    feedback = Feedback(telemetry, stats, memory=0)
    for row in rows:
        feedback.count(
            row.trace_id,
            0,
            _SAMPLED,
            row.human,
            row.verdict,
            audited=row.audit,
            source=sc.GROUNDWATCH_FEEDBACK_AUDIT_SOURCE if row.audit else "human",
        )
    return feedback.close(timeout_s)


# --- the command -------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "feedback",
        help="bring people's labels back (groundwatch feedback import labels.jsonl)",
        description=(
            "People's labels of answers judged in groundwatch serve or worker, back into "
            "telemetry: the same counters and events as Monitor.feedback, joined by trace id. "
            'Rows of the random audit ("audit": true, as DatasetSink(when="audit") writes '
            "them) enter the hallucination-rate estimate; other rows count as feedback only."
        ),
    )
    sub = p.add_subparsers(dest="feedback_command", metavar="ACTION", required=True)
    imp = sub.add_parser(
        "import",
        help="count the labelled rows of JSONL files",
        description=(
            "Count each labelled row (label: grounded or hallucinated) of the files and emit "
            "its event, over OTLP as OTEL_EXPORTER_OTLP_ENDPOINT says (or to the providers "
            "opentelemetry-instrument set up). A file with a row that cannot be read imports "
            "nothing. Counters are cumulative: import each file once (docs/feedback.md#audits)."
        ),
    )
    imp.add_argument("files", nargs="+", type=Path, metavar="FILE", help="JSON Lines files")
    imp.add_argument(
        "--dry-run",
        action="store_true",
        help="check the files and say what would be counted, without counting anything",
    )
    p.set_defaults(run=run)


def _read_files(paths: Sequence[Path]) -> ImportSummary:
    summary = ImportSummary()
    for path in paths:
        try:
            with path.open(encoding="utf-8") as f:
                before = len(summary.errors)
                read_labels(f, summary)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{path} is not UTF-8 text (JSON Lines expected)") from None
        summary.errors[before:] = [f"{path}: {e}" for e in summary.errors[before:]]
    return summary


def run(args: argparse.Namespace) -> int:
    from opentelemetry import _logs, metrics

    from .long_running import _setup_logging, otlp_providers, telemetry_destination

    name = "groundwatch feedback import"
    summary = _read_files(args.files)
    if summary.errors:
        shown = summary.errors[:MAX_REPORTED]
        more = len(summary.errors) - len(shown)
        detail = "; ".join(shown) + (f"; and {more} more" if more else "")
        raise CommandError(f"nothing imported: {len(summary.errors)} rows cannot be read: {detail}")
    if args.dry_run:
        print(f"{name}: would count {summary.describe()}")
        return 0
    _setup_logging()
    flush = otlp_providers()
    try:
        where = telemetry_destination()
        if "goes nowhere" in where:
            raise UsageError(
                "no telemetry destination: set OTEL_EXPORTER_OTLP_ENDPOINT (the Collector the "
                "app exports to), or run under opentelemetry-instrument; --dry-run only checks"
            )
        stats = Stats(lambda: 0)
        _KEPT.append(stats)
        telemetry = Telemetry(
            tracer_provider=None,
            meter_provider=None,
            logger_provider=None,
            capture_content=False,
            redact=None,
            content_max_chars=1,
            stats=stats,
        )
        done = import_labels(
            summary.rows, telemetry, stats, meter_provider=metrics.get_meter_provider()
        )
        # Through the global providers, whoever set them (the OTLP ones are shut down below).
        for provider in (metrics.get_meter_provider(), _logs.get_logger_provider()):
            force_flush = getattr(provider, "force_flush", None)
            if callable(force_flush):
                force_flush()
    finally:
        flush()
    print(f"{name}: counted {summary.describe()}; {where}")
    return 0 if done else 1


__all__ = ["ImportSummary", "LabelRow", "import_labels", "read_labels"]
