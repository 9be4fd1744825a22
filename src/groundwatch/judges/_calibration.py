"""The local judge's fitted decision layer: from a claim's measurements to a probability.

``LocalJudge`` measures each claim (coverage of its words and word pairs by one sentence, by the
sentence and its neighbours, by the whole context; numbers; names). A small logistic model per
script (English words, Chinese characters), fitted on the labelled dev data by
``training/calibrate_local.py``, turns those measurements into the probability that the context
backs the claim. The coefficients ship as a data file
(``_calibration.json``) beside this module; inference is a dot product in pure Python.

Contradictions (a conflicting number, a flipped negation, direction or cause) stay rules: they
rest on evidence the model does not see. Their confidence is the share of such verdicts that
were right on the fitting data (``contradiction_precision``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .local import ClaimFeatures

FEATURES: tuple[str, ...] = (
    "cover_sentence",
    "pair_sentence",
    "cover_window",
    "cover_context",
    "pair_context",
    "numbers_matched",
    "numbers_unmatched",
    "novel_names",
    "log_units",
    "question_share",
    "negated",
    "little_context_cover",
    "little_sentence_cover",
)
"""The model's inputs, in order (the data file names them too, and must agree)."""

CONTRADICTION_RULES: tuple[str, ...] = ("conflict", "negation", "direction", "causal")

SCRIPTS: tuple[str, ...] = ("latin", "cjk")
"""One model per script: Chinese character units and English word units measure on different
scales, and each model is fitted on the dev set of its language."""


def script_of(f: ClaimFeatures) -> str:
    return "cjk" if f.cjk else "latin"


def feature_vector(f: ClaimFeatures) -> list[float]:
    """The model's inputs for one claim, in :data:`FEATURES` order."""
    return [
        f.cover_sentence,
        f.pair_sentence,
        f.cover_window,
        f.cover_context,
        f.pair_context,
        1.0 if f.numbers > f.numbers_unmatched else 0.0,
        f.numbers_unmatched / f.numbers if f.numbers else 0.0,
        float(min(f.novel_names, 3)),
        math.log1p(f.n_units),
        f.question_share,
        1.0 if f.negated else 0.0,
        # Hinges let the linear model be surer where almost nothing of the claim is there.
        max(0.0, 0.4 - f.cover_context),
        max(0.0, 0.4 - f.cover_sentence),
    ]


@dataclass(frozen=True)
class LogisticModel:
    """``sigmoid(intercept + coef . features)``."""

    coef: tuple[float, ...]
    intercept: float

    def __post_init__(self) -> None:
        if len(self.coef) != len(FEATURES):
            raise ValueError(
                f"calibration has {len(self.coef)} coefficients, the judge computes "
                f"{len(FEATURES)} features"
            )

    def probability(self, x: list[float]) -> float:
        z = self.intercept + sum(c * v for c, v in zip(self.coef, x, strict=True))
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


@dataclass(frozen=True)
class Calibration:
    """The per-script logistic models and the rules' measured precision."""

    models: Mapping[str, LogisticModel]
    threshold: float = 0.5
    contradiction_precision: Mapping[str, float] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [s for s in SCRIPTS if s not in self.models]
        if missing:
            raise ValueError(f"calibration lacks a model for {', '.join(missing)}")

    def probability(self, f: ClaimFeatures) -> float:
        """Probability that the context backs the claim."""
        return self.models[script_of(f)].probability(feature_vector(f))

    def precision_of(self, rule: str) -> float:
        """How often a contradiction found by ``rule`` was right on the fitting data."""
        return float(self.contradiction_precision.get(rule, 0.75))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 2,
            "features": list(FEATURES),
            "models": {
                script: {
                    "coef": [round(c, 6) for c in m.coef],
                    "intercept": round(m.intercept, 6),
                }
                for script, m in self.models.items()
            },
            "threshold": self.threshold,
            "contradiction_precision": {
                k: round(v, 4) for k, v in self.contradiction_precision.items()
            },
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        names = tuple(data["features"])
        if names != FEATURES:
            raise ValueError(f"calibration features {names} differ from the judge's {FEATURES}")
        return cls(
            models={
                str(script): LogisticModel(
                    coef=tuple(float(c) for c in m["coef"]), intercept=float(m["intercept"])
                )
                for script, m in data["models"].items()
            },
            threshold=float(data.get("threshold", 0.5)),
            contradiction_precision={
                str(k): float(v) for k, v in data.get("contradiction_precision", {}).items()
            },
            meta=dict(data.get("meta", {})),
        )


@lru_cache(maxsize=1)
def default_calibration() -> Calibration:
    """The calibration shipped with the package (``_calibration.json``)."""
    text = resources.files(__package__).joinpath("_calibration.json").read_text("utf-8")
    return Calibration.from_json(json.loads(text))
