"""The local judge's fitted decision layer: from a claim's measurements to a probability.

``LocalJudge`` measures each claim (coverage of its words and word pairs by one sentence, by the
sentence and its neighbours, by the whole context; numbers; names). A small logistic model per
script (English words, Chinese characters), fitted on the labelled dev data by
``training/calibrate_local.py``, turns those measurements into the probability that the context
backs the claim. The coefficients ship as a data file
(``_calibration.json``) beside this module; inference is a dot product in pure Python.

The rules stay rules: contradictions (a conflicting number, a flipped negation, direction or
cause) and rejections (a number or a name the context lacks, a negation nothing backs) rest on
evidence the model does not weigh. Their confidence is the share of such verdicts that were
right on the fitting data, per rule and script (``rule_precision``).
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
    from ._features import ClaimFeatures

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

RULES: tuple[str, ...] = (
    "conflict",
    "negation",
    "direction",
    "causal",
    "number",
    "name",
    "negated",
    "evidence",
)
"""The rules whose verdicts bypass the model: four contradictions, four rejections."""

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

    def expect(self, names: tuple[str, ...]) -> LogisticModel:
        """This model, checked to take exactly ``names`` as inputs."""
        if len(self.coef) != len(names):
            raise ValueError(
                f"calibration has {len(self.coef)} coefficients, the judge computes "
                f"{len(names)} features"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        return {"coef": [round(c, 6) for c in self.coef], "intercept": round(self.intercept, 6)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LogisticModel:
        return cls(coef=tuple(float(c) for c in data["coef"]), intercept=float(data["intercept"]))

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
    rule_precision: Mapping[str, float] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [s for s in SCRIPTS if s not in self.models]
        if missing:
            raise ValueError(f"calibration lacks a model for {', '.join(missing)}")
        for model in self.models.values():
            model.expect(FEATURES)

    def probability(self, f: ClaimFeatures) -> float:
        """Probability that the context backs the claim."""
        return self.models[script_of(f)].probability(feature_vector(f))

    def precision_of(self, rule: str, f: ClaimFeatures) -> float:
        """How often a verdict of ``rule`` was right on the fitting data, for claims of the
        script of ``f`` (all scripts together where that script saw too few)."""
        key = f"{rule}:{script_of(f)}"
        return float(self.rule_precision.get(key, self.rule_precision.get(rule, 0.75)))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 2,
            "features": list(FEATURES),
            "models": {script: m.to_json() for script, m in self.models.items()},
            "threshold": self.threshold,
            "rule_precision": {k: round(v, 4) for k, v in self.rule_precision.items()},
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        names = tuple(data["features"])
        if names != FEATURES:
            raise ValueError(f"calibration features {names} differ from the judge's {FEATURES}")
        return cls(
            models={str(k): LogisticModel.from_json(m) for k, m in data["models"].items()},
            threshold=float(data.get("threshold", 0.5)),
            rule_precision={str(k): float(v) for k, v in data.get("rule_precision", {}).items()},
            meta=dict(data.get("meta", {})),
        )


@lru_cache(maxsize=1)
def default_calibration() -> Calibration:
    """The calibration shipped with the package (``_calibration.json``)."""
    return Calibration.from_json(_load("_calibration.json"))


SEMANTIC_FEATURES: tuple[str, ...] = (*FEATURES, "meaning_match")
"""Inputs of ``SemanticJudge``'s second-look model: the lexical ones and the meaning match."""


def semantic_vector(f: ClaimFeatures, meaning_match: float) -> list[float]:
    """The second-look model's inputs for one claim, in :data:`SEMANTIC_FEATURES` order."""
    return [*feature_vector(f), meaning_match]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath(name).read_text("utf-8")
    )
    return data


@lru_cache(maxsize=1)
def default_semantic_model() -> LogisticModel:
    """``SemanticJudge``'s second-look model shipped with the package
    (``_calibration_semantic.json``, fitted by ``training/calibrate_semantic.py``): the
    probability that the context backs a claim ``LocalJudge`` left unsupported."""
    data = _load("_calibration_semantic.json")
    if tuple(data["features"]) != SEMANTIC_FEATURES:
        raise ValueError("semantic calibration features differ from the judge's")
    return LogisticModel.from_json(data["model"]).expect(SEMANTIC_FEATURES)
