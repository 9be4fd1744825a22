"""``groundwatch check FILE``: the offline gate for CI.

Scores every answer of a JSONL or CSV file, prints a summary, writes the requested reports and
exits 0 when every threshold is met, 1 when one failed (or the run failed), 2 on bad input or
a bad command line. This module holds the command: its options, the gate and the outputs; the
rows are scored as a stream through the runtime's pipeline in :mod:`.stream`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._shared import config
from .._shared.errors import UsageError
from ..judging import registry
from ..judging.judges import Judge
from ..judging.judges._base import judge_name
from .baseline import BaselineDiff
from .outputs import JsonLinesWriter, JUnitWriter, Sink
from .progress import Progress
from .report import DEFAULT_MAX_CASES_PER_LABEL, HtmlReportWriter
from .rows import Caps, InputFileError, InvalidRow, count_rows, read_rows
from .stream import (
    DEFAULT_CONCURRENCY,
    ROWS_PER_PROCESS,
    check_rows,
    default_concurrency,
    process_count,
)
from .summary import NO_AUDIT_FIX, CheckSummary, Threshold

EXIT_OK = 0
EXIT_THRESHOLD = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


DEFAULT_MAX_FLAG_SHARE = 0.0
"""A gate with no options fails on any answer the judge flags hallucinated: an unchecked default
that passes a 45 % flag share would show a green build over red test cases."""

FORMER_FLAG_SHARE_OPTION = "--max-hallucination-rate"
"""The flag-share gate's former name, still read (with a warning) where CI files have it: it
gated the judge's flag share, which is not the hallucination rate."""


@dataclass(frozen=True)
class GateOptions:
    """The thresholds of the gate; ``None`` means not checked.

    By default any answer the judge flags ``hallucinated`` fails the gate (``max_flag_share=0``);
    a threshold relaxes it.
    """

    min_faithfulness: float | None = None
    min_groundedness: float | None = None
    max_flag_share: float | None = DEFAULT_MAX_FLAG_SHARE
    """Fail when the judge's flag share (answers it labels hallucinated over judged answers)
    is above this; the judge's verdicts, not the hallucination rate."""
    max_errors: int = 0
    allow_truncated: bool = False
    """Pass answers and passages the judge read in part (cut to the caps); by default any
    such row fails the gate."""
    max_regressions: int | None = None
    """With a baseline: rows that passed there and fail now tolerated (``None``: 0)."""
    max_rate_upper_bound: float | None = None
    """Fail when the upper bound of the hallucination rate's 90 % interval (the audited estimate
    of :mod:`groundwatch.rates`, not the judge's flag share) is above this; a file without
    audit labels is refused (exit 2)."""
    labels_are_random: bool = False
    """The labelled rows were chosen at random: their labels enter the rate estimate even
    when neither every row is labelled nor the rows are marked ``audit``."""


