"""``groundwatch feedback import``: people's labels of audited answers, back into telemetry.

Where the verdict was made in ``groundwatch serve`` or ``groundwatch worker``, no app's monitor
remembers it, so ``Monitor.feedback`` cannot say what the judge thought. The rows people label
carry it instead: a ``DatasetSink(when="audit")`` row (or one built from the evaluation spans)
names the trace, the route, the judge, its label and its probability. Each labelled row is
counted as ``Monitor.feedback`` counts it (``groundwatch.feedback``, a ``gen_ai.evaluation.result``
event in the answer's trace) and, when its answer is in the random audit, in the
``groundwatch.audit.*`` sums the hallucination-rate estimate reads.

Which rows are audit labels is decided by the audit's own hash (:func:`groundwatch.rates.
is_audited` of the trace id, or of the record id for an answer without a trace) at the audit
rate the answers were audited at (``--audit-rate``, default ``GROUNDWATCH_AUDIT_RATE``), never
by what a row claims: a row that claims an audit its answer is not in, an audited answer
without the judge's verdict, an ``audit`` that is not ``true`` or ``false``, two labels of one
answer that disagree and malformed ids are named, and a file with any of them imports nothing
(exit 1), so fixing the file and running again never counts a label twice.

Delivery is checked, not assumed (:mod:`.feedback_delivery`): the command exports through OTLP
exporters of its own, reads each export's result, exits 1 naming what was not delivered, and
keeps a journal beside each file (``FILE.imported``) of the labels whose counts and events
were delivered, so that a rerun sends only the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.trace import TraceFlags

from .._shared import config
from .._shared.errors import CommandError, UsageError
from ..rates._audit import is_audited
from ..telemetry import Stats, Telemetry
from ..telemetry import semconv as sc
from ..telemetry._rate_counters import audit_key
from ..types import LABELS
from .feedback import HUMAN_LABELS, Feedback, Verdict
from .feedback_delivery import (
    deliver_otlp,
    deliver_through_providers,
    expect_series,
    journal_all,
    plan,
)
from .long_running import audit_rate as audit_rate_option

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
    """The answer the row labels: its trace id, else its record id (one label per answer)."""
    path: Path | None = None
    """The file the row was read from (its journal lies beside it)."""


@dataclass
class ImportSummary:
    """What an import read and counted."""

    rows: list[LabelRow] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Rows not counted at all, by reason (``unlabelled``: a row nobody labelled yet;
    ``repeated``: the same label of an answer labelled earlier in the import)."""
    errors: list[str] = field(default_factory=list)
    audit_rate: float = 0.0
    """The audit rate the rows' answers were audited at."""
    _first: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)
    """Each answer's label and the line that gave it (duplicates are told apart by it)."""

    @property
    def audit_labels(self) -> int:
        return sum(row.audit for row in self.rows)

    def describe(self) -> str:
        other = len(self.rows) - self.audit_labels
        text = f"{len(self.rows)} labels: {self.audit_labels} audit, {other} other feedback"
        if self.skipped:
            text += "; skipped " + ", ".join(
                f"{n} {why}" for why, n in sorted(self.skipped.items())
            )
        return text


def _ids(row: Mapping[str, Any]) -> tuple[int, str] | str:
    """The row's trace id (``0`` without one) and its answer's key, or what is wrong.

    ``trace_id``, when present, must be 32 hex digits whatever ``id`` says; without it, ``id``
    is the trace id when it has 32 hex digits, else the record id of an answer without a trace.
    """
    trace_text = row.get("trace_id")
    record_id = row.get("id")
    if trace_text is not None and trace_text != "":
        text = trace_text.strip().lower() if isinstance(trace_text, str) else ""
        if not _HEX32.match(text) or not int(text, 16):
            return f"trace_id must be 32 hex digits (not all zero), got {trace_text!r:.40}"
        other = record_id.strip().lower() if isinstance(record_id, str) else ""
        if _HEX32.match(other) and other != text:
            return f"trace_id {text} and id {other} name different answers"
        return int(text, 16), text
    if isinstance(record_id, str) and record_id.strip():
        text = record_id.strip()
        if _HEX32.match(text.lower()) and int(text, 16):
            return int(text, 16), text.lower()
        return 0, text
    if record_id is not None and record_id != "":
        return f"id must be a string, got {record_id!r:.40}"
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
    )


