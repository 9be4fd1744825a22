"""``groundwatch check FILE``: the offline gate for CI.

Scores every answer of a JSONL or CSV file, prints a summary, writes the requested reports and
exits 0 when every threshold is met, 1 when one failed, 2 on bad input.

The file is streamed: a bounded window of rows is in flight at a time (``--concurrency`` of them
being judged), results are handed to the summary and the report writers in input order, and
nothing per row is kept once written, so memory stays flat however long the file.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import groundwatch

from .._errors import UsageError
from ..judging.evaluate import aevaluate, judge_name
from ..judging.judges import Judge
from ..types import Evaluation
from .input import InputFileError, InvalidRow, Row, count_rows, read_rows
from .outputs import JsonLinesWriter, JUnitWriter, Sink
from .report import DEFAULT_MAX_CASES_PER_LABEL, HtmlReportWriter
from .summary import CheckSummary, Threshold

EXIT_OK = 0
EXIT_THRESHOLD = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

DEFAULT_CONCURRENCY = 4
WINDOW_PER_WORKER = 4
"""Rows read ahead per concurrent evaluation: keeps workers busy while bounding memory."""


DEFAULT_MAX_HALLUCINATION_RATE = 0.0
"""A gate with no options fails on any hallucinated answer: an unchecked default that passes a
45 % hallucination rate would show a green build over red test cases."""


@dataclass(frozen=True)
class GateOptions:
    """The thresholds of the gate; ``None`` means not checked.

    By default any ``hallucinated`` answer fails the gate (``max_hallucination_rate=0``); a
    threshold relaxes it.
    """

    min_faithfulness: float | None = None
    min_groundedness: float | None = None
    max_hallucination_rate: float | None = DEFAULT_MAX_HALLUCINATION_RATE
    max_errors: int = 0


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
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
            "1: a threshold failed (or a judge error); 2: bad input."
        ),
    )
    p.add_argument("file", type=Path, metavar="FILE", help="a .jsonl or .csv file")
    p.add_argument("--format", choices=("jsonl", "csv"), help="override the format detection")
    judge = p.add_argument_group("judge")
    add_judge_options(judge)
    judge.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"answers judged at a time (default {DEFAULT_CONCURRENCY})",
    )
    gate = p.add_argument_group("gate (each checked only when given)")
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
        "--max-hallucination-rate",
        type=_unit_interval,
        default=DEFAULT_MAX_HALLUCINATION_RATE,
        metavar="X",
        help="fail when the share of scored answers labelled hallucinated is above X "
        "(default 0: any hallucinated answer fails)",
    )
    gate.add_argument(
        "--max-errors",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="judge errors tolerated before the gate fails (default 0)",
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


# --- judge --------------------------------------------------------------------------------------


def add_judge_options(group: Any) -> None:
    """``--judge``, ``--model``, ``--base-url`` and ``--api-key-env`` on a parser or argument
    group: the options every command that scores (check, worker, serve) takes, read back by
    :func:`judge_from_args`."""
    group.add_argument(
        "--judge",
        choices=("local", "semantic", "openai", "cascade"),
        default="local",
        help="local (embedded, no network; default), semantic (local plus a small embedding "
        "model for reworded claims; needs groundwatch[semantic]), openai (an OpenAI-compatible "
        "LLM), or cascade (local first, the LLM where the local judge is unsure)",
    )
    group.add_argument("--model", help="the LLM judge's model name")
    group.add_argument(
        "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    group.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )


def judge_from_args(args: argparse.Namespace) -> Judge:
    """The judge the options of :func:`add_judge_options` ask for (see :func:`build_judge`)."""
    return build_judge(
        args.judge, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env
    )


def build_judge(kind: str, *, model: str | None, base_url: str | None, api_key_env: str) -> Judge:
    """The judge asked for on the command line.

    Raises:
        UsageError: the judge is not available in this installation or cannot be built.
    """
    if kind == "local":
        return groundwatch.LocalJudge()
    if kind == "semantic":
        try:
            return groundwatch.SemanticJudge()
        except ImportError as exc:
            raise UsageError(f"--judge semantic: {exc}") from exc
    openai_cls = getattr(groundwatch, "OpenAIJudge", None)
    if openai_cls is None:
        raise UsageError(
            f"--judge {kind} needs groundwatch.OpenAIJudge, which this installation does not "
            "provide; use --judge local"
        )
    if not model:
        raise UsageError(f"--judge {kind} needs --model (the LLM judge's model name)")
    kwargs: dict[str, Any] = {"model": model}
    if base_url:
        kwargs["base_url"] = base_url
    api_key = os.environ.get(api_key_env)
    if api_key:
        kwargs["api_key"] = api_key
    elif not base_url:
        # A local server (vLLM, Ollama) may need no key; the hosted API always does.
        raise UsageError(f"--judge {kind}: the environment variable {api_key_env} is not set")
    try:
        llm: Judge = openai_cls(**kwargs)
        if kind == "openai":
            return llm
        cascade_cls = getattr(groundwatch, "CascadeJudge", None)
        if cascade_cls is None:
            raise UsageError(
                "--judge cascade needs groundwatch.CascadeJudge, which this installation does "
                "not provide; use --judge local or --judge openai"
            )
        cascade: Judge = cascade_cls(first=groundwatch.LocalJudge(), then=llm)
        return cascade
    except UsageError:
        raise
    except Exception as exc:
        # The message never carries the key: it was passed as an argument, not formatted.
        raise UsageError(f"--judge {kind}: cannot build the judge: {type(exc).__name__}") from exc


async def close_judge(judge: Any) -> None:
    """Release the judge's clients and threads (a cascade's inner judges too); best effort."""
    for part in (judge, getattr(judge, "first", None), getattr(judge, "then", None)):
        for name in ("aclose", "close"):
            method = getattr(part, name, None)
            if callable(method):
                try:
                    result = method()
                    if asyncio.iscoroutine(result):
                        await result
                except Exception:  # closing is best effort at the end of a run
                    pass
                break


# --- progress -----------------------------------------------------------------------------------


class Progress:
    """A progress bar on a terminal; on CI logs an occasional line, never a flood."""

    LINE_INTERVAL_S = 30.0
    BAR_INTERVAL_S = 0.1

    def __init__(self, stream: IO[str], total: int | None, mode: str) -> None:
        if mode == "auto":
            mode = "bar" if stream.isatty() else "lines"
        self.stream = stream
        self.total = total
        self.mode = mode
        self.start = time.monotonic()
        self._last = self.start
        self._drawn = False

    def update(self, done: int) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        interval = self.BAR_INTERVAL_S if self.mode == "bar" else self.LINE_INTERVAL_S
        last_row = self.mode == "bar" and done == self.total
        if now - self._last < interval and not last_row:
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        if self.mode == "bar":
            if self.total:
                width = 30
                filled = int(width * min(done, self.total) / self.total)
                bar = "█" * filled + "·" * (width - filled)
                text = f"\r{bar} {done}/{self.total} rows  {rate:.0f} rows/s"
            else:
                text = f"\r{done} rows  {rate:.0f} rows/s"
            self.stream.write(text)
            self._drawn = True
        else:
            of = f"/{self.total}" if self.total else ""
            self.stream.write(f"groundwatch check: {done}{of} rows, {rate:.0f} rows/s\n")
            self._drawn = True
        self.stream.flush()

    def finish(self, done: int | None = None) -> None:
        """Clear the bar; after progress lines, end with one line saying the run is done."""
        if not self._drawn:
            return
        if self.mode == "bar":
            self.stream.write("\r\x1b[K")
        else:
            seconds = time.monotonic() - self.start
            self.stream.write(f"groundwatch check: done, {done} rows in {seconds:.0f} s\n")
        self.stream.flush()


# --- the run ------------------------------------------------------------------------------------


async def _evaluate_row(
    row: Row, judge: Judge, sem: asyncio.Semaphore
) -> tuple[Evaluation | InvalidRow, float]:
    """Score one row once a slot is free; returns the result and the seconds it took."""
    async with sem:
        started = time.monotonic()
        try:
            ev = await aevaluate(row.answer, row.contexts, row.question, judge)
        except TypeError as exc:
            # prepare() rejected the inputs: the row is bad, not the judge.
            return InvalidRow(row.number, "(row)", str(exc), row.id), 0.0
        return ev, time.monotonic() - started


async def check_rows(
    rows: Iterable[Row | InvalidRow],
    judge: Judge,
    summary: CheckSummary,
    sinks: list[Sink],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | None = None,
) -> None:
    """Score ``rows`` with at most ``concurrency`` answers in flight, in a bounded window.

    Results reach ``summary`` and every sink in input order. Only the window (about
    ``concurrency * WINDOW_PER_WORKER`` rows) is held in memory at any time.
    """
    sem = asyncio.Semaphore(concurrency)
    Scored = asyncio.Task[tuple[Evaluation | InvalidRow, float]]
    window: deque[tuple[Row, Scored] | InvalidRow] = deque()
    limit = concurrency * WINDOW_PER_WORKER
    done = 0

    async def emit() -> None:
        nonlocal done
        head = window.popleft()
        if isinstance(head, InvalidRow):
            result: Evaluation | InvalidRow = head
        else:
            row, task = head
            result, seconds = await task
        if isinstance(result, InvalidRow):
            summary.add_invalid(result)
            for sink in sinks:
                sink.add_invalid(result)
        else:
            summary.add(row, result)
            for sink in sinks:
                sink.add(row, result, seconds)
        done += 1
        if progress is not None:
            progress.update(done)

    for item in rows:
        if isinstance(item, InvalidRow):
            window.append(item)
        else:
            window.append((item, asyncio.ensure_future(_evaluate_row(item, judge, sem))))
        while len(window) >= limit:
            await emit()
    while window:
        await emit()


def gate_exit_code(summary: CheckSummary, thresholds: list[Threshold]) -> int:
    """2 when any row was invalid or none was checked; else 1 when a threshold failed; else 0."""
    if summary.invalid or summary.rows == 0:
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
) -> tuple[int, CheckSummary, list[Threshold]]:
    """Check one file end to end; returns the exit code, the summary and the thresholds.

    Raises:
        InputFileError: the file cannot be read at all.
        OSError: an output file cannot be written.
    """
    rows = read_rows(path, fmt)  # raises before any output file is created
    summary = CheckSummary(source=str(path), judge=judge_name(judge), worst_kept=worst)
    sinks: list[Sink] = []
    if json_out is not None:
        sinks.append(JsonLinesWriter(json_out))
    if junit_out is not None:
        sinks.append(JUnitWriter(junit_out, classname=f"groundwatch.check.{path.stem}"))
    if html_out is not None:
        sinks.append(
            HtmlReportWriter(
                html_out, title=f"groundwatch check: {path.name}", max_cases_per_label=html_limit
            )
        )
    started = time.monotonic()
    try:
        asyncio.run(
            check_rows(rows, judge, summary, sinks, concurrency=concurrency, progress=progress)
        )
    finally:
        if progress is not None:
            progress.finish(summary.rows + summary.invalid)
    summary.seconds = time.monotonic() - started
    thresholds = summary.thresholds(
        min_faithfulness=gate.min_faithfulness,
        min_groundedness=gate.min_groundedness,
        max_hallucination_rate=gate.max_hallucination_rate,
        max_errors=gate.max_errors,
    )
    code = gate_exit_code(summary, thresholds)
    for sink in sinks:
        sink.close(summary, thresholds, code)
    return code, summary, thresholds


def run(args: argparse.Namespace) -> int:
    """Run ``groundwatch check`` from parsed arguments; returns the exit code."""
    # Answers (Chinese text) and the summary's icons must not crash a console whose encoding
    # cannot show them (a redirected stream on Windows): replace what cannot be encoded.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
    err = sys.stderr
    try:
        judge = judge_from_args(args)
    except UsageError as exc:
        print(f"groundwatch check: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    total = count_rows(args.file, args.format) if args.progress in ("auto", "bar") else None
    progress = Progress(err, total, args.progress)
    gate = GateOptions(
        min_faithfulness=args.min_faithfulness,
        min_groundedness=args.min_groundedness,
        max_hallucination_rate=args.max_hallucination_rate,
        max_errors=args.max_errors,
    )
    try:
        code, summary, thresholds = run_check(
            args.file,
            judge,
            gate,
            fmt=args.format,
            json_out=args.json,
            junit_out=args.junit,
            html_out=args.html,
            concurrency=args.concurrency,
            worst=args.worst,
            html_limit=args.html_limit,
            progress=progress,
        )
    except InputFileError as exc:
        print(f"groundwatch check: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"groundwatch check: error: cannot write an output: {exc}", file=err)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("groundwatch check: interrupted; the reports are incomplete", file=err)
        return EXIT_INTERRUPTED
    finally:
        asyncio.run(close_judge(judge))
    print(summary.render(thresholds, code))
    for bad in summary.invalid_rows:
        print(f"groundwatch check: invalid input: {bad}", file=err)
    if summary.rows == 0 and not summary.invalid:
        print(f"groundwatch check: error: {args.file} has no rows", file=err)
    return code