def _unit_interval(text: str) -> float:
    """A share: ``0.25`` or ``25%``, as the environment variables read shares."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or a percentage: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {value}")
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for whole numbers of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def add_parser(subparsers: Any) -> None:
    """Register ``check`` on the ``groundwatch`` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="score a golden set (JSONL or CSV) and fail the build on hallucinations",
        description=(
            "Score every answer of FILE (JSONL or CSV with question, contexts, answer, and "
            "optionally label and id) and gate on the results. Exit 0: every threshold met; "
            "1: a threshold failed (by default: any hallucinated answer, any judge error, or a "
            "truncated answer or passage the judge read only in part) or the run failed; "
            "2: bad input or a bad option."
        ),
    )
    p.add_argument("file", type=Path, metavar="FILE", help="a .jsonl or .csv file")
    p.add_argument("--format", choices=("jsonl", "csv"), help="override the format detection")
    judge = p.add_argument_group("judge")
    registry.add_judge_options(judge)
    judge.add_argument(
        "--concurrency",
        type=positive_int,
        metavar="N",
        help="local and semantic judges: worker processes, one core each (at most one per "
        f"{ROWS_PER_PROCESS} rows; 1: in this process; default: the usable cores, at most "
        f"{DEFAULT_CONCURRENCY}); openai and cascade: LLM calls in flight (default "
        f"{DEFAULT_CONCURRENCY})",
    )
    caps = p.add_argument_group(
        "what the judge reads",
        "Longer answers and passages are cut before judging; a row cut so fails the gate "
        "unless --allow-truncated. Raise a cap to read more (slower, more memory).",
    )
    caps.add_argument(
        "--max-answer-chars",
        type=positive_int,
        metavar="N",
        help="characters of each answer read (default: GROUNDWATCH_MAX_ANSWER_CHARS, else "
        f"{config.DEFAULT_MAX_ANSWER_CHARS}; now {Caps().answer_chars})",
    )
    caps.add_argument(
        "--max-context-chars",
        type=positive_int,
        metavar="N",
        help="characters of each passage read (default: GROUNDWATCH_MAX_PASSAGE_CHARS, else "
        f"{config.DEFAULT_MAX_PASSAGE_CHARS}; now {Caps().passage_chars})",
    )
    caps.add_argument(
        "--max-passages",
        type=positive_int,
        metavar="N",
        help="passages of each row read (default: GROUNDWATCH_MAX_PASSAGES, else "
        f"{config.DEFAULT_MAX_PASSAGES}; now {Caps().passages})",
    )
    gate = p.add_argument_group(
        "gate",
        "The run fails when any check fails. Checked always: the judge's flag share (default "
        "0: any answer the judge flags hallucinated fails), judge errors (default 0) and "
        "truncated inputs (none allowed unless --allow-truncated); the mean scores and the "
        "hallucination rate only when given. Shares read 0.25 or 25%%.",
    )
    gate.add_argument(
        "--min-faithfulness",
        type=_unit_interval,
        metavar="X",
        help="fail when the mean faithfulness over scored answers is below X",
    )
    gate.add_argument(
        "--min-groundedness",
        type=_unit_interval,
        metavar="X",
        help="fail when the mean groundedness over scored answers is below X",
    )
    gate.add_argument(
        "--max-flag-share",
        type=_unit_interval,
        default=DEFAULT_MAX_FLAG_SHARE,
        metavar="X",
        help="fail when the judge's flag share (judged answers it labels hallucinated) is "
        "above X; its verdicts, not the hallucination rate (default 0: any flagged answer "
        f"fails; formerly {FORMER_FLAG_SHARE_OPTION}, still read with a warning)",
    )
    gate.add_argument(
        FORMER_FLAG_SHARE_OPTION,
        dest="former_max_flag_share",
        type=_unit_interval,
        metavar="X",
        help=argparse.SUPPRESS,
    )
    gate.add_argument(
        "--max-rate-upper-bound",
        type=_unit_interval,
        metavar="X",
        help="fail when the upper bound of the hallucination rate's 90 %% interval is above "
        "X: the estimate from the human labels of a random audit (rows marked audit, a fully "
        "labelled file, or --labels-are-random); a file without them is refused, exit 2 "
        "(docs/check.md)",
    )
    gate.add_argument(
        "--labels-are-random",
        action="store_true",
        help="the labelled rows were chosen at random from the file: use their labels in the "
        'rate estimate (by default only a fully labelled file or rows marked "audit" are)',
    )
    gate.add_argument(
        "--max-errors",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="judge errors tolerated before the gate fails (default 0)",
    )
    gate.add_argument(
        "--allow-truncated",
        action="store_true",
        help="pass answers and passages cut to the caps above (default: each one fails the "
        "gate, which never passes text the judge did not read)",
    )
    gate.add_argument(
        "--baseline",
        type=Path,
        metavar="PREVIOUS.json",
        help="a previous run's --json output: rows are matched by id and those that newly "
        "fail, newly pass, changed label, were added or removed are listed (summary, HTML, "
        "JUnit)",
    )
    gate.add_argument(
        "--max-regressions",
        type=_non_negative_int,
        metavar="N",
        help="with --baseline: rows that passed in the baseline and fail now tolerated before "
        "the gate fails (default 0)",
    )
    out = p.add_argument_group("outputs")
    out.add_argument("--json", type=Path, metavar="OUT", help="every evaluation, as JSON Lines")
    out.add_argument("--junit", type=Path, metavar="OUT", help="JUnit XML, one case per answer")
    out.add_argument("--html", type=Path, metavar="OUT", help="a self-contained HTML report")
    out.add_argument(
        "--html-limit",
        type=positive_int,
        default=DEFAULT_MAX_CASES_PER_LABEL,
        metavar="N",
        help="answer cards per label in the HTML report "
        f"(default {DEFAULT_MAX_CASES_PER_LABEL}; --json keeps them all)",
    )
    out.add_argument(
        "--worst",
        type=_non_negative_int,
        default=5,
        metavar="N",
        help="worst answers shown in the summary (default 5)",
    )
    out.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="progress on stderr: a bar on a terminal, a line every 30 s otherwise (auto)",
    )
    p.set_defaults(run=run)


