"""Clauses, part of step 2: a claim's negation compared with the clauses of its evidence it
aligns with, the clause that holds a claim's weight, and the clauses of a claim a record says
nothing of.
"""

from __future__ import annotations

import re

from ...text.lexical import context_units, units
from ._index import ParsedClaim, mask_quantities

__all__ = [
    "CLAUSE",
    "PLACEHOLDER",
    "aligned_clause",
    "negation_differs",
    "unbacked_clauses",
    "unit_set",
]

# Clause boundaries inside one sentence, English and Chinese.

CLAUSE = re.compile(
    r"[,;:，；：、]\s*|\s+(?:and|but|while|whereas|although|though|yet|which|who|so)\s+"
    r"|(?:但是|但|而且|并且|而|却|同时|所以|因此)"
)
PLACEHOLDER = "zq"


def unit_set(text: str) -> set[str]:
    return set(units(text)[0])


# A further clause joins the aligned span when it adds this share of the claim's weight.
_CLAUSE_MIN_GAIN = 0.2


def _clause_units(text: str) -> list[tuple[list[str], bool]]:
    """The content units and the negation of each clause of ``text``."""
    out: list[tuple[list[str], bool]] = []
    pos = 0
    for m in [*CLAUSE.finditer(text), None]:
        end = len(text) if m is None else m.start()
        found, negated = context_units(text[pos:end])
        if found or negated:
            out.append((found, negated))
        if m is not None:
            pos = m.end()
    return out


def aligned_clause(sentence: str, weights: dict[str, float]) -> str:
    """The clause of ``sentence`` that holds most of a claim's weight."""
    best, best_w = sentence, 0.0
    pos = 0
    for m in [*CLAUSE.finditer(sentence), None]:
        end = len(sentence) if m is None else m.start()
        w = sum(weights.get(u, 0.0) for u in set(context_units(sentence[pos:end])[0]))
        if w > best_w:
            best, best_w = sentence[pos:end], w
        if m is not None:
            pos = m.end()
    return best


def negation_differs(claim: ParsedClaim, sentence: str, weights: dict[str, float]) -> bool:
    """Whether a clause of the claim negates where the evidence it aligns with does not, or
    the reverse.

    Each clause of the claim is aligned with clauses of the evidence sentence, greedily: the
    one holding most of its weight, then each further one that adds a fair share of the units
    still missing. Negation is compared on that aligned span only, so a "not" in another clause
    of the same sentence ("... and has no processing fee") does not count against a claim that
    leaves that clause out, and a flipped clause is caught even inside a long sentence.
    """
    evidence = [
        (set(found) & weights.keys(), neg, len(found)) for found, neg in _clause_units(sentence)
    ]
    if not evidence:
        return False
    for found, claim_negated in _clause_units(mask_quantities(claim.span.text, claim.quantities)):
        own = {u: weights.get(u, 1.0) for u in found if not u.startswith(PLACEHOLDER)}
        total = sum(own.values())
        if len(own) < 2 or total <= 0:
            continue
        covered: set[str] = set()
        span_negated = False
        span_size = 0
        for units_in, neg, size in sorted(
            evidence, key=lambda c: -sum(own.get(u, 0.0) for u in c[0])
        ):
            gain = sum(own.get(u, 0.0) for u in units_in - covered)
            if gain <= 0 or (covered and gain < _CLAUSE_MIN_GAIN * total):
                continue
            covered |= units_in
            span_negated = span_negated or neg
            span_size += size
        if sum(own.get(u, 0.0) for u in covered) < 0.6 * total:
            continue  # this clause is not what the sentence says; nothing to compare
        if claim_negated != span_negated and (claim_negated or span_size <= 2 * len(found) + 2):
            return True
    return False


# A record of a structured tool output names its fields, not the answer's words ("weight_kg"
# for "weighs"): a number of a measured kind (money, mass, a date) conflicts with the record's
# value of that kind once a quarter of its clause is in the record. Counts and years, which


def unbacked_clauses(claim: ParsedClaim, have: frozenset[str]) -> list[str]:
    """Clauses of a claim aligned with a record that the record says nothing of: no number,
    and none of two or more words in it ("..., and the roads are closed" against a weather
    record). A record states its fields and nothing else, so such a clause is added."""
    text = claim.span.text
    out: list[str] = []
    pos = 0
    for m in [*CLAUSE.finditer(text), None]:
        end = len(text) if m is None else m.start()
        if not any(pos <= q.start < end for q in claim.quantities):
            words = [u for u in context_units(text[pos:end])[0] if not u.startswith(PLACEHOLDER)]
            if len(words) >= 2 and not have.intersection(words):
                out.append(text[pos:end].strip(" .;,"))
        if m is not None:
            pos = m.end()
    return out
