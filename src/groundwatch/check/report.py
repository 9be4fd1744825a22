"""The HTML report of ``groundwatch check``: one self-contained file that works offline.

Layout: the run's summary and a score-distribution chart (inline SVG) at the top, label filters,
then one card per answer, worst first (the cards themselves: :mod:`.answer_cards`).

Design choices:

- Self-contained: inline CSS and JS, no fonts, images or scripts from anywhere else. A
  Content-Security-Policy pins the one inline script by its hash, so even a report built from
  hostile text could not run anything else (and all user text is HTML-escaped as well).
- Verdict colours from the Okabe-Ito palette (safe for the common colour-vision deficiencies),
  and never colour alone: each verdict also has its own underline style (solid, dashed, dotted,
  wavy), an icon and a text tag.
- Streamed like the other outputs: answer cards go to a temporary file while the run goes on;
  ``close`` writes the summary (known only at the end) and then copies the cards after it,
  worst first (only each card's sort key and place in the file stay in memory, and the cards
  per label are capped).
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
import time
from array import array
from collections import Counter
from pathlib import Path
from typing import IO

from ..rates import METHOD_WORDS, labels_needed
from ..rates._labels import BASIS_WORDS
from ..types import LABELS, VERDICTS, Evaluation
from .answer_cards import case_order, escape, render_case, render_invalid, score_text
from .baseline import KINDS as BASELINE_KINDS
from .baseline import TITLES as BASELINE_TITLES
from .baseline import BaselineDiff
from .rows import InvalidRow, Row
from .summary import (
    EXPECTED_LABELS,
    HISTOGRAM_BINS,
    VERDICT_ICONS,
    CheckSummary,
    Threshold,
)

DEFAULT_MAX_CASES_PER_LABEL = 2_000
"""Answer cards per label in one report: a browser cannot show 100,000; failures are not
crowded out by grounded answers because each label has its own allowance."""


_CSS = """
:root {
  --supported: #0072B2; --inferred: #009E73; --unsupported: #E69F00; --contradicted: #D55E00;
  --grey: #6b6b6b; --ink: #1d1d1f; --muted: #5a5a5f; --line: #d9d9de; --paper: #fafafa;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue",
    Arial, "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB",
    "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif;
  color: var(--ink); background: var(--paper); line-height: 1.5;
}
:lang(zh) {
  font-family: "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB",
    "Microsoft YaHei", "WenQuanYi Micro Hei", system-ui, sans-serif;
}
body { margin: 0 auto; max-width: 1100px; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 .2rem; } h2 { font-size: 1.1rem; margin: 1.2rem 0 .5rem; }
.meta { color: var(--muted); margin: 0 0 1rem; }
[hidden] { display: none !important; }
.cards { display: flex; flex-wrap: wrap; gap: .75rem; margin-bottom: 1rem; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: .6rem .9rem;
  min-width: 8.5rem; }
