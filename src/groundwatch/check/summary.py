"""Running aggregates of a ``groundwatch check`` run, the gate's thresholds, the text summary.

Everything here is O(1) in the number of rows: counters, sums, histogram bins, and a bounded
heap of the worst answers, so a 100,000-row file costs no more memory than a 100-row one.

Definitions (docs/check.md documents them for users):

- *scored* answers are those with scores: labels ``grounded``, ``hallucinated`` and
  ``insufficient_context``. ``no_claims`` (nothing checkable) and ``error`` have no scores.
- mean faithfulness / groundedness: the plain mean over scored answers.
- flag share: answers the judge labels ``hallucinated`` / judged answers (every label but
  ``error``): what the judge says, not the hallucination rate.
- judge errors fail the gate on their own (``max_errors``, default 0): an answer that could not
  be checked is not a pass.
- truncated inputs fail the gate on their own (unless ``allow_truncated``): an answer or passage
  cut to the size caps was judged on a part, and the gate never passes text it did not read.
- hallucination rate: only the estimate from human labels that are a random sample of the file
  (:mod:`groundwatch.rates`, :func:`groundwatch.rates.rate_labels`), over every judged answer;
  without such labels it is unknown, and nothing is reported as the rate.
- balanced accuracy, against human labels: an answer counts as *flagged* when groundwatch
  labels it ``hallucinated`` or ``insufficient_context`` (it is not backed by its context);
  rows whose evaluation failed (``error``) are left out.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..judging.judges.local import LocalJudge
from ..judging.text.lexical import CJK
from ..rates import (
    METHOD_WORDS,
    RateBasis,
    RateEstimate,
    RateTotals,
    describe_estimate,
    estimate_rate,
    labels_needed,
    rate_labels,
)
from ..rates._labels import BASIS_WORDS
from ..rates._sums import usable_probability
from ..types import LABELS, VERDICTS, Claim, Evaluation, Passage
from .rows import InvalidRow, Row

if TYPE_CHECKING:
    from .baseline import BaselineDiff

SCORED_LABELS = frozenset({"grounded", "hallucinated", "insufficient_context"})
FLAGGED_LABELS = frozenset({"hallucinated", "insufficient_context"})
EXPECTED_LABELS = ("faithful", "hallucinated")
HISTOGRAM_BINS = 10
MAX_KEPT_MESSAGES = 20
"""Invalid rows and judge errors kept verbatim for the summary; the rest are only counted."""

RATE_CONFIDENCE = 0.9
"""The coverage of the hallucination rate's interval in the summary and the gate."""

NO_AUDIT_FIX = (
    "the file has no audit labels, so the hallucination rate is unknown and cannot be gated: "
    'label a random sample of rows (column label, and audit true, as DatasetSink(when="audit") '
    "writes them), label every row, or pass --labels-are-random if the labelled rows were "
    "chosen at random (docs/rates.md); --max-flag-share gates the judge's flag share instead"
)
"""What a rate gate says, and how to fix it, on a file without audit labels (exit 2)."""

_CJK = re.compile(f"[{CJK}]")

VERDICT_ICONS = {"supported": "✓", "inferred": "≈", "unsupported": "?", "contradicted": "✗"}


def closest_sentence(
    claim: str, passages: Sequence[str], question: str | None = None
) -> tuple[int, int, int] | None:
    """(passage index, start, end) of the passage sentence the local judge aligns ``claim``
    with best: the sentence its reasons call the closest, so a report and a reason point at
    the same one.

    A pointer for the reader of a failure when the judge gave no evidence; it is not evidence
    (the judge found the claim unsupported there). None when no sentence shares a word. Give
    the row's question, as the judge had it: it weighs the claim's words.
    """
    return _pointer_judge().closest(claim, [Passage(text=t) for t in passages], question)


@functools.cache
def _pointer_judge() -> LocalJudge:
    # One judge for every pointer: building one reads its calibration file.
    return LocalJudge()


def failing_claims(ev: Evaluation) -> list[Claim]:
    """The claims that keep an answer from being grounded: contradicted first, then unsupported."""
    return [c for c in ev.claims if c.verdict == "contradicted"] + [
        c for c in ev.claims if c.verdict == "unsupported"
    ]


