"""Step 1 of the local judge: the passages cut into sentences and indexed once per call, and
each claim read once (its units, names, negation and numbers, the numbers masked as words
naming their kind).

Only units some claim uses are indexed: units no claim uses cannot change any coverage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ....types import Passage, passage_names
from ...text.claims import ClaimSpan, sentence_spans
from ...text.lexical import context_units, units
from ...text.numerals import Quantity, QuantityIndex, extract_quantities
from ...text.structured import (
    DATE_KIND,
    MONTH_KIND,
    codes,
    statement_quantities,
    tool_records,
    with_dates,
)

__all__ = [
    "ClaimReading",
    "ContextIndex",
    "ParsedClaim",
    "Sentence",
    "index_for",
    "mask_quantities",
    "parse_claim",
]

# Kinds of the whole dates read in structured tool outputs (and in claims beside them).
_WHOLE_DATES = frozenset({DATE_KIND, MONTH_KIND})
# Sentences longer than this are cut into chunks (tables, unpunctuated scraped text), so that
# evidence stays a readable span and alignment stays local.
_MAX_SENTENCE_CHARS = 400
# Past this many characters of context, passages are cut into fixed-size chunks instead of
# sentences: splitting millions of characters into tiny sentences costs seconds in Python, and
# chunk-level alignment is still good evidence.
_SENTENCE_MODE_MAX_CHARS = 300_000
# Candidate generation reads at most this many postings per unit: very frequent units carry
# little weight anyway and would make huge contexts quadratic.
_MAX_POSTINGS = 512
# How many top candidate sentences get an exact coverage computation.


@dataclass
class Sentence:
    passage: int
    start: int
    end: int
    units: frozenset[str]
    pairs: frozenset[str]
    negated: bool
    size: int
    quantities: list[Quantity] = field(default_factory=list)


def _chunks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence into chunks at spaces or commas where possible."""
    out: list[tuple[int, int]] = []
    pos = start
    while end - pos > _MAX_SENTENCE_CHARS:
        limit = pos + _MAX_SENTENCE_CHARS
        cut = max(text.rfind(" ", pos + 100, limit), text.rfind("，", pos + 100, limit))
        if cut <= pos:
            cut = limit
        out.append((pos, cut))
        pos = cut
        while pos < end and text[pos].isspace():
            pos += 1
    if end > pos:
        out.append((pos, end))
    return out


