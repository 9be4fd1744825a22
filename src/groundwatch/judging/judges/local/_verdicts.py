"""Step 3 of the local judge: the rule that decides a claim, each rule's verdict, and the
reasons that name what decided it.
"""

from __future__ import annotations

from collections.abc import Callable

from ....types import Verdict
from ...scoring import counted
from ._features import ClaimFeatures

__all__ = [
    "RULE_VERDICTS",
    "aligned_reason",
    "covered_reason",
    "record_reason",
    "rule_of",
    "uncalibrated_confidence",
    "weak_reason",
]


def rule_of(f: ClaimFeatures, *, calibrated: bool = True) -> str | None:
    """The rule that decides a claim, in the judge's order (one of ``_calibration.RULES``), or
    None when the coverage measurements decide. The unbacked-negation rule belongs to the
    calibrated judge only."""
    if f.best is not None:
        if f.conflict is not None:
            return "conflict"
        if f.negation_flip:
            return "negation"
        if f.direction_flip:
            return "direction"
        if f.causal_flip:
            return "causal"
    if f.numbers_unmatched:
        return "number"
    if f.novel_names:
        return "name"
    if f.negation_unbacked and calibrated:
        return "negated"
    if f.evidence_lacks:
        return "evidence"
    return None


def uncalibrated_confidence(rule: str, f: ClaimFeatures) -> float:
    """A rule's confidence without a calibration: how clearly its evidence shows it."""
    if rule == "conflict":
        return 0.6 + 0.4 * min(1.0, f.cover_window)
    if rule in ("negation", "direction", "causal"):
        return 0.4 + 0.4 * f.cover_sentence
    if rule == "number":
        return 0.6 + 0.3 * min(1.0, f.numbers_unmatched / max(f.numbers, 1))
    if rule == "name":
        return 0.55 + 0.1 * min(f.novel_names, 3)
    return 0.6


_RuleVerdict = Callable[[ClaimFeatures], tuple[Verdict, str, str]]
RULE_VERDICTS: dict[str, _RuleVerdict] = {
    "conflict": lambda f: (
        "contradicted",
        "the evidence states a different number or unit"
        if f.conflict_value is None
        else f"the evidence states another name in its place ({f.conflict_value})",
        "conflict",
    ),
    "negation": lambda f: (
        "contradicted",
        "the evidence says the opposite (negation differs)",
        "best",
    ),
    "direction": lambda f: (
        "contradicted",
        "the evidence says it went the other way (up against down)",
        "best",
    ),
    "causal": lambda f: (
        "contradicted",
        "the evidence states the cause and the effect the other way round",
        "best",
    ),
    "number": lambda f: ("unsupported", _numbers_reason(f), "none"),
    "name": lambda f: ("unsupported", _names_reason(f), "none"),
    "negated": lambda f: (
        "unsupported",
        "the claim says something is not so; no sentence near its evidence negates",
        "none",
    ),
    "evidence": lambda f: ("unsupported", _lacks_reason(f), "none"),
}
"""Each rule's verdict, reason and backing evidence."""


def _numbers_reason(f: ClaimFeatures) -> str:
    n = f.numbers_unmatched
    verb = "appears" if n == 1 else "appear"
    return f"{counted(n, 'number')} of the claim {verb} nowhere in the context"


def _names_reason(f: ClaimFeatures) -> str:
    return "names the context never mentions: " + ", ".join(repr(t) for t in f.novel_terms[:3])


def _lacks_reason(f: ClaimFeatures) -> str:
    shown = ", ".join(repr(m) for m in f.evidence_lacks[:3])
    return f"its closest evidence ({f.closest}) does not contain {shown}"


def aligned_reason(f: ClaimFeatures) -> str:
    return (
        f"aligned with one passage sentence ({f.sentence_score:.0%}: {f.cover_sentence:.0%} of"
        f" its words, {f.pair_sentence:.0%} of its word pairs)"
    )


def covered_reason(f: ClaimFeatures) -> str:
    return (
        f"the context covers {f.score:.0%} of it, across sentences or in other words"
        f" (best sentence {f.cover_sentence:.0%}, with its neighbours {f.cover_window:.0%})"
    )


def weak_reason(f: ClaimFeatures) -> str:
    if f.best is None:
        return "no passage sentence shares its words"
    return (
        f"the context covers only {f.score:.0%} of it; the closest sentence ({f.closest}) has"
        f" {f.cover_sentence:.0%} of its words, the whole context {f.cover_context:.0%}"
    )


def record_reason(f: ClaimFeatures) -> str:
    return (
        f"its {counted(f.numbers, 'number')} and names are the values of the record it aligns"
        f" with ({f.closest})"
    )