def read_labels(
    lines: Iterable[str],
    summary: ImportSummary | None = None,
    *,
    audit_rate: float | None = None,
    path: Path | None = None,
) -> ImportSummary:
    """Read labelled rows (JSON Lines): every readable row, and each bad line's reason.

    Args:
        lines: the file's lines.
        summary: the summary to add to (the rows of earlier files: one label per answer across
            them); a new one by default.
        audit_rate: the rate the answers were audited at (default: the summary's, 0 for a
            new one): a row is an audit label exactly when its answer is in the audit.
        path: the file the lines come from, kept on each row.
    """
    summary = summary if summary is not None else ImportSummary()
    if audit_rate is not None:
        summary.audit_rate = audit_rate
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        problem = _read_row(line, number, summary, path)
        if problem is not None:
            summary.errors.append(f"line {number}: {problem}")
    return summary


def _read_row(line: str, number: int, summary: ImportSummary, path: Path | None) -> str | None:
    """Add one line's row to ``summary`` (or count it skipped); what is wrong with it, if
    anything."""
    try:
        row = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(row, dict):
        return "not a JSON object"
    label = row.get("label")
    if label is None or label == "":
        summary.skipped["unlabelled"] += 1
        return None
    if not isinstance(label, str) or label.strip().lower() not in HUMAN_LABELS:
        return f"label must be one of {', '.join(sorted(HUMAN_LABELS))}, got {label!r:.40}"
    human = HUMAN_LABELS[label.strip().lower()]
    ids = _ids(row)
    if isinstance(ids, str):
        return ids
    trace_id, key = ids
    claim = row.get("audit")
    if claim is not None and not isinstance(claim, bool):
        return f"audit must be true or false, got {claim!r:.40} (a {type(claim).__name__})"
    verdict = _verdict(row) if "judge_label" in row or claim is True else None
    if isinstance(verdict, str):
        return verdict
    audit = _in_audit(trace_id, key, verdict, summary.audit_rate)
    problem = _audit_problem(claim, audit, verdict, summary.audit_rate)
    if problem is not None:
        return problem
    first = summary._first.get(key)
    if first is not None:
        if first[0] != human:
            return (
                f"the answer {key} is labelled {human} here and {first[0]} on line {first[1]} "
                "(one label per answer: keep the one you mean)"
            )
        summary.skipped["repeated"] += 1
        return None
    summary._first[key] = (human, number)
    summary.rows.append(LabelRow(number, trace_id, human, verdict, audit, key, path))
    return None


def _in_audit(trace_id: int, key: str, verdict: Verdict | None, audit_rate: float) -> bool:
    """Whether the answer is in the random audit, as the app's ``Monitor.audited`` says: the
    same hash of the trace id (of the record id without a trace), and never an ``error``."""
    if not audit_rate or (verdict is not None and verdict.label == "error"):
        return False
    return is_audited(audit_key(trace_id, key), audit_rate)


def _audit_problem(
    claim: bool | None, audit: bool, verdict: Verdict | None, audit_rate: float
) -> str | None:
    """What is wrong with the row's audit claim against the audit's hash, if anything."""
    if claim is True and not audit:
        if not audit_rate:
            return (
                'claims the audit ("audit": true) and no audit rate is given: pass '
                "--audit-rate (the rate the app, serve or worker audited at) or set "
                "GROUNDWATCH_AUDIT_RATE"
            )
        if verdict is not None and verdict.label == "error":
            return 'claims the audit ("audit": true) for a failed evaluation (in no audit)'
        return (
            f'claims the audit ("audit": true) and its answer is not in the audit at rate '
            f"{audit_rate:g}: is --audit-rate the rate its answers were audited at?"
        )
    if claim is False and audit:
        return (
            f'says "audit": false and its answer is in the audit at rate {audit_rate:g}: '
            "drop the field, or check --audit-rate"
        )
    if audit and verdict is None:
        return (
            f"its answer is in the audit at rate {audit_rate:g} and the row carries no "
            "judge_label: an audit label needs the judge's verdict, as the audit file's rows "
            '(DatasetSink(when="audit"), --audit-file) carry it'
        )
    return None