def audit_labels_missing(path: Path, fmt: str | None, labels_are_random: bool) -> bool:
    """Whether no row's label could enter the rate estimate, read before any scoring: no row
    is labelled, or some are but none is marked ``audit``, not every row is labelled and they
    are not declared random. (After the run the summary decides again, on the judged rows.)"""
    labelled = audited = rows = 0
    for row in read_rows(path, fmt):
        if isinstance(row, InvalidRow):
            continue
        rows += 1
        if row.expected is not None:
            labelled += 1
            audited += bool(row.audit)
    if labelled == 0:
        return True
    return not (labelled == rows or labels_are_random or audited)


def gate_exit_code(summary: CheckSummary, thresholds: list[Threshold]) -> int:
    """2 when any row was invalid, none was checked, or a threshold could not be checked on
    this input (a rate gate without audit labels); else 1 when a threshold failed; else 0."""
    if summary.invalid or summary.rows == 0 or any(t.refused for t in thresholds):
        return EXIT_BAD_INPUT
    return EXIT_OK if all(t.passed for t in thresholds) else EXIT_THRESHOLD


def run_check(
    path: Path,
    judge: Judge,
    gate: GateOptions,
    *,
    fmt: str | None = None,
    json_out: Path | None = None,
    junit_out: Path | None = None,
    html_out: Path | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    worst: int = 5,
    html_limit: int = DEFAULT_MAX_CASES_PER_LABEL,
    progress: Progress | None = None,
    caps: Caps | None = None,
    rows_hint: int | None = None,
    baseline: Path | None = None,
) -> tuple[int, CheckSummary, list[Threshold]]:
    """Check one file end to end; returns the exit code, the summary and the thresholds.

    ``rows_hint``: the file's row count when known (the progress bar's), which sizes the
    worker processes (:func:`process_count`); counted here otherwise. ``baseline``: a previous
    run's ``--json`` output to compare with (:mod:`.baseline`), gated by
    ``gate.max_regressions``.

    Raises:
        InputFileError: the file cannot be read at all.
        UsageError: an output file cannot be created.
        OSError: an output file cannot be written while the run goes on.
    """
    rows = read_rows(path, fmt)  # raises before any output file is created
    diff = BaselineDiff.read(baseline) if baseline is not None else None  # likewise
    if rows_hint is None and concurrency > 1:
        rows_hint = count_rows(path, fmt)
    summary = CheckSummary(
        source=str(path),
        judge=judge_name(judge),
        worst_kept=worst,
        baseline=diff,
        labels_are_random=gate.labels_are_random,
    )
    sinks: list[Sink] = []
    try:
        if json_out is not None:
            sinks.append(JsonLinesWriter(json_out))
        if junit_out is not None:
            sinks.append(
                JUnitWriter(junit_out, classname=f"groundwatch.check.{path.stem}", baseline=diff)
            )
        if html_out is not None:
            sinks.append(
                HtmlReportWriter(
                    html_out,
                    title=f"groundwatch check: {path.name}",
                    max_cases_per_label=html_limit,
                )
            )
    except OSError as exc:
        _abort(sinks)
        raise UsageError(f"cannot write an output: {exc}") from exc
    started = time.monotonic()
    try:
        asyncio.run(
            check_rows(
                rows,
                judge,
                summary,
                sinks,
                concurrency=concurrency,
                progress=progress,
                caps=caps,
                processes=process_count(concurrency, rows_hint),
            )
        )
    except BaseException:
        _abort(sinks)
        raise
    finally:
        if progress is not None:
            progress.finish(summary.rows + summary.invalid)
    summary.seconds = time.monotonic() - started
    thresholds = summary.thresholds(
        min_faithfulness=gate.min_faithfulness,
        min_groundedness=gate.min_groundedness,
        max_flag_share=gate.max_flag_share,
        max_errors=gate.max_errors,
        allow_truncated=gate.allow_truncated,
        max_regressions=(gate.max_regressions or 0) if diff is not None else None,
        max_rate_upper_bound=gate.max_rate_upper_bound,
    )
    code = gate_exit_code(summary, thresholds)
    try:
        for sink in sinks:
            sink.close(summary, thresholds, code)
    except BaseException:
        _abort(sinks)
        raise
    return code, summary, thresholds


