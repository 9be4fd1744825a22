"""One answer's card in the HTML report of ``groundwatch check``.

A card shows the answer with each located claim highlighted for its verdict (colour, underline
style, icon and text tag: never colour alone), then every claim with its verdict, reason,
evidence quote and the passage around the quote; for an unbacked claim, the closest passage
sentence (said to be a pointer, not evidence), and the retrieved passages. The page around the
cards (summary, chart, filters, the streamed file) is :mod:`.report`.
"""

from __future__ import annotations

import html

from .._shared.inputs import to_passage
from ..judging.scoring import counted
from ..judging.text.lexical import WIDE_CHAR
from ..types import Claim, Evaluation, Passage, passage_names
from .rows import InvalidRow, Row
from .summary import FLAGGED_LABELS, VERDICT_ICONS, closest_sentence

PASSAGE_WINDOW_CHARS = 600
"""Characters of passage shown on each side of an evidence quote (passages can be 50k long)."""

RETRIEVED_PASSAGE_CHARS = 2_000
"""Characters of each retrieved passage shown under an answer with unbacked claims."""

_WORST_FIRST = {
    "hallucinated": 0,
    "insufficient_context": 1,
    "error": 2,
    "invalid": 3,
    "no_claims": 4,
    "grounded": 5,
}
"""Card order: what needs a look first. Within a label, lower faithfulness, then lower
groundedness, then input order."""


def escape(text: object) -> str:
    """``text`` as HTML text or an attribute value (quotes escaped too)."""
    return html.escape(str(text), quote=True)


def _lang(*texts: str | None) -> str:
    return "zh" if any(t and WIDE_CHAR.search(t) for t in texts) else "en"


def score_text(value: float | None) -> str:
    """A score as shown on the page: two decimals, a dash when there is none."""
    return "–" if value is None else f"{value:.2f}"


def highlight_answer(answer: str, claims: list[Claim]) -> tuple[str, set[int]]:
    """The answer as HTML with each located claim wrapped in a ``<mark>`` for its verdict.

    Returns the HTML and the indexes of the claims that were highlighted. Claims without
    offsets (a rephrasing judge) or overlapping an earlier one are left to the list below.
    """
    located = sorted(
        (
            (c.start, c.end, i, c)
            for i, c in enumerate(claims)
            if c.start is not None and c.end is not None and 0 <= c.start < c.end <= len(answer)
        ),
        key=lambda t: (t[0], t[1]),
    )
    out: list[str] = []
    done: set[int] = set()
    cursor = 0
    for start, end, i, claim in located:
        if start < cursor:
            continue
        out.append(escape(answer[cursor:start]))
        title = f"{claim.verdict}: {claim.reason}" if claim.reason else claim.verdict
        out.append(
            f'<mark class="claim v-{claim.verdict}" data-claim="{i}" '
            f'data-verdict="{claim.verdict}" title="{escape(title)}">{escape(answer[start:end])}'
            f'<sup aria-label="{claim.verdict}">{VERDICT_ICONS[claim.verdict]}</sup></mark>'
        )
        done.add(i)
        cursor = end
    out.append(escape(answer[cursor:]))
    return "".join(out), done


def _passage_window(text: str, start: int, end: int) -> str:
    lo = max(0, start - PASSAGE_WINDOW_CHARS)
    hi = min(len(text), end + PASSAGE_WINDOW_CHARS)
    return (
        ("…" if lo > 0 else "")
        + escape(text[lo:start])
        + f"<mark>{escape(text[start:end])}</mark>"
        + escape(text[end:hi])
        + ("…" if hi < len(text) else "")
    )


def _claim_item(
    i: int,
    claim: Claim,
    located: bool,
    passages: list[str],
    question: str | None,
    names: list[str] | None = None,
) -> str:
    parts = [
        f'<li class="v-{claim.verdict}" data-verdict="{claim.verdict}">',
        f'<span class="tag">{VERDICT_ICONS[claim.verdict]} {claim.verdict}</span> ',
        f'<span class="claim-text">{escape(claim.text)}</span>',
    ]
    if not located:
        parts.append(' <span class="unlocated">(not located in the answer text)</span>')
    if claim.reason:
        parts.append(f' <span class="reason">— {escape(claim.reason)}</span>')
    if not claim.evidence and claim.verdict in ("unsupported", "contradicted"):
        parts.append(_closest_item(claim, passages, question, names))
    for ev in claim.evidence[:3]:
        label = ev.name  # "passage 3", or the tool whose output it is
        parts.append(
            f'<div class="evidence"><span class="quote">“{escape(ev.quote)}”</span> '
            f'<span class="pn">({label})</span>'
        )
        if 0 <= ev.passage < len(passages):
            text = passages[ev.passage]
            if 0 <= ev.start < ev.end <= len(text):
                parts.append(
                    f"<details><summary>show {label} ({len(text)} characters)</summary>"
                    f'<div class="passage">{_passage_window(text, ev.start, ev.end)}</div>'
                    "</details>"
                )
        parts.append("</div>")
    parts.append("</li>")
    return "".join(parts)


def _closest_item(
    claim: Claim, passages: list[str], question: str | None, names: list[str] | None = None
) -> str:
    """The passage sentence nearest an unbacked claim, said to be a pointer, not evidence."""
    found = closest_sentence(claim.text, passages, question)
    if found is None:
        return '<div class="closest">no passage sentence shares a word with this claim</div>'
    index, start, end = found
    label = names[index] if names is not None else f"passage {index + 1}"
    return (
        f'<div class="closest">closest passage sentence (not evidence): <span class="quote">'
        f"“{escape(passages[index][start:end])}”</span> ({label})"
        f"<details><summary>show {label} ({len(passages[index])} characters)</summary>"
        f'<div class="passage">{_passage_window(passages[index], start, end)}</div></details>'
        "</div>"
    )