def import_labels(
    rows: Sequence[LabelRow],
    telemetry: Telemetry,
    stats: Stats,
    *,
    meter_provider: Any = None,
    timeout_s: float = 30.0,
) -> bool:
    """Count ``rows`` and emit their events through ``telemetry``'s providers, as
    ``Monitor.feedback`` would have; whether every event was emitted within ``timeout_s``.

    The audit sums of each route and judge are published at 0 and exported first (through
    ``meter_provider``'s ``force_flush``, when it has one), so that a Prometheus ``increase()``
    over the import's series sees every label. The command checks delivery itself
    (:mod:`.feedback_delivery`); this is its path through providers set up by others.
    """
    keys = expect_series(rows, stats)
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
            "nothing. Each export's result is checked: what was not delivered is named (exit "
            "1), and FILE.imported, beside each file, lists what was, so running the same "
            "command again sends only the rest (docs/feedback.md#audits)."
        ),
    )
    imp.add_argument("files", nargs="+", type=Path, metavar="FILE", help="JSON Lines files")
    imp.add_argument(
        "--audit-rate",
        type=audit_rate_option,
        default=None,
        metavar="SHARE",
        help=(
            "the audit rate the answers were audited at (the app's, serve's or the workers'): "
            "a row is an audit label exactly when its answer is in that audit, whatever the "
            f"row claims (0.02 or 2%%; default {config.AUDIT_RATE}, else 0)"
        ),
    )
    imp.add_argument(
        "--dry-run",
        action="store_true",
        help="check the files and say what would be counted, without counting anything",
    )
    p.set_defaults(run=run)


def _read_files(paths: Sequence[Path], audit_rate: float) -> ImportSummary:
    summary = ImportSummary(audit_rate=audit_rate)
    for path in paths:
        try:
            with path.open(encoding="utf-8") as f:
                before = len(summary.errors)
                read_labels(f, summary, path=path)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{path} is not UTF-8 text (JSON Lines expected)") from None
        summary.errors[before:] = [f"{path}: {e}" for e in summary.errors[before:]]
    return summary


def _refuse(errors: Sequence[str], what: str) -> CommandError:
    shown = errors[:MAX_REPORTED]
    more = len(errors) - len(shown)
    detail = "; ".join(shown) + (f"; and {more} more" if more else "")
    return CommandError(f"nothing imported: {len(errors)} {what}: {detail}")


def run(args: argparse.Namespace) -> int:
    from opentelemetry import _logs, metrics, trace

    from .long_running import _setup_logging

    name = "groundwatch feedback import"
    rate = args.audit_rate
    if rate is None:
        rate = config.env_float(config.AUDIT_RATE, config.DEFAULT_AUDIT_RATE, 0.0, 1.0)
    summary = _read_files(args.files, rate)
    if summary.errors:
        raise _refuse(summary.errors, "rows cannot be read")
    todo = plan(summary.rows)
    if todo.conflicts:
        raise _refuse(todo.conflicts, "rows disagree with what was imported before")
    earlier = f"; {todo.delivered} delivered before (left out)" if todo.delivered else ""
    if args.dry_run:
        print(f"{name}: would count {summary.describe()}{earlier}")
        return 0
    _setup_logging()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    providers_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    if not endpoint and not providers_set:
        raise UsageError(
            "no telemetry destination: set OTEL_EXPORTER_OTLP_ENDPOINT (the Collector the "
            "app exports to), or run under opentelemetry-instrument; --dry-run only checks"
        )
    stats = Stats(lambda: 0)
    _KEPT.append(stats)

    def telemetry(meter_provider: Any = None, logger_provider: Any = None) -> Telemetry:
        return Telemetry(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=False,
            redact=None,
            content_max_chars=1,
            stats=stats,
        )

    if not todo.count and not todo.emit:
        print(f"{name}: nothing to send: {summary.describe()}{earlier}")
        return 0
    if endpoint:
        outcome = deliver_otlp(todo, stats, telemetry, _SAMPLED)
        where = f"over OTLP to {endpoint}"
    else:
        # The exporters are another's: their results cannot be read, their flush can.
        outcome = deliver_through_providers(
            todo, stats, telemetry(), _SAMPLED, meter_provider=metrics.get_meter_provider()
        )
        for provider in (metrics.get_meter_provider(), _logs.get_logger_provider()):
            force_flush = getattr(provider, "force_flush", None)
            if callable(force_flush) and force_flush() is False:
                outcome.failures.append("the providers' flush did not finish in time")
        if not outcome.failures:
            journal_all(todo)
        where = "to the OpenTelemetry providers this process set up"
    journals = ", ".join(str(j.path) for j in todo.journals.values()) or "none"
    sent = (
        f"{name}: {summary.describe()}{earlier}; delivered {where}: the counts of "
        f"{outcome.counted} labels, the events of {outcome.emitted} (journal: {journals})"
    )
    for off in outcome.off:
        sent += f"; turned off: {off}"
    print(sent)
    if outcome.failures:
        raise CommandError(
            "not delivered: "
            + "; ".join(outcome.failures)
            + f". Run the same command again once the endpoint takes them: the journal "
            f"({journals}) keeps what was delivered from being sent twice"
        )
    return 0


__all__ = ["ImportSummary", "LabelRow", "import_labels", "read_labels"]
