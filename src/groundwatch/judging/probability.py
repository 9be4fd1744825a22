"""The answer's hallucination probability: how likely a person applying the label policy would
call the answer hallucinated, from what the judge knows.

:func:`~groundwatch.judging.scoring.score` fills ``Evaluation.hallucination_probability`` with
:func:`hallucination_probability`, the same way for every judge (``docs/rates.md``):

* For a judge with a fitted answer model (``_answer_probability.json``, fitted by
  ``training/calibrate_rates.py`` on ``../shared/data``; the local judge, and the semantic judge
  built on it), a small logistic model per script over aggregates of the claims: whether the
  judge flagged the answer, the least and the mean probability that a claim is backed, the
  shares of contradicted and unsupported claims and the number of claims. Calibrated across
  sources: each source measured with a model fitted without it.
* For any other judge (an LLM judge, a cascade, a judge of the user's own), the probability that
  the label policy calls the answer hallucinated if each verdict is right with its confidence,
  independently of the others (:func:`policy_probability`); a claim without a confidence counts
  at :data:`DEFAULT_CONFIDENCE`.

An answer without claims gets the no-claims probability of the judge's model
(:data:`NO_CLAIMS_PROBABILITY` without one); a failed judgement gets ``None``.

Inference is a few additions per claim and one logistic function, in pure Python: it runs for
every evaluation on the worker.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..types import Claim, Label

ANSWER_FEATURES: tuple[str, ...] = (
    "flagged",
    "min_backed",
    "mean_backed",
    "contradicted_share",
    "unsupported_share",
    "log_claims",
    "insufficient_context",
)
"""The answer model's inputs, in order (the data file names them too, and must agree)."""

DEFAULT_CONFIDENCE = 0.8
"""How likely a verdict is right when its judge gives no confidence (an LLM judge's verdict)."""

NO_CLAIMS_PROBABILITY = 0.1
"""An answer without a checkable claim ("I don't know") from a judge without a fitted model:
a refusal is rarely what people call a hallucination."""

_BACKED = frozenset({"supported", "inferred"})


