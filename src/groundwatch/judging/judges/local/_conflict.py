"""Contradictions by value, part of step 2: a number of the claim against another value of the
same kind in its evidence, and for a structured tool output's records, another row's value or a
replaced name; and whether a claim restates a record's values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...text.lexical import units
from ...text.numerals import Quantity
from ._clauses import CLAUSE, PLACEHOLDER
from ._features import ClaimFeatures
from ._index import ClaimReading, ContextIndex, ParsedClaim, mask_quantities

__all__ = ["find_conflict", "restates_record"]

# A number conflict counts as a contradiction only when the evidence sentence is about the
# same thing: at least half of the claim's (weighted) words are in it. Otherwise two numbers
# of the same kind may simply describe different facts ("visited in 2019" vs "built in 1889").
_CONFLICT_MIN_COVER = 0.5


def find_conflict(f: ClaimFeatures, read: ClaimReading) -> None:
    """``f.conflict``: a sentence stating another value of the same kind as one of the claim's
    numbers, another row's value of a structured record, or (``f.conflict_value``) a record's
    field named other than the claim says."""
    assert f.best is not None
    claim, index, weights, unmatched = read.claim, read.index, read.weights, read.unmatched
    sentences = index.sentences
    # Numbers: the evidence states another value of the same kind -> contradiction. Judged on
    # the part of the claim that holds the number, so a clause the claim adds ("... and
    # include shipping costs") cannot hide a changed value.
    if unmatched:
        candidates = [f.best] + [i for i in f.window if i != f.best]
        candidates += [sid for sid, _ in read.top if sid not in candidates]
        segments = [(q, _segment_weights(claim, q, weights)) for q in unmatched]
        f.conflict = next(
            (
                sid
                for sid in candidates
                if any(
                    _share(seg, sentences[sid].units) >= _conflict_cover(index, f, sid, q)
                    and any(_conflicts(q, x, claim, index, sid) for x in sentences[sid].quantities)
                    for q, seg in segments
                )
            ),
            None,
        )
    if f.conflict is None and f.best in index.statements:
        f.conflict = _other_row_value(claim, f, index, read.matched)
    if (
        f.conflict is None
        and f.best in index.record_names
        and (f.novel_terms or _absent_codes(claim, index))
    ):
        f.conflict_value = _replaced_name(claim, f, index, f.best)
        if f.conflict_value is not None:
            f.conflict = f.best


_RECORD_CONFLICT_MIN_COVER = 0.25
# A replaced name counts as a conflict only when the record is about the claim.
_RECORD_NAME_MIN_COVER = 0.3
# A number matched in another row counts against the aligned row only when the claim is
# plainly about that row (half its words, ids included, are in it).
_RECORD_ROW_MIN_COVER = 0.5


def _conflict_cover(index: ContextIndex, f: ClaimFeatures, sid: int, q: Quantity) -> float:
    """The share of a number's clause that sentence ``sid`` must hold for a conflict: for the
    record the claim aligns with best (the claim is about it), none."""
    if sid in index.statements and q.kind not in ("count", "year"):
        if sid == f.best and f.cover_sentence >= _RECORD_NAME_MIN_COVER:
            return 0.0
        return _RECORD_CONFLICT_MIN_COVER
    return _CONFLICT_MIN_COVER


def _conflicts(q: Quantity, x: Quantity, claim: ParsedClaim, index: ContextIndex, sid: int) -> bool:
    """``q`` of the claim conflicts with ``x`` of sentence ``sid``. In a record, a value the
    claim states elsewhere is taken ("$182.35 ... and a $0.50 dividend" does not contradict the
    price): only a value the claim leaves out can be the one it changed."""
    if not q.conflicts(x):
        return False
    return sid not in index.statements or not any(o.matches(x) for o in claim.quantities)


def _other_row_value(
    claim: ParsedClaim,
    f: ClaimFeatures,
    index: ContextIndex,
    matched: Sequence[tuple[Quantity, int]],
) -> int | None:
    """The best record when the claim is plainly about it and states, for one of its values,
    the value of another record (row SKU-3 costs 13 EUR, the claim says 31 EUR: SKU-21's
    price). Among rows, a number found somewhere is not yet a number found where it belongs."""
    assert f.best is not None
    if f.cover_sentence < _RECORD_ROW_MIN_COVER:
        return None
    window = set(f.window)
    best = index.sentences[f.best]
    for q, sid in matched:
        if sid in window or any(
            q.matches(x) for i in window for x in index.sentences[i].quantities
        ):
            continue
        if q.kind not in ("count", "year") and any(
            _conflicts(q, x, claim, index, f.best) for x in best.quantities
        ):
            return f.best
    return None


def restates_record(claim: ParsedClaim, f: ClaimFeatures, index: ContextIndex) -> bool:
    if not claim.quantities or f.numbers_unmatched or f.novel_names or f.evidence_lacks:
        return False
    if f.cover_sentence < _RECORD_NAME_MIN_COVER:
        return False
    stated = [x for i in f.window for x in index.sentences[i].quantities]
    return all(any(q.matches(x) for x in stated) for q in claim.quantities)


_CODE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,5}(?![\w-])")


def _absent_codes(claim: ParsedClaim, index: ContextIndex) -> bool:
    """Whether the claim names, in capitals (UPS, NYSE), something the context never says:
    the name check leaves such abbreviations out for prose, a record's values are often so."""
    return any(
        re.search(r"(?<!\w)" + re.escape(m.group(0)) + r"(?!\w)", index.joined, re.I) is None
        for m in _CODE.finditer(claim.span.text)
    )


def _replaced_name(
    claim: ParsedClaim, f: ClaimFeatures, index: ContextIndex, sid: int
) -> str | None:
    """The field of record ``sid`` whose name the claim states another name in place of:
    the claim names something the context never mentions, the record is about the claim, and
    the record holds a name the claim leaves out, in a field the claim names ("the carrier
    UPS" against "carrier is DHL") or as the only name it leaves out."""
    if f.cover_sentence < _RECORD_NAME_MIN_COVER:
        return None
    text = claim.span.text.lower()
    stems = set(claim.units)
    left_out = [
        (field, value)
        for field, value in index.record_names.get(sid, ())
        if not all(
            re.search(r"(?<!\w)" + re.escape(w.lower()) + r"(?!\w)", text)
            for w in re.findall(r"\w{2,}", value)
        )
    ]
    named = [(k, v) for k, v in left_out if set(units(k)[0]) & stems]
    chosen = named[0] if named else (left_out[0] if len(left_out) == 1 else None)
    return None if chosen is None else f"{chosen[0]} is {chosen[1]}"


def _segment_weights(
    claim: ParsedClaim, q: Quantity, weights: dict[str, float]
) -> dict[str, float]:
    """The weights of the words in the clause of the claim that states ``q`` (no number
    placeholders: those match any number of the same kind)."""
    text = claim.span.text
    start, end = 0, len(text)
    for m in CLAUSE.finditer(text):
        if m.end() <= q.start:
            start = m.end()
        elif m.start() >= q.end:
            end = m.start()
            break
    found = units(mask_quantities(text[start:end], claim.quantities, start))[0]
    return {u: weights.get(u, 1.0) for u in found if not u.startswith(PLACEHOLDER)}


def _share(weights: dict[str, float], have: frozenset[str]) -> float:
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for u, w in weights.items() if u in have) / total
