"""Machine-readable outputs of ``groundwatch check``: JSON Lines and JUnit XML, streamed.

Each writer receives the rows as they are scored and keeps nothing per row in memory: JSON
Lines go straight to the output file; JUnit test cases go to a temporary file, and ``close``
writes the root elements (which need the final counts) around them.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol
from xml.sax.saxutils import escape, quoteattr

from ..judging.scoring import counted
from ..types import Evaluation
from .rows import InvalidRow, Row
from .summary import CheckSummary, Threshold, claim_line, failing_claims, is_failure

if TYPE_CHECKING:
    from .baseline import BaselineDiff

_COPY_CHUNK_CHARS = 16_384
"""Cases are copied from the temporary file in chunks this size: memory stays small."""


class Sink(Protocol):
    """Receives every row of a run, in input order, then the final summary."""

    def add(self, row: Row, ev: Evaluation, seconds: float) -> None: ...

    def add_invalid(self, bad: InvalidRow) -> None: ...

    def close(self, summary: CheckSummary, thresholds: list[Threshold], exit_code: int) -> None: ...

    def abort(self) -> None:
        """The run failed: release the files without finishing them (may raise; best effort)."""
        ...


# --- JSON Lines ---------------------------------------------------------------------------------


class JsonLinesWriter:
    """``--json OUT``: one JSON object per line, written as rows are scored.

    Lines have a ``kind``: ``evaluation`` (one per checked row, with the full evaluation),
    ``invalid_row`` (one per bad row), and a last ``summary`` line (aggregates, thresholds, exit
    code). Rows appear in input order.
    """

    def __init__(self, path: Path) -> None:
        self._file: IO[str] = path.open("w", encoding="utf-8")

    def _write(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, ensure_ascii=False))
        self._file.write("\n")

    def add(self, row: Row, ev: Evaluation, seconds: float) -> None:
        self._write(
            {
                "kind": "evaluation",
                "row": row.number,
                "id": row.id,
                "question": row.question,
                # What the judge read (the claims' offsets point into it), and how long the
                # answer was when the judge read part of it.
                "answer": row.answer if row.answer_read is None else row.answer[: row.answer_read],
                **({} if row.answer_read is None else {"answer_chars": len(row.answer)}),
                "expected": row.expected,
                "truncation": list(row.cuts),
                "seconds": round(seconds, 6),
                "evaluation": ev.model_dump(mode="json"),
            }
        )

    def add_invalid(self, bad: InvalidRow) -> None:
        self._write(
            {
                "kind": "invalid_row",
                "row": bad.number,
                "id": bad.id,
                "field": bad.field,
                "error": bad.message,
            }
        )

    def close(self, summary: CheckSummary, thresholds: list[Threshold], exit_code: int) -> None:
        record = {"kind": "summary", **summary.to_dict()}
        record["thresholds"] = [
            {"name": t.name, "passed": t.passed, "text": t.text} for t in thresholds
        ]
        record["exit_code"] = exit_code
        self._write(record)
        self._file.close()

    def abort(self) -> None:
        _close_quietly(self._file)


# --- JUnit XML ----------------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all, even escaped; user text may contain them.
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """Escape ``text`` for XML content, dropping characters XML cannot represent."""
    return escape(_XML_ILLEGAL.sub("\ufffd", text))


def xml_attr(text: str) -> str:
    """Quote and escape ``text`` as an XML attribute value (newlines kept as references)."""
    value = quoteattr(_XML_ILLEGAL.sub("\ufffd", text))
    return value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")


class JUnitWriter:
    """``--junit OUT``: one test case per answer, readable by CI systems.

    A case fails (``<failure>``) exactly when a failed gate threshold blames it
    (:meth:`Threshold.blames`: a hallucinated answer under the flag-share threshold, an
    answer below a failed minimum score); the message lists the unsupported and contradicted
    claims with their evidence; a row the judge read in part fails under the truncated-inputs
    threshold (``type="truncated"``, or a line in the message of a failure it has already), and
    a row that passed in the ``--baseline`` run and fails now under the regressions threshold
    (``type="regression"``, or a line likewise). So
    the file has a failure if and only if the gate failed, and the CI's test view agrees with
    the exit code. Answers that are flagged but within the gate pass, with their claims in
    ``<system-out>``. Judge errors and invalid rows are ``<error>``;
    ``no_claims`` answers are ``<skipped>``. Each gate threshold is one more case.

    Whether a case fails is known only when the run ends, so cases wait in a temporary file, one
    JSON line each (memory stays flat), and are written out in ``close``.
    """

    def __init__(self, path: Path, classname: str, baseline: BaselineDiff | None = None) -> None:
        self._path = path
        self._classname = classname
        self._baseline = baseline
        # Opening the output now surfaces an unwritable path before the run, not after it.
        path.open("w", encoding="utf-8").close()
        # Cases go to a temporary file first: the root element needs the final counts.
        self._cases: IO[str] = tempfile.TemporaryFile(  # noqa: SIM115 (closed in close())
            "w+", encoding="utf-8"
        )
        self.tests = self.failures = self.errors = self.skipped = 0
        self._started = time.strftime("%Y-%m-%dT%H:%M:%S")

    def _case(
        self, name: str, seconds: float, body: str, classname: str | None = None, **row: Any
    ) -> None:
        """Queue one case; ``row`` (label, scores, failure) decides its fate in ``close``."""
        self.tests += 1
        case = {"name": name, "seconds": seconds, "body": body, "classname": classname, **row}
        self._cases.write(json.dumps(case, ensure_ascii=False) + "\n")

    def _write_case(self, out: IO[str], case: dict[str, Any], thresholds: list[Threshold]) -> None:
        body = str(case["body"])
        label = case.get("label") or ""
        cut = case.get("truncation") or ""
        failure: tuple[str, str, str] | None = None  # type, message, detail
        if case.get("failure") and any(
            t.blames(label, case["faithfulness"], case["groundedness"]) for t in thresholds
        ):
            failure = (label, case["failure"], case["detail"])
        # A row the judge read in part fails when the truncation threshold failed (not an error
        # row: that is an <error> already). One <failure> per case: a row failing on both
        # counts keeps its label's type and gets the cut in its message.
        if cut and any(t.blames(label, None, None, truncated=True) for t in thresholds):
            line = f"truncated: the judge read this answer in part: {cut}"
            failure = _joined(failure, label, "truncated", line, cut)
        # A row that passed in the --baseline run and fails now fails under the regressions
        # threshold, the same way.
        before = case.get("regressed")
        if before is not None and any(
            t.blames(label, None, None, regressed=True) for t in thresholds
        ):
            line = f"regression: {label} now, {before} in the baseline, where it passed"
            failure = _joined(failure, label, "regression", line, line)
        if failure is not None:
            self.failures += 1
            kind, message, detail = failure
            body = (
                f"      <failure type={xml_attr(kind)} message={xml_attr(message)}>"
                f"{xml_text(detail)}</failure>\n" + body
            )
        elif case.get("skipped"):
            self.skipped += 1
            body = '      <skipped message="no checkable claims in the answer"/>\n' + body
        classname = case["classname"] or self._classname
        out.write(
            f"    <testcase classname={xml_attr(classname)} "
            f'name={xml_attr(case["name"])} time="{case["seconds"]:.6f}"'
        )
        out.write(f">\n{body}    </testcase>\n" if body else "/>\n")

    def add(self, row: Row, ev: Evaluation, seconds: float) -> None:
        scores = (
            f"faithfulness {ev.faithfulness:.2f}, groundedness {ev.groundedness:.2f}"
            if ev.faithfulness is not None and ev.groundedness is not None
            else "no scores"
        )
        body = failure = detail = ""
        if ev.label == "error":
            self.errors += 1
            body = (
                f"      <error type={xml_attr(ev.error_type or 'internal')} "
                f"message={xml_attr(f'judge failed: {ev.error or ev.explanation}')}/>\n"
            )
        elif is_failure(ev):
            claims = failing_claims(ev)
            counts = ev.verdict_counts
            message = (
                f"{ev.label}: {scores}; {counts['unsupported']} unsupported, "
                f"{counts['contradicted']} contradicted of {counted(len(ev.claims), 'claim')}"
            )
            if ev.label == "insufficient_context":
                message += " (the retrieved context has nothing substantive)"
            # The claims go in the message too (shortened): some CI views show only the message.
            message += "".join(f"\n{claim_line(c, limit=200)}" for c in claims[:5])
            if len(claims) > 5:
                message += f"\n… and {len(claims) - 5} more"
            failure = message
            detail = "\n".join(claim_line(c, limit=2000) for c in claims)
        out = f"label {ev.label}; {scores}; {ev.explanation}"
        if row.expected:
            out += f"; human label {row.expected}"
        if failure:
            out += "".join(f"\n{claim_line(c, limit=2000)}" for c in failing_claims(ev))
        body += f"      <system-out>{xml_text(out)}</system-out>\n"
        self._case(
            row.name,
            seconds,
            body,
            label=ev.label,
            faithfulness=ev.faithfulness,
            groundedness=ev.groundedness,
            failure=failure,
            detail=detail,
            skipped=ev.label == "no_claims",
            truncation="; ".join(row.cuts),
            regressed=(
                None if self._baseline is None else self._baseline.regression(row.id, row.number)
            ),
        )

    def add_invalid(self, bad: InvalidRow) -> None:
        self.errors += 1
        body = f'      <error type="invalid_row" message={xml_attr(str(bad))}/>\n'
        self._case(bad.id or f"row {bad.number}", 0.0, body)

    def close(self, summary: CheckSummary, thresholds: list[Threshold], exit_code: int) -> None:
        for t in thresholds:
            body = (
                ""
                if t.passed
                else f'      <failure type="threshold" message={xml_attr(t.text)}/>\n'
            )
            self.failures += 0 if t.passed else 1
            self._case(f"gate: {t.name}", 0.0, body, classname=f"{self._classname}.gate")
        self._cases.seek(0)
        with tempfile.TemporaryFile("w+", encoding="utf-8") as cases:
            for line in self._cases:
                self._write_case(cases, json.loads(line), thresholds)
            self._write(summary, exit_code, cases)
        self._cases.close()

    def abort(self) -> None:
        _close_quietly(self._cases)

    def _write(self, summary: CheckSummary, exit_code: int, cases: IO[str]) -> None:
        counts = (
            f'tests="{self.tests}" failures="{self.failures}" errors="{self.errors}" '
            f'skipped="{self.skipped}" time="{summary.seconds:.3f}"'
        )
        with self._path.open("w", encoding="utf-8") as out:
            out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
            out.write(f'<testsuites name="groundwatch check" {counts}>\n')
            out.write(
                f"  <testsuite name={xml_attr(summary.source)} {counts} "
                f'timestamp="{self._started}">\n'
            )
            out.write("    <properties>\n")
            rate = summary.rate
            for key, value in (
                ("judge", summary.judge),
                ("exit_code", str(exit_code)),
                ("mean_faithfulness", _num(summary.mean_faithfulness)),
                ("mean_groundedness", _num(summary.mean_groundedness)),
                ("flag_share", _num(summary.flag_share)),
                ("rate_estimate", _num(rate.estimate)),
                ("rate_lower", _num(rate.lower)),
                ("rate_upper", _num(rate.upper)),
                ("rate_method", rate.method),
                ("rate_labels", summary.rate_basis),
            ):
                out.write(f"      <property name={xml_attr(key)} value={xml_attr(value)}/>\n")
            out.write("    </properties>\n")
            cases.seek(0)
            shutil.copyfileobj(cases, out, _COPY_CHUNK_CHARS)
            out.write("  </testsuite>\n</testsuites>\n")


def _close_quietly(file: IO[Any]) -> None:
    """Close ``file``; a write that fails again while flushing (a full disk) is dropped, and
    the file is closed all the same, so nothing complains at exit."""
    try:
        file.close()
    except OSError:
        with contextlib.suppress(OSError):
            file.close()


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def _joined(
    failure: tuple[str, str, str] | None, label: str, kind: str, line: str, detail: str
) -> tuple[str, str, str] | None:
    """One JUnit ``<failure>`` per case: the first reason names its type, later ones add their
    line to its message and detail. An ``error`` row is an ``<error>`` already."""
    if label == "error":
        return failure
    if failure is None:
        return (kind, line, detail)
    return (failure[0], f"{failure[1]}\n{line}", f"{failure[2]}\n{line}")