def is_failure(ev: Evaluation) -> bool:
    """Whether one answer fails as a test case (JUnit): not backed, or contradicting."""
    if ev.label in ("hallucinated", "insufficient_context"):
        return True
    return any(c.verdict == "contradicted" for c in ev.claims)


def claim_line(claim: Claim, limit: int = 160) -> str:
    """``✗ contradicted "text" — passage 2: "quote"`` on one line, cut to readable lengths."""
    line = f'{VERDICT_ICONS[claim.verdict]} {claim.verdict}: "{_cut(claim.text, limit)}"'
    if claim.evidence:
        ev = claim.evidence[0]
        line += f' ({ev.name}: "{_cut(ev.quote, limit)}")'
    elif claim.reason:
        line += f" ({_cut(claim.reason, limit)})"
    return line


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bin(value: float) -> int:
    return min(HISTOGRAM_BINS - 1, max(0, int(value * HISTOGRAM_BINS)))


@dataclass(frozen=True)
class WorstCase:
    """What the summary keeps of one of the worst answers (a bounded, trimmed copy)."""

    name: str
    number: int
    label: str
    faithfulness: float
    groundedness: float
    claims: tuple[str, ...]


@dataclass(frozen=True)
class Threshold:
    """One gate condition and whether the run met it.

    ``metric`` and ``limit`` say which answers a failed threshold blames (:meth:`blames`): the
    JUnit file marks exactly those answers failed, so it shows red tests only on a red build.
    """

    name: str
    passed: bool
    text: str
    metric: str = ""
    limit: float | None = None
    refused: bool = False
    """The condition cannot be checked on this input (a rate gate without audit labels): the
    run is bad input (exit 2), never a pass."""

    def blames(
        self,
        label: str,
        faithfulness: float | None,
        groundedness: float | None,
        truncated: bool = False,
        regressed: bool = False,
    ) -> bool:
        """Whether an answer with these results is one this failed threshold fails on
        (``regressed``: it passed in the ``--baseline`` run and fails now)."""
        if self.passed or self.refused or self.limit is None:
            return False  # a refused condition blames no answer: the input is at fault
        if self.metric == "truncated":
            return truncated
        if self.metric == "regressions":
            return regressed
        if self.metric in ("flag_share", "rate_upper_bound"):
            return label == "hallucinated"
        score = {"faithfulness": faithfulness, "groundedness": groundedness}.get(self.metric)
        return score is not None and score < self.limit - 1e-12


