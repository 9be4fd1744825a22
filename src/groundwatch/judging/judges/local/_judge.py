"""The local judge itself: its settings, and the steps (index, measure, decide) run for each
claim of an answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....types import Claim, Evidence, Judgement, Passage, Verdict
from ...text.claims import ClaimSpan, split_claims
from ...text.lexical import CJK_CHAR, pairs, units
from ...text.structured import has_structured
from ._calibration import Calibration, default_calibration
from ._features import ClaimFeatures, margin
from ._index import ClaimReading, ContextIndex, ParsedClaim, Sentence, index_for, parse_claim
from ._measure import (
    align,
    candidate_weights,
    cover_set,
    list_windows,
    match_quantities,
    measure_context,
    measure_evidence,
    novel_terms,
)
from ._verdicts import (
    RULE_VERDICTS,
    aligned_reason,
    covered_reason,
    record_reason,
    rule_of,
    uncalibrated_confidence,
    weak_reason,
)

__all__ = [
    "DEFAULT_INFER_THRESHOLD",
    "DEFAULT_QUESTION_WEIGHT",
    "DEFAULT_SUPPORT_THRESHOLD",
    "LocalJudge",
]

DEFAULT_SUPPORT_THRESHOLD = 0.8
"""Alignment with one sentence (``ClaimFeatures.sentence_score``) for ``supported``: the claim's
words and word pairs are nearly all in one sentence."""
DEFAULT_INFER_THRESHOLD = 0.45
"""Alignment with the context (``ClaimFeatures.score``) for ``inferred``; chosen on the dev
data (docs/judges.md, "How the local judge decides")."""
DEFAULT_QUESTION_WEIGHT = 0.5
"""Weight factor of claim units that come from the question (echoes are weak evidence)."""


class LocalJudge:
    """Lexical and numeric alignment of each claim with the passages (the embedded default).

    By default a fitted logistic model turns each claim's measurements into the probability that
    the context backs it (see :mod:`groundwatch.judging.judges.local._calibration`): a claim is
    backed at ``min_probability`` or above, ``supported`` when one sentence states it and
    ``inferred`` otherwise, and ``Claim.confidence`` is the calibrated probability that the
    verdict is right.
    ``calibrated=False`` decides with the two alignment thresholds instead.

    Args:
        support_threshold: alignment with one sentence for ``supported``.
        infer_threshold: overall alignment (sentence, neighbours, whole context) for
            ``inferred``; used only with ``calibrated=False``.
        question_weight: weight of claim words that come from the question, in [0, 1].
        calibrated: decide with the fitted model (default) or with the thresholds.
        min_probability: probability of being backed from which a claim is supported or
            inferred; ``None`` takes the calibration's own threshold.
        calibration: another fitted model (benchmarks refit it per fold); ``None`` takes the
            one shipped with the package.
    """

    name = "local"

    candidate_windows = 0
    """How many evidence windows (the aligned one first) each claim's measurements list in
    ``ClaimFeatures.candidate_windows``, for a judge built on this one that reads more than the
    aligned window; 0, the default, lists none and costs nothing."""

    def __init__(
        self,
        support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
        infer_threshold: float = DEFAULT_INFER_THRESHOLD,
        question_weight: float = DEFAULT_QUESTION_WEIGHT,
        *,
        calibrated: bool = True,
        min_probability: float | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        for label, value in (
            ("support_threshold", support_threshold),
            ("infer_threshold", infer_threshold),
            ("question_weight", question_weight),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{label} must be within [0, 1], got {value!r}")
        self.support_threshold = support_threshold
        self.infer_threshold = min(infer_threshold, support_threshold)
        self.question_weight = question_weight
        self.calibration = (calibration or default_calibration()) if calibrated else None
        if min_probability is not None and not 0.0 <= min_probability <= 1.0:
            raise ValueError(f"min_probability must be within [0, 1], got {min_probability!r}")
        self.min_probability = (
            min_probability
            if min_probability is not None
            else (self.calibration.threshold if self.calibration else 0.5)
        )

    # -- public ---------------------------------------------------------------------------------

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        """Split ``answer`` into claims and judge each against ``contexts``."""
        judged = self.judge_with_features(answer, contexts, question)
        return Judgement(claims=[claim for claim, _ in judged])

    def judge_with_features(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> list[tuple[Claim, ClaimFeatures]]:
        """Each claim with its verdict and the measurements behind it (for judges that build on
        this one, like :class:`~groundwatch.judging.judges.semantic.SemanticJudge`)."""
        spans = split_claims(answer)
        if not spans:
            return []
        dates = has_structured(contexts)
        parsed = [parse_claim(span, dates) for span in spans]
        index = index_for(contexts, parsed)
        q_units = set(units(question)[0]) if question else set()
        return [self._judge_claim(c, index, contexts, q_units, question or "") for c in parsed]

    def features(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> list[ClaimFeatures]:
        """The measurements behind each claim's verdict (for calibration and benchmarks)."""
        dates = has_structured(contexts)
        parsed = [parse_claim(span, dates) for span in split_claims(answer)]
        index = index_for(contexts, parsed)
        q_units = set(units(question)[0]) if question else set()
        return [self._measure(c, index, q_units, question or "") for c in parsed]

    def closest(
        self, claim: str, contexts: Sequence[Passage], question: str | None = None
    ) -> tuple[int, int, int] | None:
        """``(passage, start, end)`` of the passage sentence this judge aligns ``claim`` with
        best: the sentence its reasons call the closest. ``None`` when no sentence shares a
        unit with the claim. For reports that point the reader at it (a pointer, not evidence);
        give the same question as to :meth:`judge`, which weighs the claim's words by it."""
        parsed = parse_claim(ClaimSpan(claim, 0, len(claim)), has_structured(contexts))
        index = index_for(contexts, [parsed])
        q_units = set(units(question)[0]) if question else set()
        return self._measure(parsed, index, q_units, question or "").best_span

    # -- internals ------------------------------------------------------------------------------

    def _measure(
        self, claim: ParsedClaim, index: ContextIndex, q_units: set[str], question: str = ""
    ) -> ClaimFeatures:
        """Everything the judge measures for one claim, in steps: the candidate sentences, the
        claim's numbers, its coverage by the whole context, its novel names, the best-aligned
        sentence and window, and what that evidence says against the claim."""
        found = claim.units
        unique = list(dict.fromkeys(found))
        f = ClaimFeatures(
            n_units=len(found),
            negated=claim.negated,
            cjk=CJK_CHAR.search(claim.span.text) is not None,
            question_share=sum(u in q_units for u in unique) / len(unique) if unique else 0.0,
        )
        weights = {
            u: index.idf(u) * (self.question_weight if u in q_units else 1.0) for u in unique
        }
        total = sum(weights.values())
        claim_pairs = pairs(found)
        acc = candidate_weights(index, unique, weights)
        unmatched, matched = match_quantities(f, claim, index)
        # A sentence that holds the claim's matched numbers is a strong candidate too.
        for _, sid in matched:
            acc[sid] = acc.get(sid, 0.0) + 0.5 * (total / max(len(unique), 1) or 1.0)
        measure_context(f, index, weights, total, claim_pairs)
        f.novel_terms = novel_terms(claim, index, q_units, question, f.cjk)
        f.novel_names = len(f.novel_terms)
        top = align(f, index, acc, weights, total, claim_pairs)
        if f.best is not None:
            measure_evidence(f, ClaimReading(claim, index, weights, unmatched, matched, top))
            if self.candidate_windows:
                list_windows(f, index, top, self.candidate_windows)
        return f

    def decide(self, f: ClaimFeatures) -> tuple[Verdict, str, float, str]:
        """Turn a claim's measurements into ``(verdict, reason, confidence, evidence)``.

        ``evidence`` names what backs the verdict: ``"conflict"`` (the sentence stating another
        value), ``"best"`` (the aligned sentence), ``"cover"`` (the aligned sentence and the
        neighbours that add to it) or ``"none"``. Every reason names what decided it.
        """
        cal = self.calibration
        rule = rule_of(f, calibrated=cal is not None)
        if rule is not None:
            verdict, reason, backing = RULE_VERDICTS[rule](f)
            if cal is not None:
                return verdict, reason, cal.precision_of(rule, f), backing
            return verdict, reason, uncalibrated_confidence(rule, f), backing
        if f.record_values:
            # A record says its values under field names, not in the answer's words ("weighs"
            # for "weight_kg"): the values themselves, all there, are the support.
            return "supported", record_reason(f), 0.8, "cover"
        if cal is None:
            return self._decide_by_thresholds(f)
        p = cal.probability(f)
        if f.best is not None and p >= self.min_probability:
            if f.sentence_score >= self.support_threshold:
                return "supported", aligned_reason(f), p, "cover"
            return "inferred", covered_reason(f), p, "cover"
        if f.n_units == 0 and f.numbers and f.best is not None:
            return "supported", "its numbers are stated in the context", max(p, 0.6), "best"
        return "unsupported", weak_reason(f), 1.0 - p, "none"

    def _decide_by_thresholds(self, f: ClaimFeatures) -> tuple[Verdict, str, float, str]:
        """The uncalibrated rule: alignment thresholds, confidence from the margin."""
        support = f.sentence_score
        infer = f.score
        if f.best is not None and support >= self.support_threshold:
            return (
                "supported",
                aligned_reason(f),
                margin(support, self.support_threshold),
                "cover",
            )
        if f.best is not None and infer >= self.infer_threshold:
            return (
                "inferred",
                covered_reason(f),
                0.25 + 0.5 * margin(infer, self.infer_threshold),
                "cover",
            )
        if f.n_units == 0 and f.numbers and f.best is not None:
            return "supported", "its numbers are stated in the context", 0.6, "best"
        return "unsupported", weak_reason(f), margin(infer, self.infer_threshold), "none"

    def _judge_claim(
        self,
        claim: ParsedClaim,
        index: ContextIndex,
        contexts: Sequence[Passage],
        q_units: set[str],
        question: str,
    ) -> tuple[Claim, ClaimFeatures]:
        f = self._measure(claim, index, q_units, question)
        span = claim.span
        verdict, reason, confidence, backing = self.decide(f)
        sentences = index.sentences
        evidence: list[Evidence] = []
        if backing == "conflict" and f.conflict is not None:
            evidence = [_evidence(sentences[f.conflict], contexts)]
        elif backing == "best" and f.best is not None:
            evidence = [_evidence(sentences[f.best], contexts)]
        elif backing == "cover" and f.best is not None:
            evidence = [_evidence(sentences[i], contexts) for i in cover_set(f, index, claim)]
        claim_out = Claim(
            text=span.text,
            start=span.start,
            end=span.end,
            verdict=verdict,
            evidence=evidence,
            reason=reason,
            confidence=round(max(0.0, min(1.0, confidence)), 3),
        )
        return claim_out, f


def _evidence(sentence: Sentence, contexts: Sequence[Passage]) -> Evidence:
    text = contexts[sentence.passage].text
    return Evidence(
        passage=sentence.passage,
        start=sentence.start,
        end=sentence.end,
        quote=text[sentence.start : sentence.end],
    )