def _abort(sinks: list[Sink]) -> None:
    """Release the outputs of a run that failed (best effort: the first error is the one
    reported, not a second one at exit)."""
    for sink in sinks:
        with contextlib.suppress(Exception):  # already failing: the caller reports the cause
            sink.abort()


def run(args: argparse.Namespace) -> int:
    """Run ``groundwatch check`` from parsed arguments; returns the exit code.

    Raises:
        UsageError: bad input or bad options (the command line reports it in one line and
            exits 2); any other exception is a failure while running (an output that cannot
            be written, a bug: exit 1).
    """
    # Answers (Chinese text) and the summary's icons must not crash a console whose encoding
    # cannot show them (a redirected stream on Windows): replace what cannot be encoded.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
    err = sys.stderr
    command = "groundwatch check"
    if args.max_regressions is not None and args.baseline is None:
        raise UsageError("--max-regressions needs --baseline PREVIOUS.json")
    max_flag_share = args.max_flag_share
    if args.former_max_flag_share is not None:
        print(
            f"{command}: warning: {FORMER_FLAG_SHARE_OPTION} is now --max-flag-share: it gates "
            "the judge's flag share, not the hallucination rate (--max-rate-upper-bound gates "
            "the audited rate)",
            file=err,
        )
        max_flag_share = args.former_max_flag_share
    if args.max_rate_upper_bound is not None:
        try:
            refused = audit_labels_missing(args.file, args.format, args.labels_are_random)
        except InputFileError as exc:
            raise UsageError(str(exc)) from None
        if refused:
            raise UsageError(f"--max-rate-upper-bound: {NO_AUDIT_FIX}")
    judge = registry.judge_from_args(args)
    try:
        total = count_rows(args.file, args.format)
        progress = Progress(err, total if args.progress in ("auto", "bar") else None, args.progress)
        gate = GateOptions(
            min_faithfulness=args.min_faithfulness,
            min_groundedness=args.min_groundedness,
            max_flag_share=max_flag_share,
            max_errors=args.max_errors,
            allow_truncated=args.allow_truncated,
            max_regressions=args.max_regressions,
            max_rate_upper_bound=args.max_rate_upper_bound,
            labels_are_random=args.labels_are_random,
        )
        default = Caps()
        caps = Caps(
            answer_chars=args.max_answer_chars or default.answer_chars,
            passage_chars=args.max_context_chars or default.passage_chars,
            passages=args.max_passages or default.passages,
        )
        code, summary, thresholds = run_check(
            args.file,
            judge,
            gate,
            fmt=args.format,
            json_out=args.json,
            junit_out=args.junit,
            html_out=args.html,
            concurrency=args.concurrency or default_concurrency(judge),
            worst=args.worst,
            html_limit=args.html_limit,
            progress=progress,
            caps=caps,
            rows_hint=total,
            baseline=args.baseline,
        )
    except InputFileError as exc:
        raise UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        print(f"{command}: interrupted; the reports are incomplete", file=err)
        return EXIT_INTERRUPTED
    finally:
        asyncio.run(registry.close(judge))
    print(summary.render(thresholds, code))
    for bad in summary.invalid_rows:
        print(f"{command}: invalid input: {bad}", file=err)
    return code