@dataclass
class CheckSummary:
    """Running aggregates over the rows of one run."""

    source: str = ""
    judge: str = ""
    worst_kept: int = 5
    rows: int = 0
    invalid: int = 0
    invalid_rows: list[InvalidRow] = field(default_factory=list)
    labels: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    sum_faithfulness: float = 0.0
    sum_groundedness: float = 0.0
    histogram_faithfulness: list[int] = field(default_factory=lambda: [0] * HISTOGRAM_BINS)
    histogram_groundedness: list[int] = field(default_factory=lambda: [0] * HISTOGRAM_BINS)
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    evidence_rejected: int = 0
    truncated: int = 0
    """Rows the judge did not read in full (an answer or passage cut to the caps)."""
    truncated_rows: list[str] = field(default_factory=list)
    """What was cut, ``name (row N): phrases``, for the first rows (the rest are counted)."""
    seconds: float = 0.0
    baseline: BaselineDiff | None = None
    """The comparison with a previous run (``--baseline``), fed as rows arrive."""
    labels_are_random: bool = False
    """``--labels-are-random``: the labelled rows were chosen at random, whether marked
    ``audit`` or not, so every label enters the rate estimate."""
    rate_judge: str = ""
    """The judge's name as its evaluations give it (``Evaluation.judge``): whose measured
    error rates correct the flag share when no label may."""
    rate_totals: RateTotals = field(default_factory=RateTotals)
    """The rate's sums over every judged row, every human label counted."""
    audit_totals: RateTotals = field(default_factory=RateTotals)
    """The same, with only the labels of rows marked ``audit`` counted."""
    chinese: int = 0
    """Judged rows whose answer is in Chinese (CJK characters): whose error rates apply."""
    _worst: list[tuple[tuple[float, float, int], WorstCase]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    # --- updating ---------------------------------------------------------------------------

    def add(self, row: Row, ev: Evaluation) -> None:
        self.rows += 1
        if self.baseline is not None:
            self.baseline.add(row, ev, ev.label == "error" or is_failure(ev))
        self.labels[ev.label] += 1
        self.verdicts.update(c.verdict for c in ev.claims)
        self.evidence_rejected += ev.evidence_rejected
        if row.cuts:
            self.truncated += 1
            if len(self.truncated_rows) < MAX_KEPT_MESSAGES:
                self.truncated_rows.append(f"{row.where}: {'; '.join(row.cuts)}")
        if row.expected is not None:
            self.confusion[(row.expected, ev.label)] += 1
        if ev.label == "error" and len(self.errors) < MAX_KEPT_MESSAGES:
            self.errors.append(f"{row.name}: {ev.error or 'judge error'}")
        if ev.label != "error":
            self._add_rate(row, ev)
        if ev.faithfulness is None or ev.groundedness is None:
            return
        self.sum_faithfulness += ev.faithfulness
        self.sum_groundedness += ev.groundedness
        self.histogram_faithfulness[_bin(ev.faithfulness)] += 1
        self.histogram_groundedness[_bin(ev.groundedness)] += 1
        failing = failing_claims(ev)
        if failing and self.worst_kept > 0:
            # Max-heap by badness through negated keys: the root is the least bad kept case,
            # the one to evict when a worse answer arrives. Ties keep the earlier row.
            case = WorstCase(
                row.name,
                row.number,
                ev.label,
                ev.faithfulness,
                ev.groundedness,
                tuple(claim_line(c) for c in failing[:5]),
            )
            entry = ((-ev.faithfulness, -ev.groundedness, -next(self._seq)), case)
            if len(self._worst) < self.worst_kept:
                heapq.heappush(self._worst, entry)
            elif entry[0] > self._worst[0][0]:
                heapq.heapreplace(self._worst, entry)

    def _add_rate(self, row: Row, ev: Evaluation) -> None:
        if not self.rate_judge and ev.judge:
            self.rate_judge = ev.judge
        self.chinese += bool(_CJK.search(row.answer))
        # A custom judge's stray value is unknown: the flag stands in (the one rule, in rates).
        probability = usable_probability(ev.hallucination_probability)
        label = None if row.expected is None else row.expected == "hallucinated"
        flagged = ev.is_hallucinated
        self.rate_totals = self.rate_totals.add(flagged, probability, label)
        self.audit_totals = self.audit_totals.add(
            flagged, probability, label if row.audit else None
        )

    def add_invalid(self, bad: InvalidRow) -> None:
        self.invalid += 1
        if self.baseline is not None:
            self.baseline.add_invalid(bad)
        if len(self.invalid_rows) < MAX_KEPT_MESSAGES:
            self.invalid_rows.append(bad)

    # --- derived figures --------------------------------------------------------------------

    @property
    def scored(self) -> int:
        return sum(self.labels[label] for label in SCORED_LABELS)

    @property
    def mean_faithfulness(self) -> float | None:
        return self.sum_faithfulness / self.scored if self.scored else None

    @property
    def mean_groundedness(self) -> float | None:
        return self.sum_groundedness / self.scored if self.scored else None

    @property
    def judged(self) -> int:
        """Answers the judge gave a verdict on (every label but ``error``)."""
        return self.rows - self.labels["error"]

    @property
    def flag_share(self) -> float | None:
        """The share of judged answers the judge labels ``hallucinated``: its verdicts, not
        the hallucination rate (``None`` when nothing was judged)."""
        return self.labels["hallucinated"] / self.judged if self.judged else None

    @property
    def labelled(self) -> int:
        return sum(self.confusion.values())

    @property
    def balanced_accuracy(self) -> float | None:
        """Mean of the recall on each human class; ``None`` unless both classes occur."""
        recalls = []
        for expected, hit in (("hallucinated", True), ("faithful", False)):
            total = sum(
                n for (e, label), n in self.confusion.items() if e == expected and label != "error"
            )
            if total == 0:
                return None
            right = sum(
                n
                for (e, label), n in self.confusion.items()
                if e == expected and label != "error" and (label in FLAGGED_LABELS) == hit
            )
            recalls.append(right / total)
        return sum(recalls) / len(recalls)

    @property
    def rate_basis(self) -> RateBasis:
        """Which human labels the rate estimate uses (:func:`groundwatch.rates.rate_labels`):
        a census, labels declared random, the rows marked ``audit``; else none."""
        basis, _ = rate_labels(
            self.rate_totals, self.audit_totals, labels_are_random=self.labels_are_random
        )
        return basis

    @property
    def rate(self) -> RateEstimate:
        """The hallucination rate of the answers, with its interval (:mod:`groundwatch.rates`),
        from the labels :attr:`rate_basis` allows; without them ``no_audit``: unknown."""
        _, totals = rate_labels(
            self.rate_totals, self.audit_totals, labels_are_random=self.labels_are_random
        )
        return estimate_rate(
            totals,
            judge=self.rate_judge or None,
            language="zh" if 2 * self.chinese > totals.scored else "en",
            confidence=RATE_CONFIDENCE,
        )

    def rate_lines(self) -> list[str]:
        """The rate in words: the estimate, its interval, how many labels and which method, the
        flag share; or that the rate is unknown until an audit and what an audit gives; then
        which labels were used."""
        r = self.rate
        lines = [describe_estimate(r)]
        if not r.known:
            lines.append(f"  {labels_needed()}")
        basis = self.rate_basis
        everything = self.rate_totals.labelled
        lines.append(f"  labels used: {BASIS_WORDS[basis]}")
        if basis == "audit" and everything > r.labelled:
            lines.append(
                f'  {everything - r.labelled:,} labelled rows not marked "audit" are left '
                "out of the estimate (pass --labels-are-random if they were chosen at random)"
            )
        return lines

    @property
    def worst(self) -> list[WorstCase]:
        """The kept worst answers, worst first."""
        return [case for _, case in sorted(self._worst, reverse=True)]

    # --- the gate ---------------------------------------------------------------------------

    def thresholds(
        self,
        *,
        min_faithfulness: float | None = None,
        min_groundedness: float | None = None,
        max_flag_share: float | None = None,
        max_errors: int = 0,
        allow_truncated: bool = False,
        max_regressions: int | None = None,
        max_rate_upper_bound: float | None = None,
    ) -> list[Threshold]:
        """Evaluate every gate condition that was asked for (judge errors and truncated inputs
        always are; regressions when there is a baseline)."""
        out: list[Threshold] = []
        if self.baseline is not None:
            self.baseline.finish()
        for metric, value, limit in (
            ("faithfulness", self.mean_faithfulness, min_faithfulness),
            ("groundedness", self.mean_groundedness, min_groundedness),
        ):
            if limit is None:
                continue
            name = f"mean {metric}"
            if value is None:
                text = f"{name}: no scored answer to check >= {limit}"
                out.append(Threshold(name, False, text, metric, limit))
            else:
                ok = value >= limit - 1e-12
                text = f"{name} {value:.3f} {'>=' if ok else '<'} {limit}"
                out.append(Threshold(name, ok, text, metric, limit))
        if max_flag_share is not None:
            share = self.flag_share
            name, metric = "flag share", "flag_share"
            if share is None:
                text = f"{name}: no judged answer to check"
                out.append(Threshold(name, False, text, metric, max_flag_share))
            else:
                ok = share <= max_flag_share + 1e-12
                text = (
                    f"{name} {share:.1%} {'<=' if ok else '>'} {max_flag_share:.1%} "
                    f"({self.labels['hallucinated']} of {_answers(self.judged)})"
                )
                out.append(Threshold(name, ok, text, metric, max_flag_share))
        if max_rate_upper_bound is not None:
            out.append(self._rate_threshold(max_rate_upper_bound))
        errors = self.labels["error"]
        ok = errors <= max_errors
        out.append(
            Threshold(
                "judge errors",
                ok,
                f"judge errors {errors} {'<=' if ok else '>'} {max_errors} allowed",
            )
        )
        name, cut = "truncated inputs", self.truncated
        if allow_truncated:
            text = f"{name} {cut} (allowed by --allow-truncated)"
        elif cut:
            text = (
                f"{name} {cut} > 0 allowed (the judge read them in part: raise "
                "--max-answer-chars, --max-context-chars or --max-passages, or pass "
                "--allow-truncated)"
            )
        else:
            text = f"{name} 0"
        out.append(Threshold(name, allow_truncated or not cut, text, "truncated", 0.0))
        if self.baseline is not None and max_regressions is not None:
            n = self.baseline.regressions
            ok = n <= max_regressions
            text = (
                f"regressions {n} {'<=' if ok else '>'} {max_regressions} allowed (rows that "
                f"passed in {self.baseline.path} and fail now)"
            )
            out.append(Threshold("regressions", ok, text, "regressions", float(max_regressions)))
        return out

    def _rate_threshold(self, limit: float) -> Threshold:
        name, metric = "hallucination rate upper bound", "rate_upper_bound"
        r = self.rate
        if r.scored == 0:
            text = f"{name}: no judged answer to check"
            return Threshold(name, False, text, metric, limit)
        if r.upper is None or r.lower is None:
            return Threshold(name, False, f"{name}: {NO_AUDIT_FIX}", metric, limit, refused=True)
        ok = r.upper <= limit + 1e-12
        text = (
            f"{name} {_pct(r.upper)} % {'<=' if ok else '>'} {_pct(limit)} % "
            f"({100 * r.confidence:.0f} % interval {_pct(r.lower)}–{_pct(r.upper)} %, "
            f"{METHOD_WORDS[r.method].split(':')[0]})"
        )
        return Threshold(name, ok, text, metric, limit)

    # --- output -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "judge": self.judge,
            "rows": self.rows,
            "invalid_rows": self.invalid,
            "labels": {label: self.labels[label] for label in LABELS},
            "scored": self.scored,
            "mean_faithfulness": self.mean_faithfulness,
            "mean_groundedness": self.mean_groundedness,
            "flag_share": self.flag_share,
            "rate": self.rate.as_dict(),
            "rate_labels": self.rate_basis,
            "claims": {v: self.verdicts[v] for v in VERDICTS},
            "evidence_rejected": self.evidence_rejected,
            "truncated": self.truncated,
            "histogram": {
                "faithfulness": list(self.histogram_faithfulness),
                "groundedness": list(self.histogram_groundedness),
            },
            "confusion": {
                e: {label: self.confusion[(e, label)] for label in LABELS} for e in EXPECTED_LABELS
            }
            if self.labelled
            else None,
            "balanced_accuracy": self.balanced_accuracy,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "seconds": round(self.seconds, 3),
        }

    def _one_class(self) -> str:
        """Why there is no balanced accuracy: the human label class that has no scored row."""
        missing = [
            _HUMAN_ROWS[e]
            for e in EXPECTED_LABELS
            if not any(n for (x, label), n in self.confusion.items() if x == e and label != "error")
        ]
        return f"needs rows of both human labels; none labelled {' or '.join(missing)}"

    def render(self, thresholds: list[Threshold], exit_code: int) -> str:
        """The human-readable summary printed at the end of a run."""
        lines = [
            f"groundwatch check: {self.source} (judge: {self.judge})",
            f"rows checked {self.rows} · invalid {self.invalid} · {self.seconds:.1f} s",
        ]
        if self.rows == 0:
            # Nothing was judged: tables of zeros and a gate over nothing would only hide the
            # reason, which is the invalid rows.
            lines += ["", f"no row could be checked: every row is invalid ({self.invalid})"]
            lines += [f"  {bad}" for bad in self.invalid_rows]
            if self.invalid > len(self.invalid_rows):
                lines.append(f"  … and {self.invalid - len(self.invalid_rows)} more")
            lines.append(f"result: FAIL (bad input), exit {exit_code}")
            return "\n".join(lines)
        lines += ["", f"{'label':<22}{'count':>7}{'share':>9}"]
        for label in LABELS:
            n = self.labels[label]
            share = f"{n / self.rows:.1%}" if self.rows else "-"
            lines.append(f"{label:<22}{n:>7}{share:>9}")
        lines.append("")

        def fmt(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        lines.append(f"mean faithfulness   {fmt(self.mean_faithfulness)}")
        lines.append(f"mean groundedness   {fmt(self.mean_groundedness)}")
        lines += self.rate_lines()
        lines.append(
            "claims              "
            + " · ".join(f"{self.verdicts[v]} {v}" for v in VERDICTS)
            + (f" · {self.evidence_rejected} evidence rejected" if self.evidence_rejected else "")
        )
        if self.labelled:
            rows = "row" if self.labelled == 1 else "rows"
            lines += ["", f"human label vs groundwatch label ({self.labelled} labelled {rows})"]
            lines.append(" " * 19 + "".join(f"{label:>{len(label) + 2}}" for label in LABELS))
            for e in EXPECTED_LABELS:
                cells = "".join(
                    f"{self.confusion[(e, label)]:>{len(label) + 2}}" for label in LABELS
                )
                # Each human label under the names a file may give it (grounded is faithful).
                lines.append(f"{_HUMAN_ROWS[e]:<19}{cells}")
            ba = self.balanced_accuracy
            lines.append(
                "balanced accuracy "
                + (f"{ba:.3f}" if ba is not None else f"- ({self._one_class()})")
                + "  (flagged = hallucinated or insufficient_context)"
            )
        if self.baseline is not None:
            b = self.baseline
            lines += [
                "",
                f"against the baseline {b.path} ({len(b.before)} rows there, {b.compared} "
                "matched by id)",
                f"  {b.headline()}",
            ]
            lines += list(b.lines())
        worst = self.worst
        if worst:
            lines += ["", "worst answers"]
            for i, case in enumerate(worst, start=1):
                lines.append(
                    f"{i:>3}. {case.name} (row {case.number}) {case.label}  "
                    f"faithfulness {case.faithfulness:.2f}  groundedness {case.groundedness:.2f}"
                )
                lines += [f"       {c}" for c in case.claims]
        if self.errors:
            lines += ["", f"judge errors ({self.labels['error']})"]
            lines += [f"  {e}" for e in self.errors]
        if self.truncated:
            lines += ["", f"truncated inputs ({self.truncated}): the judge read these in part"]
            lines += [f"  {cut}" for cut in self.truncated_rows]
            if self.truncated > len(self.truncated_rows):
                lines.append(f"  … and {self.truncated - len(self.truncated_rows)} more")
        if self.invalid:
            lines += ["", f"invalid rows ({self.invalid})"]
            lines += [f"  {bad}" for bad in self.invalid_rows]
            if self.invalid > len(self.invalid_rows):
                lines.append(f"  … and {self.invalid - len(self.invalid_rows)} more")
        lines += ["", "gate"]
        lines += [
            f"  {'PASS' if t.passed else 'REFUSED' if t.refused else 'FAIL'}  {t.text}"
            for t in thresholds
        ]
        if self.invalid:
            # Bad input fails the run whatever the thresholds say: said where they are.
            lines.append(f"  FAIL  invalid rows {self.invalid} > 0 allowed (bad input: exit 2)")
        verdict = {0: "PASS", 1: "FAIL (a threshold failed)", 2: "FAIL (bad input)"}[exit_code]
        lines.append(f"result: {verdict}, exit {exit_code}")
        return "\n".join(lines)


def _pct(share: float) -> str:
    """A share as a percentage with one decimal, without the sign (``0.078`` -> ``7.8``)."""
    return f"{100 * share:.1f}"


_HUMAN_ROWS = {"faithful": "faithful/grounded", "hallucinated": "hallucinated"}
"""The human-label table's row names: the input's ``grounded`` is counted as ``faithful``."""


def _answers(n: int) -> str:
    return f"{n} judged answer{'' if n == 1 else 's'}"
