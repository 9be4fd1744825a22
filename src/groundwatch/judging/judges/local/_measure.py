"""Step 2 of the local judge: one claim measured against the index (its candidate sentences,
its numbers, its coverage by the whole context, its novel names, the best-aligned sentence and
window, and what that evidence says against it), into :class:`ClaimFeatures`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ...evidence_check import missing_from, names_absent
from ...text.numerals import Quantity
from ._clauses import aligned_clause, negation_differs, unbacked_clauses, unit_set
from ._conflict import find_conflict, restates_record
from ._contrast import cause_effect_reversed, direction_reversed
from ._features import ClaimFeatures
from ._index import ClaimReading, ContextIndex, ParsedClaim
from ._zh import novel_terms as novel_nouns

__all__ = [
    "align",
    "candidate_weights",
    "cover_set",
    "list_windows",
    "match_quantities",
    "measure_context",
    "measure_evidence",
    "novel_terms",
]

# How many top candidate sentences get an exact coverage computation.
_CANDIDATES = 6


def candidate_weights(
    index: ContextIndex, unique: Sequence[str], weights: dict[str, float]
) -> dict[int, float]:
    """Candidate sentences: the claim's unit weights accumulated through the postings."""
    acc: dict[int, float] = {}
    for u in unique:
        post = index.postings.get(u)
        if post is None:
            continue
        w = weights[u]
        for sid in post:
            acc[sid] = acc.get(sid, 0.0) + w
    return acc


def match_quantities(
    f: ClaimFeatures, claim: ParsedClaim, index: ContextIndex
) -> tuple[list[Quantity], list[tuple[Quantity, int]]]:
    """The claim's numbers the context states nowhere, and those it states with the sentence
    that states each (counted in ``f.numbers`` and ``f.numbers_unmatched``)."""
    unmatched: list[Quantity] = []
    matched: list[tuple[Quantity, int]] = []
    for q in claim.quantities:
        hit = index.quantities.find_match(q)
        if hit is None:
            unmatched.append(q)
        else:
            matched.append((q, hit[1]))
    f.numbers = len(claim.quantities)
    f.numbers_unmatched = len(unmatched)
    return unmatched, matched


def measure_context(
    f: ClaimFeatures,
    index: ContextIndex,
    weights: dict[str, float],
    total: float,
    claim_pairs: set[str],
) -> None:
    """The claim's coverage by the whole context: its weighted units and its unit pairs."""
    if total > 0:
        covered = sum(w for u, w in weights.items() if u in index.all_units)
        f.cover_context = covered / total
    if claim_pairs:
        f.pair_context = len(claim_pairs & index.all_pairs) / len(claim_pairs)


def novel_terms(
    claim: ParsedClaim, index: ContextIndex, q_units: set[str], question: str, cjk: bool
) -> list[str]:
    """Names (and, for Chinese, nouns) of the claim that neither the context nor the question
    mentions."""
    novel = [n for n in dict.fromkeys(claim.names) if n not in index.all_units and n not in q_units]
    if cjk:
        known = index.joined + "\n" + question
        novel += [n for n in names_absent(claim.span.text, known) if n not in novel]
        novel += novel_nouns(claim.span.text, index.joined, question)
    return novel


def align(
    f: ClaimFeatures,
    index: ContextIndex,
    acc: dict[int, float],
    weights: dict[str, float],
    total: float,
    claim_pairs: set[str],
) -> list[tuple[int, float]]:
    """Pick the best-aligned sentence among the top candidates (``f.best``, its coverage, its
    window of neighbours); returns the candidates, best first by accumulated weight."""
    if not acc:
        return []
    sentences = index.sentences
    top = heapq.nlargest(_CANDIDATES, acc.items(), key=lambda kv: (kv[1], -kv[0]))
    best_key: tuple[float, float, int] | None = None
    for sid, _ in top:
        s = sentences[sid]
        cov = sum(w for u, w in weights.items() if u in s.units) / total if total else 0.0
        pc = len(claim_pairs & s.pairs) / len(claim_pairs) if claim_pairs else cov
        window = index.neighbours(sid)
        if len(window) > 1:
            wunits = frozenset().union(*(sentences[i].units for i in window))
            wcov = sum(w for u, w in weights.items() if u in wunits) / total if total else 0
        else:
            wcov = cov
        key = (cov + pc, wcov, -sid)
        if best_key is None or key > best_key:
            best_key = key
            f.best = sid
            f.cover_sentence = cov
            f.pair_sentence = pc
            f.cover_window = max(wcov, cov)
            f.window = window
    return top