@dataclass(frozen=True)
class AnswerModel:
    """``sigmoid(intercept + coef . answer_vector(...))`` and the no-claims probability."""

    coef: tuple[float, ...]
    intercept: float
    no_claims: float

    def probability(self, x: Sequence[float]) -> float:
        z = self.intercept + sum(c * v for c, v in zip(self.coef, x, strict=True))
        return _sigmoid(z)

    def to_json(self) -> dict[str, Any]:
        return {
            "coef": [round(c, 6) for c in self.coef],
            "intercept": round(self.intercept, 6),
            "no_claims": round(self.no_claims, 6),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnswerModel:
        coef = tuple(float(c) for c in data["coef"])
        if len(coef) != len(ANSWER_FEATURES):
            raise ValueError(
                f"answer model has {len(coef)} coefficients, expected {len(ANSWER_FEATURES)}"
            )
        return cls(
            coef=coef, intercept=float(data["intercept"]), no_claims=float(data["no_claims"])
        )


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def backed_probability(verdict: str, confidence: float | None) -> float:
    """The probability that the context backs a claim, from its verdict and that verdict's
    confidence (the probability that the verdict is right)."""
    k = DEFAULT_CONFIDENCE if confidence is None or math.isnan(confidence) else confidence
    k = min(1.0, max(0.0, k))
    return k if verdict in _BACKED else 1.0 - k


def answer_vector(
    label: Label | str, verdicts: Sequence[str], confidences: Sequence[float | None]
) -> list[float]:
    """The answer model's inputs (:data:`ANSWER_FEATURES` order) for an answer with claims."""
    n = len(verdicts)
    backed = [backed_probability(v, c) for v, c in zip(verdicts, confidences, strict=True)]
    contradicted = sum(v == "contradicted" for v in verdicts)
    unsupported = sum(v == "unsupported" for v in verdicts)
    return [
        1.0 if label == "hallucinated" else 0.0,
        min(backed),
        sum(backed) / n,
        contradicted / n,
        unsupported / n,
        math.log1p(n),
        1.0 if label == "insufficient_context" else 0.0,
    ]


def policy_probability(
    verdicts: Sequence[str],
    confidences: Sequence[float | None],
    min_faithfulness: float,
    min_groundedness: float,
) -> float:
    """P(the policy labels the answer hallucinated) if each verdict is right with its
    confidence, independently: one minus the probability that at most the allowed number of
    claims is contradicted and at least the required number is backed.

    A claim's outcomes: a backed verdict is backed with its confidence, otherwise unsupported;
    an unsupported one unsupported with its confidence, otherwise backed; a contradicted one
    contradicted with its confidence, otherwise backed. Dynamic programming over (backed,
    contradicted) counts; the contradicted count stops at the allowed number plus one, so the
    default policy (no contradiction allowed) costs O(n²) for n claims.
    """
    n = len(verdicts)
    if n == 0:
        return 0.0
    # The comparisons of scoring (faithfulness = 1 - c/n, groundedness = b/n), as counts: at
    # most ``allowed`` contradicted, at least ``need`` backed. Both scores only move one way.
    allowed = sum(1.0 - c / n >= min_faithfulness for c in range(1, n + 1))
    need = next((b for b in range(n + 1) if b / n >= min_groundedness), n + 1)
    # table[c][b]: probability of c contradicted (capped at allowed + 1) and b backed so far.
    table = [[0.0] * (n + 1) for _ in range(allowed + 2)]
    table[0][0] = 1.0
    for i, (verdict, confidence) in enumerate(zip(verdicts, confidences, strict=True)):
        k = DEFAULT_CONFIDENCE if confidence is None or math.isnan(confidence) else confidence
        k = min(1.0, max(0.0, k))
        if verdict in _BACKED:
            p_backed, p_contra = k, 0.0
        elif verdict == "contradicted":
            p_backed, p_contra = 1.0 - k, k
        else:
            p_backed, p_contra = 1.0 - k, 0.0
        p_other = 1.0 - p_backed - p_contra
        new = [[0.0] * (n + 1) for _ in range(allowed + 2)]
        for c in range(allowed + 2):
            row = table[c]
            for b in range(i + 1):
                p = row[b]
                if p == 0.0:
                    continue
                new[c][b + 1] += p * p_backed
                new[c][b] += p * p_other
                new[min(c + 1, allowed + 1)][b] += p * p_contra
        table = new
    grounded = sum(table[c][b] for c in range(allowed + 1) for b in range(need, n + 1))
    return min(1.0, max(0.0, 1.0 - grounded))


@lru_cache(maxsize=1)
def shipped_models() -> dict[str, dict[str, AnswerModel]]:
    """The fitted answer models shipped with the package, by judge name and script."""
    text = resources.files(__package__).joinpath("_answer_probability.json").read_text("utf-8")
    return models_from_json(json.loads(text))


def models_from_json(data: Mapping[str, Any]) -> dict[str, dict[str, AnswerModel]]:
    """Answer models from the data file's format (``training/calibrate_rates.py`` writes it)."""
    if tuple(data["features"]) != ANSWER_FEATURES:
        raise ValueError(f"answer model features {data['features']} differ from {ANSWER_FEATURES}")
    return {
        str(judge): {str(script): AnswerModel.from_json(m) for script, m in scripts.items()}
        for judge, scripts in data["judges"].items()
    }


def hallucination_probability(
    label: Label | str,
    claims: Sequence[Claim],
    *,
    judge: str,
    cjk: bool,
    min_faithfulness: float,
    min_groundedness: float,
    models: Mapping[str, Mapping[str, AnswerModel]] | None = None,
) -> float | None:
    """The probability that a person would call the answer hallucinated (module docstring).

    Args:
        label: the evaluation's label; ``error`` gives ``None``.
        claims: the checked claims.
        judge: the judge's name (``Evaluation.judge``): picks its fitted model, if any.
        cjk: the answer is written in Chinese (or another CJK script): picks the model's script.
        min_faithfulness, min_groundedness: the label policy (for judges without a model).
        models: fitted models by judge and script; the shipped ones by default.
    """
    if label == "error":
        return None
    fitted = (shipped_models() if models is None else models).get(judge)
    model = fitted.get("cjk" if cjk else "latin") if fitted else None
    if not claims:
        return model.no_claims if model is not None else NO_CLAIMS_PROBABILITY
    verdicts = [c.verdict for c in claims]
    confidences = [c.confidence for c in claims]
    if model is not None:
        return model.probability(answer_vector(label, verdicts, confidences))
    return policy_probability(verdicts, confidences, min_faithfulness, min_groundedness)
