"""What the local judge measures for one claim, and how a distance to a threshold becomes a
confidence: shared by the local judge, its calibration and the judges built on it (semantic).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClaimFeatures:
    """What the judge measured for one claim (exposed for benchmarks and debugging)."""

    cover_sentence: float = 0.0
    """Weighted share of the claim's units in its best single sentence."""
    cover_window: float = 0.0
    """Same, for the best sentence together with its neighbours."""
    cover_context: float = 0.0
    """Same, for the whole context."""
    pair_sentence: float = 0.0
    """Share of the claim's adjacent unit pairs found in the best sentence."""
    pair_context: float = 0.0
    """Share of the claim's adjacent unit pairs found anywhere in the context."""
    n_units: int = 0
    numbers: int = 0
    numbers_unmatched: int = 0
    novel_names: int = 0
    best: int | None = None
    window: list[int] = field(default_factory=list)
    conflict: int | None = None
    """Sentence stating a conflicting quantity, if any."""
    record_values: bool = False
    """The claim restates values of a structured tool output's record: every number and date
    of it is in the record it aligns with, every name in the context, nothing added."""
    conflict_value: str | None = None
    """The field of a structured tool output whose name the claim replaces with another one
    ("carrier is DHL" for a claim naming UPS), when that is the conflict."""
    negation_flip: bool = False
    direction_flip: bool = False
    """The evidence says the quantity went the other way (rose / fell, 增长 / 下降)."""
    causal_flip: bool = False
    """The claim swaps the cause and the effect its evidence states."""
    novel_terms: list[str] = field(default_factory=list)
    """Names (and, for Chinese, nouns) of the claim that the context never mentions."""
    negated: bool = False
    """The claim itself negates."""
    negation_unbacked: bool = False
    """The claim negates while its best evidence and that evidence's neighbours do not."""
    cjk: bool = False
    """The claim is written in Chinese (or another CJK script)."""
    question_share: float = 0.0
    """Share of the claim's distinct units that the question contains (echoes)."""
    evidence_lacks: list[str] = field(default_factory=list)
    """Numbers and names of the claim that its evidence (the best sentence and the neighbours
    it takes, with their passage) lacks: scoring would reject its support, so the judge does."""
    closest: str = ""
    """Where the best sentence is and how it begins, for reasons ("passage 2: 'The tower…'")."""
    best_span: tuple[int, int, int] | None = None
    """``(passage, start, end)`` of the best sentence in its passage."""
    window_span: tuple[int, int, int] | None = None
    """``(passage, start, end)`` of the best sentence with its neighbours (one stretch of its
    passage): the evidence window a model judging entailment reads."""
    candidate_windows: tuple[tuple[int, int, int], ...] = ()
    """The windows of the judge's candidate sentences, ``window_span`` first and then by how
    much of the claim's weight each candidate holds: where a model judging entailment can look
    when the best-aligned window is not the one that states the claim. Empty unless the judge
    is asked for them (``LocalJudge.candidate_windows``)."""

    @property
    def sentence_score(self) -> float:
        """Alignment with the best single sentence: mean of unit and pair coverage."""
        return 0.5 * (self.cover_sentence + self.pair_sentence)

    @property
    def score(self) -> float:
        """Overall alignment: sentence-level and window/context-level coverage, averaged."""
        return 0.25 * (
            self.cover_sentence + self.pair_sentence + self.cover_window + self.pair_context
        )


def margin(value: float, threshold: float) -> float:
    """A verdict's confidence from its score's distance to the threshold that decided it: 0.5
    on the threshold, 1.0 at the end of the scale (a value of 1.0 above it, 0.0 below it)."""
    room = (1.0 - threshold) if value >= threshold else threshold
    return 0.5 + 0.5 * min(1.0, abs(value - threshold) / max(room, 0.2))