.card .n { font-size: 1.5rem; font-weight: 650; }
.card .k { color: var(--muted); font-size: .85rem; }
.gate-pass { border-left: 6px solid var(--supported); }
.gate-fail { border-left: 6px solid var(--contradicted); }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 1rem; }
table { border-collapse: collapse; font-size: .9rem; background: #fff; }
th, td { border: 1px solid var(--line); padding: .25rem .55rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.thresholds { list-style: none; padding: 0; margin: 0; }
.thresholds li { margin: .2rem 0; }
.pass::before { content: "✓ PASS "; color: var(--supported); font-weight: 700; }
li.fail::before, tr.fail > td:first-child::before {
  content: "✗ FAIL "; color: var(--contradicted); font-weight: 700; }
svg text { font-size: 11px; fill: var(--ink); }
.filters { position: sticky; top: 0; background: var(--paper); padding: .6rem 0; z-index: 2;
  border-bottom: 1px solid var(--line); display: flex; flex-wrap: wrap; gap: .4rem;
  align-items: center; }
.filters button { font: inherit; border: 1px solid var(--line); background: #fff;
  border-radius: 999px; padding: .2rem .75rem; cursor: pointer; }
.filters button[aria-pressed="true"] { background: var(--ink); color: #fff;
  border-color: var(--ink); }
.legend { display: flex; flex-wrap: wrap; gap: .9rem; margin: .6rem 0; font-size: .9rem; }
article.case { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: .8rem 1rem; margin: .8rem 0; }
article.case > header { display: flex; flex-wrap: wrap; gap: .6rem; align-items: baseline; }
.name { font-weight: 650; } .rowno, .scores { color: var(--muted); font-size: .9rem; }
.badge { border-radius: 4px; padding: 0 .45rem; font-size: .85rem; font-weight: 600;
  border: 1.5px solid currentColor; }
.badge.grounded { color: var(--supported); } .badge.hallucinated { color: var(--contradicted); }
.badge.insufficient_context { color: #a86f00; }
.badge.no_claims, .badge.error, .badge.invalid { color: var(--grey); }
.badge.truncated { color: var(--contradicted); border: 1px dashed currentColor; }
.cut-mark { color: var(--muted); font-style: italic; }
.badge.expected { color: var(--muted); font-weight: 400; }
.mismatch { color: var(--contradicted); font-size: .85rem; }
.question { color: var(--muted); margin: .4rem 0; }
.answer { font-size: 1.05rem; margin: .5rem 0; white-space: pre-wrap; }
mark.claim { color: inherit; padding: 0 1px; border-radius: 2px; text-decoration-line: underline;
  text-decoration-thickness: 2px; text-underline-offset: 3px; }
mark.claim sup { font-size: .7em; font-weight: 700; margin-left: 1px; }
.v-supported { --v: var(--supported); } .v-inferred { --v: var(--inferred); }
.v-unsupported { --v: var(--unsupported); } .v-contradicted { --v: var(--contradicted); }
mark.claim { text-decoration-color: var(--v); }
mark.claim sup, .tag { color: var(--v); }
mark.v-supported { background: rgba(0, 114, 178, .10); text-decoration-style: solid; }
mark.v-inferred { background: rgba(0, 158, 115, .12); text-decoration-style: dashed; }
mark.v-unsupported { background: rgba(230, 159, 0, .20); text-decoration-style: dotted; }
mark.v-contradicted { background: rgba(213, 94, 0, .16); text-decoration-style: wavy; }
mark.v-unsupported sup { color: #9a6a00; }
.claims { margin: .4rem 0 0; padding-left: 1.4rem; }
.claims li { margin: .35rem 0; }
.tag { font-weight: 700; font-size: .85rem; white-space: nowrap; }
.v-unsupported .tag { color: #9a6a00; }
.reason, .unlocated { color: var(--muted); font-size: .88rem; }
.evidence { margin: .2rem 0 0 .2rem; font-size: .92rem; }
.quote { border-left: 3px solid var(--v); padding-left: .5rem; }
.passage { white-space: pre-wrap; background: var(--paper); border: 1px solid var(--line);
  border-radius: 4px; padding: .4rem .6rem; margin: .3rem 0; font-size: .88rem; }
.passage mark { background: #fde9a8; outline: 1px solid #c9a227; }
.closest { margin: .2rem 0 0 .2rem; font-size: .92rem; color: var(--muted); }
.closest .quote { color: var(--ink); }
details.retrieved { margin-top: .5rem; font-size: .92rem; }
details.retrieved li { white-space: pre-wrap; margin: .3rem 0; }
.card .why { font-size: .8rem; margin-top: .2rem; }
details > summary { cursor: pointer; color: var(--supported); font-size: .88rem; }
.invalid-msg { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
@media print { .filters { display: none; } }
"""

# The one script of the report. Its hash goes into the Content-Security-Policy, so it must be
# written to the page byte for byte as it is here.
_JS = """
(function () {
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button[data-filter]"));
  var mismatch = document.getElementById("only-mismatch");
  var cases = Array.prototype.slice.call(document.querySelectorAll("article.case"));
  var current = "all";
  function apply() {
    var shown = 0;
    cases.forEach(function (c) {
      var ok = (current === "all" || c.getAttribute("data-label") === current) &&
        (!mismatch || !mismatch.checked || c.getAttribute("data-mismatch") === "true");
      c.hidden = !ok;
      if (ok) { shown += 1; }
    });
    buttons.forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-filter") === current));
    });
    document.getElementById("shown").textContent = String(shown);
  }
  buttons.forEach(function (b) {
    b.addEventListener("click", function () { current = b.getAttribute("data-filter"); apply(); });
  });
  if (mismatch) { mismatch.addEventListener("change", apply); }
  apply();
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def _rate_card(s: CheckSummary, state: str) -> tuple[str, str, str, str]:
    """The hallucination rate's card: the audited estimate, its interval, how it was obtained
    and which labels it used; without audit labels, that the rate is unknown."""
    r = s.rate
    used = f"labels used: {BASIS_WORDS[s.rate_basis]}"
    # "rate" marks the card for readers of the page (and its browser test).
    cls = f"rate {state}".strip()
    if r.estimate is None or r.lower is None or r.upper is None:
        return (
            cls,
            "unknown",
            "hallucination rate (until an audit)",
            f"{labels_needed()}; {used}",
        )
    return (
        cls,
        f"{r.estimate:.1%}",
        f"hallucination rate ({r.confidence:.0%} interval {r.lower:.1%}–{r.upper:.1%})",
        f"{r.labelled} audit labels of {r.scored} judged answers; "
        f"{METHOD_WORDS[r.method].split(':')[0]}; {used}",
    )


def histogram_svg(title: str, bins: list[int]) -> str:
    """A bar chart of score counts in ``HISTOGRAM_BINS`` bins over [0, 1], as inline SVG."""
    # The title sits above ``top`` and each bar's count just above the bar, so the tallest
    # bar's count needs ``top`` clear of the title's baseline (14) plus one label height.
    width, height, left, bottom, top = 340, 180, 30, 28, 34
    plot_w, plot_h = width - left - 10, height - bottom - top
    peak = max(bins) if any(bins) else 1
    bar_w = plot_w / HISTOGRAM_BINS
    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}: distribution over '
        f'{sum(bins)} scored answers" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#888"/>',
    ]
    for i, n in enumerate(bins):
        h = plot_h * n / peak
        x = left + i * bar_w
        lo, hi = i / HISTOGRAM_BINS, (i + 1) / HISTOGRAM_BINS
        parts.append(
            f'<rect class="bar" x="{x + 2:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 4:.1f}" '
            f'height="{h:.1f}" fill="#0072B2" data-count="{n}"><title>{lo:.1f}–{hi:.1f}'
            f"{']' if i == HISTOGRAM_BINS - 1 else ')'}: {n} answers</title></rect>"
        )
        if n:
            parts.append(
                f'<text class="count" x="{x + bar_w / 2:.1f}" y="{top + plot_h - h - 3:.1f}" '
                f'text-anchor="middle"{_fit(str(n), bar_w)}>{n}</text>'
            )
    for tick in (0.0, 0.5, 1.0):
        x = left + plot_w * tick
        parts.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{tick:.1f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fit(label: str, width: float) -> str:
    """Squeeze a count wider than its bar (5+ digits at 11 px) so neighbours never overlap."""
    if len(label) * 6.5 <= width - 2:
        return ""
    return f' textLength="{width - 3:.1f}" lengthAdjust="spacingAndGlyphs"'


class HtmlReportWriter:
    """``--html OUT``: the self-contained report, written at ``close``."""

    def __init__(
        self,
        path: Path,
        title: str = "groundwatch check",
        max_cases_per_label: int = DEFAULT_MAX_CASES_PER_LABEL,
    ) -> None:
        self._path = path
        self._title = title
        self._max_cases = max_cases_per_label
        self._written: Counter[str] = Counter()
        # (sort key, offset, length) per card in the temporary file: ``close`` copies them
        # worst first without holding the cards themselves.
        # Three parallel arrays of 64-bit integers: sort key, byte offset and length per card.
        self._keys, self._offsets, self._lengths = array("q"), array("q"), array("q")
        self._cases: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        # Opening the output now surfaces an unwritable path before the run, not after it.
        path.open("w", encoding="utf-8").close()

    def _keep(self, label: str, ev: Evaluation | None, card: str) -> None:
        data = card.encode("utf-8")
        self._keys.append(case_order(label, ev, len(self._keys)))
        self._offsets.append(self._offsets[-1] + self._lengths[-1] if self._offsets else 0)
        self._lengths.append(len(data))
        self._cases.write(data)

    def add(self, row: Row, ev: Evaluation, seconds: float) -> None:
        if self._written[ev.label] < self._max_cases:
            self._written[ev.label] += 1
            self._keep(ev.label, ev, render_case(row, ev))

    def add_invalid(self, bad: InvalidRow) -> None:
        if self._written["invalid"] < self._max_cases:
            self._written["invalid"] += 1
            self._keep("invalid", None, render_invalid(bad))

    def _summary(self, s: CheckSummary, thresholds: list[Threshold], exit_code: int) -> str:
        passed = exit_code == 0
        verdict = {0: "PASS", 1: "FAIL", 2: "BAD INPUT"}[exit_code]
        share = s.flag_share
        failed = [t for t in thresholds if not t.passed]
        reasons = [f"{s.invalid} invalid rows"] if s.invalid else []
        why = "; ".join(reasons + [t.text for t in failed]) or "every threshold met"

        def state(name: str) -> str:
            # A metric's card shows the gate's verdict on it, when the gate checked it.
            checked = [t for t in thresholds if t.name == name]
            if not checked:
                return ""
            return "gate-pass" if all(t.passed for t in checked) else "gate-fail"

        cards = [
            (
                f"gate-{'pass' if passed else 'fail'}",
                verdict,
                f"gate result (exit {exit_code})",
                why,
            ),
            ("", str(s.rows + s.invalid), f"rows ({s.invalid} invalid)", ""),
            (
                state("flag share"),
                "–" if share is None else f"{share:.1%}",
                f"flag share ({s.labels['hallucinated']} of {s.judged} judged flagged "
                "hallucinated)",
                "the judge's verdicts, not the hallucination rate",
            ),
            _rate_card(s, state("hallucination rate upper bound")),
            (state("mean faithfulness"), score_text(s.mean_faithfulness), "mean faithfulness", ""),
            (state("mean groundedness"), score_text(s.mean_groundedness), "mean groundedness", ""),
        ]
        out = ['<section id="summary"><div class="cards">']
        for cls, n, k, detail in cards:
            extra = f'<div class="why">{escape(detail)}</div>' if detail else ""
            out.append(
                f'<div class="card {cls}"><div class="n">{escape(n)}</div>'
                f'<div class="k">{k}</div>{extra}</div>'
            )
        out.append('</div><div class="grid"><div>')
        out.append('<table id="label-counts"><tr><th>label</th><th>answers</th><th>share</th></tr>')
        total = s.rows or 1
        for label in LABELS:
            count = s.labels[label]
            out.append(f"<tr><td>{label}</td><td>{count}</td><td>{count / total:.1%}</td></tr>")
        out.append("</table>")
        out.append(
            '<table id="claim-counts" style="margin-top:.6rem"><tr><th>claims</th><th>count</th>'
            "</tr>"
        )
        for v in VERDICTS:
            out.append(
                f'<tr><td><span class="tag v-{v}">{VERDICT_ICONS[v]} {v}</span></td>'
                f"<td>{s.verdicts[v]}</td></tr>"
            )
        out.append("</table>")
        out.append('<h2>Gate</h2><ul class="thresholds">')
        for t in thresholds:
            out.append(f'<li class="{"pass" if t.passed else "fail"}">{escape(t.text)}</li>')
        if s.invalid:
            out.append(f'<li class="fail">{s.invalid} invalid rows (exit 2)</li>')
        out.append("</ul></div><div>")
        out.append(histogram_svg("groundedness", s.histogram_groundedness))
        out.append(histogram_svg("faithfulness", s.histogram_faithfulness))
        out.append("</div></div>")
        if s.labelled:
            out.append(
                f"<h2>Against the human labels ({s.labelled} rows)</h2>"
                '<table id="confusion"><tr><th>human \\ groundwatch</th>'
                + "".join(f"<th>{label}</th>" for label in LABELS)
                + "</tr>"
            )
            for e in EXPECTED_LABELS:
                out.append(
                    f"<tr><td>{e}</td>"
                    + "".join(f"<td>{s.confusion[(e, label)]}</td>" for label in LABELS)
                    + "</tr>"
                )
            ba = s.balanced_accuracy
            out.append(
                f"</table><p>Balanced accuracy <strong>{score_text(ba)}</strong> "
                "(an answer counts as flagged when labelled hallucinated or "
                "insufficient_context; judge errors left out).</p>"
            )
        if s.baseline is not None:
            out.append(self._baseline(s.baseline))
        out.append("</section>")
        return "".join(out)

    @staticmethod
    def _baseline(b: BaselineDiff) -> str:
        """The comparison with ``--baseline``: counts, then the changed rows of each kind."""
        out = [
            f"<h2>Against the baseline ({len(b.before)} rows there, {b.compared} matched by "
            f'id)</h2><p class="meta">{escape(b.path)}</p>'
            '<table id="baseline"><tr><th>change</th><th>rows</th><th>row: before → now</th></tr>'
        ]
        for kind in BASELINE_KINDS:
            n = b.counts[kind]
            cls = ' class="fail"' if kind == "newly_failing" and n else ""
            rows = "<br>".join(
                f"{escape(c.name)}: {escape(c.before or '–')} → {escape(c.after or '–')}"
                for c in b.listed[kind]
            )
            if n > len(b.listed[kind]):
                rows += f"<br>… and {n - len(b.listed[kind])} more"
            out.append(f"<tr{cls}><td>{BASELINE_TITLES[kind]}</td><td>{n}</td><td>{rows}</td></tr>")
        out.append("</table>")
        return "".join(out)

    def _filters(self, s: CheckSummary) -> str:
        counts: dict[str, int] = {label: s.labels[label] for label in LABELS}
        counts["invalid"] = s.invalid
        buttons = [
            f'<button type="button" data-filter="all" aria-pressed="true">all '
            f"({s.rows + s.invalid})</button>"
        ]
        cut = {label: n for label, n in counts.items() if n > self._written[label]}
        for label, n in counts.items():
            if n:
                buttons.append(
                    f'<button type="button" data-filter="{label}" aria-pressed="false">'
                    f"{label} ({n})</button>"
                )
        mismatch = (
            '<label><input type="checkbox" id="only-mismatch"> only disagreements with the '
            "human label</label>"
            if s.labelled
            else ""
        )
        note = ""
        if cut:
            note = (
                '<p class="meta" id="cut">This report shows the first '
                f"{self._max_cases} answers of each label; left out: "
                + ", ".join(f"{n - self._written[label]} {label}" for label, n in cut.items())
                + " (every answer is in the --json output).</p>"
            )
        return (
            note
            + '<nav class="filters" aria-label="filter answers by label"><strong>Show</strong>'
            + "".join(buttons)
            + mismatch
            + '<span class="meta" style="margin:0">showing <span id="shown">0</span></span></nav>'
        )

    @staticmethod
    def _legend() -> str:
        items = "".join(
            f'<span><mark class="claim v-{v}">{v} claim<sup>{VERDICT_ICONS[v]}</sup></mark></span>'
            for v in VERDICTS
        )
        return f'<div class="legend" aria-label="legend">{items}</div>'

    def close(self, summary: CheckSummary, thresholds: list[Threshold], exit_code: int) -> None:
        with self._path.open("w", encoding="utf-8") as out:
            out.write(
                '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">\n'
                '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                f"<title>{escape(self._title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            )
            out.write(
                f'<h1>{escape(self._title)}</h1>\n<p class="meta">judge {escape(summary.judge)} · '
                f"{summary.seconds:.1f} s · {escape(self._started)} · source "
                f"{escape(summary.source)}</p>\n"
            )
            out.write(self._summary(summary, thresholds, exit_code))
            out.write("\n<h2>Answers</h2>\n")
            out.write(self._legend())
            out.write(self._filters(summary))
            out.write('\n<main id="cases">\n')
            for i in sorted(range(len(self._keys)), key=self._keys.__getitem__):
                self._cases.seek(self._offsets[i])
                out.write(self._cases.read(self._lengths[i]).decode("utf-8"))
            out.write(f"</main>\n<script>{_JS}</script>\n</body>\n</html>\n")
        self._cases.close()

    def abort(self) -> None:
        self._cases.close()