class ContextIndex:
    """Sentences of all passages with an inverted index, built once per judge call."""

    def __init__(
        self, passages: Sequence[Passage], relevant: set[str], with_quantities: bool = True
    ) -> None:
        """Index ``passages``, keeping only the units in ``relevant`` (the claims' units).

        Units no claim uses cannot change any coverage, so they are dropped right after
        tokenisation: sets, pairs and postings stay small even for very long contexts.
        """
        self.sentences: list[Sentence] = []
        self.postings: dict[str, list[int]] = {}
        self.df: dict[str, int] = {}
        self.all_units: set[str] = set()
        self.all_pairs: set[str] = set()
        seen: set[str] = set()
        quantities: list[tuple[Quantity, int]] = []
        seen_passages: set[str] = set()
        # What a tool's structured output says in words: per sentence (its record's
        # statement) and per passage (its text and every statement), for the checks that read
        # a claim's numbers, dates and names in the evidence.
        self.statements: dict[int, str] = {}
        self.readable: dict[int, str] = {}
        self.record_names: dict[int, tuple[tuple[str, str], ...]] = {}
        coarse = sum(len(p.text) for p in passages) > _SENTENCE_MODE_MAX_CHARS
        for pi, passage in enumerate(passages):
            text = passage.text
            if text in seen_passages:  # the same passage retrieved twice: index it once
                continue
            seen_passages.add(text)
            # Numbers are found on the whole passage (one regex pass), then handed to the
            # sentences that contain them, in order.
            passage_qs = (
                sorted(extract_quantities(text), key=lambda q: q.start) if with_quantities else []
            )
            records = tool_records(passage)
            if records:
                # A tool's structured output: one sentence per record, read through its
                # statement (fields in words, units beside their numbers, dates written out)
                # while its span, and so any evidence, stays in the passage's own text.
                self.readable[pi] = text + "\n" + "\n".join(r.statement for r in records)
                for record in records:
                    said = record.statement
                    if said in seen:
                        continue
                    seen.add(said)
                    said_qs = statement_quantities(said) if with_quantities else []
                    # Dates are masked as a whole in a claim; in a statement their words stay
                    # too ("on March 15" finds "March 15, 2024") beside the date's own unit.
                    whole = [q for q in said_qs if q.kind in _WHOLE_DATES]
                    parts = [q for q in said_qs if q.kind not in _WHOLE_DATES]
                    masked = mask_quantities(said, parts) if parts else said
                    extra = codes(said) + [f"zq{k}" for k in {q.kind for q in whole}]
                    sid = self._add(pi, record.start, record.end, masked, said_qs, relevant, extra)
                    self.statements[sid] = said
                    self.record_names[sid] = record.names
                    quantities.extend((q, sid) for q in said_qs)
                continue
            qi = 0
            spans = [(0, len(text))] if coarse else sentence_spans(text)
            for s_start, s_end in spans:
                for c_start, c_end in _chunks(text, s_start, s_end):
                    while qi < len(passage_qs) and passage_qs[qi].start < c_start:
                        qi += 1
                    qs: list[Quantity] = []
                    while qi < len(passage_qs) and passage_qs[qi].start < c_end:
                        qs.append(passage_qs[qi])
                        qi += 1
                    chunk = text[c_start:c_end]
                    if chunk in seen:  # repeated boilerplate: index the first copy only
                        continue
                    seen.add(chunk)
                    masked = mask_quantities(chunk, qs, c_start) if qs else chunk
                    sid = self._add(pi, c_start, c_end, masked, qs, relevant)
                    quantities.extend((q, sid) for q in qs)
        self.all_units = set(self.df)
        self.texts = [p.text for p in passages]
        # What reasons call each passage: its number, or a tool's name for a tool's output.
        self.names = (
            passage_names(passages)
            if any(p.kind != "retrieved" or p.tool for p in passages)
            else None
        )
        self._joined: str | None = None
        self.quantities = QuantityIndex(quantities)
        self._n1 = len(self.sentences) + 1.0
        self._absent_idf = math.log(1.0 + self._n1)

    def _add(
        self,
        pi: int,
        start: int,
        end: int,
        words: str,
        qs: list[Quantity],
        relevant: set[str],
        extra: Sequence[str] = (),
    ) -> int:
        """Index one sentence of passage ``pi`` (``start``/``end`` in its text) whose words are
        ``words`` (its numbers already masked, see :func:`mask_quantities`) and ``extra`` units;
        returns its id."""
        found, negated = context_units(words)
        # Positions of relevant units; pairs only between relevant units at most one unit
        # apart (the gappy pairs of the whole sequence, restricted).
        rel = [(i, u) for i, u in enumerate(found) if u in relevant]
        unit_set = frozenset(u for _, u in rel).union(u for u in extra if u in relevant)
        pair_set = frozenset(
            a + " " + b for k, (i, a) in enumerate(rel) for j, b in rel[k + 1 : k + 3] if j - i <= 2
        )
        sid = len(self.sentences)
        self.sentences.append(Sentence(pi, start, end, unit_set, pair_set, negated, len(found), qs))
        postings = self.postings
        df = self.df
        for u in unit_set:
            post = postings.get(u)
            if post is None:
                postings[u] = [sid]
                df[u] = 1
            else:
                df[u] += 1
                if len(post) < _MAX_POSTINGS:
                    post.append(sid)
        self.all_pairs |= pair_set
        return sid

    def idf(self, unit: str) -> float:
        """Smoothed inverse sentence frequency: never 0, and a unit absent from the context
        weighs only a little more than a rare one (a claim is not failed by one odd word)."""
        df = self.df.get(unit)
        if df is None:
            return self._absent_idf
        return math.log(1.0 + self._n1 / (df + 1.0))

    @property
    def joined(self) -> str:
        """All passage texts in one string, for substring look-ups (built on first use)."""
        if self._joined is None:
            self._joined = "\n".join(self.readable.get(i, t) for i, t in enumerate(self.texts))
        return self._joined

    def text_of(self, sid: int) -> str:
        s = self.sentences[sid]
        return self.texts[s.passage][s.start : s.end]

    def said(self, sid: int) -> str:
        """What a sentence says: its text, or for a record of a structured tool output the
        record's statement (the words the judge aligned, not the JSON)."""
        return self.statements.get(sid) or self.text_of(sid)

    def neighbours(self, sid: int) -> list[int]:
        """The sentence and its neighbours within the same passage."""
        p = self.sentences[sid].passage
        out = [sid]
        if sid > 0 and self.sentences[sid - 1].passage == p:
            out.insert(0, sid - 1)
        if sid + 1 < len(self.sentences) and self.sentences[sid + 1].passage == p:
            out.append(sid + 1)
        return out