def measure_evidence(f: ClaimFeatures, read: ClaimReading) -> None:
    """What the best sentence and its window say against the claim: where they are, a
    conflicting value, a flipped negation, what they lack, a reversed direction or cause."""
    assert f.best is not None
    claim, index, weights = read.claim, read.index, read.weights
    sentences = index.sentences
    best = sentences[f.best]
    f.best_span = (best.passage, best.start, best.end)
    f.window_span = window_span(index, f.window)
    find_conflict(f, read)
    # Negation: compared on the clauses of the evidence that the claim aligns with, so a "not"
    # in another clause of the same sentence ("... and has no processing fee") is not counted
    # against a claim that leaves that clause out.
    evidence = index.said(f.best)
    f.closest = _closest(index, f.best)
    f.negation_unbacked = claim.negated and not any(sentences[i].negated for i in f.window)
    if claim.negated or best.negated:
        f.negation_flip = f.cover_sentence >= 0.6 and negation_differs(claim, evidence, weights)
    find_lacks(f, claim, index)
    if f.cover_sentence >= 0.6:
        text = claim.span.text
        f.direction_flip = direction_reversed(text, aligned_clause(evidence, weights))
        f.causal_flip = cause_effect_reversed(text, evidence, unit_set)


def window_span(index: ContextIndex, window: Sequence[int]) -> tuple[int, int, int]:
    """``(passage, start, end)`` of a run of adjacent sentences of one passage."""
    sentences = index.sentences
    return (
        sentences[window[0]].passage,
        min(sentences[i].start for i in window),
        max(sentences[i].end for i in window),
    )


def list_windows(
    f: ClaimFeatures, index: ContextIndex, top: Sequence[tuple[int, float]], most: int
) -> None:
    """``f.candidate_windows``: the aligned window, then the windows of the other candidate
    sentences by the claim weight they hold, at most ``most`` distinct ones."""
    assert f.window_span is not None
    windows = [f.window_span]
    for sid, _ in top:
        if len(windows) >= most:
            break
        span = window_span(index, index.neighbours(sid))
        if span not in windows:
            windows.append(span)
    f.candidate_windows = tuple(windows)


def _closest(index: ContextIndex, sid: int) -> str:
    """Where a sentence is and how it begins, for reasons ("passage 2: 'The tower…'")."""
    shown = index.text_of(sid)  # reasons quote the passage itself
    snippet = shown if len(shown) <= 60 else shown[:57].rstrip() + "..."
    passage = index.sentences[sid].passage
    # Numbered from 1, as people count (and as reports number passages).
    name = f"passage {passage + 1}" if index.names is None else index.names[passage]
    return f"{name}: {snippet!r}"


def find_lacks(f: ClaimFeatures, claim: ParsedClaim, index: ContextIndex) -> None:
    """``f.evidence_lacks``: the numbers and names of the claim its evidence (the sentences that
    cover it, with their passages) lacks; for a structured record, the claim's clauses it does
    not back, and whether the claim restates the record's values (``f.record_values``)."""
    assert f.best is not None
    sentences = index.sentences
    if claim.quantities or claim.names or f.cjk:
        sids = cover_set(f, index, claim)
        texts = [index.said(i) for i in sids]
        passages = sorted({sentences[i].passage for i in sids})
        texts += [index.readable.get(p, index.texts[p]) for p in passages]
        f.evidence_lacks = missing_from(claim.span.text, texts)
    if f.best in index.statements and not f.evidence_lacks:
        have = frozenset().union(*(sentences[i].units for i in f.window))
        f.evidence_lacks = unbacked_clauses(claim, have)
        f.record_values = restates_record(claim, f, index)


def cover_set(f: ClaimFeatures, index: ContextIndex, claim: ParsedClaim) -> list[int]:
    """The best sentence, plus window sentences that add claim units it lacks (synthesis)."""
    assert f.best is not None
    chosen = [f.best]
    found = set(claim.units)
    have = set(index.sentences[f.best].units)
    for sid in f.window:
        if sid == f.best:
            continue
        extra = (index.sentences[sid].units & found) - have
        if extra:
            chosen.append(sid)
            have |= extra
    return sorted(chosen)
