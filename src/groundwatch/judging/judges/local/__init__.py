"""The embedded default judge: deterministic, pure Python, no network, no model download.

How a claim is judged (``docs/judges.md`` has the user-facing version):

1. The passages are cut into sentences once per call and indexed, keeping only units that some
   claim uses: content units (stemmed words, single CJK characters), pairs of units at most one
   unit apart, quantities (numbers with kind, unit and precision; in the word stream each one
   stands as a word naming its kind, so "1.5 km" and "1500 m" read alike), negation. Unit
   weights are smoothed inverse sentence frequencies over the passages themselves; units the
   *question* contains weigh less, because an answer echoing the question is not evidence.
2. Each claim is aligned with its best sentence (and that sentence with its neighbours, for
   claims that combine adjacent sentences) through the inverted index.
3. Rules find contradictions on the aligned evidence: a number that matches nothing while the
   evidence states another value of the same kind (500万 vs 800万, 3个月 vs 3年), judged on the
   clause of the claim that states it; a negation that differs on the aligned clauses; a change
   that goes the other way (rose / fell); cause and effect swapped. A number, a name (or, for
   Chinese with the ``zh`` extra, a noun) the context never mentions makes a claim unsupported.
4. Otherwise a fitted logistic model (:mod:`._calibration`) turns the coverage measurements
   into the probability that the context backs the claim: backed claims are ``supported`` when
   one sentence states them, ``inferred`` when it takes several or other words.

``Claim.confidence`` is the calibrated probability that the verdict is right (for the rules,
their measured precision); a cascade sends the answers with an unsure claim to an LLM judge.
``LocalJudge(calibrated=False)`` keeps the hand-set thresholds of step 4 instead.
"""

from ._judge import (
    DEFAULT_INFER_THRESHOLD,
    DEFAULT_QUESTION_WEIGHT,
    DEFAULT_SUPPORT_THRESHOLD,
    LocalJudge,
)
from ._verdicts import rule_of

__all__ = [
    "DEFAULT_INFER_THRESHOLD",
    "DEFAULT_QUESTION_WEIGHT",
    "DEFAULT_SUPPORT_THRESHOLD",
    "LocalJudge",
    "rule_of",
]