@dataclass(frozen=True)
class ParsedClaim:
    """A claim span with what the judge reads from it, computed once."""

    span: ClaimSpan
    units: list[str]
    negated: bool
    names: list[str]
    quantities: list[Quantity]


def parse_claim(span: ClaimSpan, dates: bool = False) -> ParsedClaim:
    """Read a claim. With ``dates`` (the context has a structured tool output, whose dates are
    compared whole), a whole date in the claim is one quantity rather than its numbers."""
    quantities = extract_quantities(span.text)
    if dates:
        quantities = with_dates(span.text, quantities, keep_parts=False)
    # Numbers are compared as quantities, so their digits, numerals and unit words are no
    # words to align: "1.5 km" must not miss "1500 m" for want of the word "km".
    found, negated, names = units(mask_quantities(span.text, quantities))
    if dates:  # ids ("A-17", "SKU-3") pick the record out of the rows
        found += codes(span.text)
    return ParsedClaim(span, found, negated, names, quantities)


def mask_quantities(text: str, quantities: Sequence[Quantity], offset: int = 0) -> str:
    """``text`` with every quantity mention replaced by a word naming its kind.

    Both sides of the alignment are masked the same way, so "1.5 km long" and "1500 m long"
    read alike as words (``zqlength long``) while the values are compared as quantities.
    ``offset`` is where ``text`` starts in the text the quantities' offsets refer to.
    """
    if not quantities:
        return text
    out: list[str] = []
    pos = 0
    for q in sorted(quantities, key=lambda q: q.start):
        start, end = q.start - offset, q.end - offset
        if start < pos or start < 0 or end > len(text):
            continue
        out.append(text[pos:start])
        out.append(f" zq{q.kind} ")
        pos = end
    out.append(text[pos:])
    return "".join(out)


@dataclass
class ClaimReading:
    """One claim read against the index: what the steps that look for evidence against it
    share."""

    claim: ParsedClaim
    index: ContextIndex
    weights: dict[str, float]
    """The claim's units, weighted by their rarity in the passages (units of the question weigh
    less)."""
    unmatched: list[Quantity]
    """The claim's numbers the context states nowhere."""
    matched: list[tuple[Quantity, int]]
    """The claim's numbers the context states, each with the sentence that states it."""
    top: list[tuple[int, float]]
    """The candidate sentences, best first by the claim weight they hold."""


def index_for(contexts: Sequence[Passage], claims: list[ParsedClaim]) -> ContextIndex:
    relevant: set[str] = set()
    for c in claims:
        relevant.update(c.units)
    # The context's numbers matter only when a claim states one.
    return ContextIndex(contexts, relevant, with_quantities=any(c.quantities for c in claims))