def _retrieved_passages(passages: list[str], names: list[str] | None = None) -> str:
    items = []
    for i, text in enumerate(passages):
        cut = text[:RETRIEVED_PASSAGE_CHARS]
        more = f" … ({len(text) - len(cut)} more characters)" if len(text) > len(cut) else ""
        # A tool's output (or a conversation turn) says whose it is.
        source = f'<span class="pn">{escape(names[i])}:</span> ' if names is not None else ""
        items.append(f"<li>{source}{escape(cut)}{more}</li>")
    return (
        f'<details class="retrieved"><summary>the {counted(len(passages), "retrieved passage")}'
        "</summary>"
        f"<ol>{''.join(items)}</ol></details>"
    )


_SCORE_STEPS = 10_000
_SEQUENCE_BITS = 32


def case_order(label: str, ev: Evaluation | None, sequence: int) -> int:
    """The sort key that puts the worst answers first (see ``_WORST_FIRST``), packed in one
    64-bit integer (label rank, faithfulness and groundedness to 1e-4, then arrival order) so
    that the report's index costs a few bytes per card."""
    f = 1.0 if ev is None or ev.faithfulness is None else ev.faithfulness
    g = 1.0 if ev is None or ev.groundedness is None else ev.groundedness
    rank = _WORST_FIRST.get(label, len(_WORST_FIRST))
    steps = _SCORE_STEPS + 1
    packed: int = (rank * steps + round(f * _SCORE_STEPS)) * steps + round(g * _SCORE_STEPS)
    return (packed << _SEQUENCE_BITS) | (sequence & ((1 << _SEQUENCE_BITS) - 1))


def render_case(row: Row, ev: Evaluation) -> str:
    """One answer's card."""
    read: list[Passage] = []
    for i, item in enumerate(row.contexts):
        try:
            read.append(to_passage(item, i))
        except TypeError:
            read.append(Passage(text=""))
    passages = [p.text for p in read]
    # Named only when some passage is a tool's output or a turn: plain passages keep numbers.
    names = passage_names(read) if any(p.kind != "retrieved" or p.tool for p in read) else None
    flagged = ev.label in FLAGGED_LABELS
    mismatch = (
        row.expected is not None
        and ev.label != "error"
        and (row.expected == "hallucinated") != flagged
    )
    shown = row.answer if row.answer_read is None else row.answer[: row.answer_read]
    answer_html, located = highlight_answer(shown, ev.claims)
    if len(shown) < len(row.answer):
        # The card shows what the judge read: a 20 MB answer would make a 20 MB card.
        answer_html += (
            f'<span class="cut-mark">… {len(row.answer) - len(shown):,} more characters the '
            "judge did not read</span>"
        )
    header = [
        f'<span class="name">{escape(row.name)}</span>',
        f'<span class="rowno">row {row.number}</span>',
        f'<span class="badge {ev.label}">{ev.label}</span>',
        f'<span class="scores">faithfulness {score_text(ev.faithfulness)} · groundedness '
        f"{score_text(ev.groundedness)}</span>",
    ]
    if row.expected:
        header.append(f'<span class="badge expected">human: {row.expected}</span>')
    if row.cuts:
        # The judge read this answer in part: said on the card, not only in --json.
        cuts = escape("; ".join(row.cuts))
        header.append(f'<span class="badge truncated" title="{cuts}">✂ truncated</span>')
    if mismatch:
        header.append('<span class="mismatch">⚠ disagrees with the human label</span>')
    body = [
        f'<article class="case" data-label="{ev.label}" data-mismatch="{str(mismatch).lower()}" '
        f'lang="{_lang(row.answer, row.question)}" id="row-{row.number}">',
        f"<header>{''.join(header)}</header>",
    ]
    if row.question:
        body.append(f'<p class="question">Q: {escape(row.question)}</p>')
    body.append(f'<p class="answer">{answer_html}</p>')
    if row.cuts:
        body.append(
            f'<p class="reason cut">read in part (the gate fails on it unless '
            f"--allow-truncated): {escape('; '.join(row.cuts))}</p>"
        )
    if ev.label == "error":
        body.append(f'<p class="reason">judge failed: {escape(ev.error or ev.explanation)}</p>')
    elif ev.explanation:
        body.append(f'<p class="reason">{escape(ev.explanation)}</p>')
    if ev.claims:
        items = [
            _claim_item(i, c, i in located, passages, row.question, names)
            for i, c in enumerate(ev.claims)
        ]
        body.append(f'<ol class="claims">{"".join(items)}</ol>')
    if passages and any(c.verdict in ("unsupported", "contradicted") for c in ev.claims):
        body.append(_retrieved_passages(passages, names))
    body.append("</article>\n")
    return "".join(body)


def render_invalid(bad: InvalidRow) -> str:
    """The card of a row that could not be checked."""
    name = bad.id or f"row {bad.number}"
    return (
        f'<article class="case" data-label="invalid" data-mismatch="false" '
        f'id="row-{bad.number}"><header><span class="name">{escape(name)}</span>'
        f'<span class="rowno">row {bad.number}</span><span class="badge invalid">invalid</span>'
        f'</header><p class="invalid-msg">{escape(_invalid_text(bad))}</p>'
        "</article>\n"
    )


def _invalid_text(bad: InvalidRow) -> str:
    return bad.message if bad.field is None else f"field {bad.field}: {bad.message}"
