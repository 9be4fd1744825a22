"""Fit the answer's hallucination probability and measure the judges' error rates, leaving
one source out (issue #39 items 1 and 5; ``docs/rates.md`` explains both).

From the measurements cached by ``training/rates_data.py`` (run it first), for the local judge
and, where the semantic cache exists, the semantic judge:

* **Held-out judge outputs.** Each AttributionBench source (AttributedQA, ExpertQA, LFQA,
  Stanford-GenSearch) is judged with the claim layers (``calibrate_local.fit``, and the semantic
  second look) fitted on everything but that source; UHGEval (the only Chinese source, whose
  claim model cannot be fitted without it) in five folds; FaithBench, never fitted on, with the
  layers fitted on all the rest.
* **The answer model** (``src/groundwatch/judging/_answer_probability.json``): a logistic
  regression per script over ``probability.ANSWER_FEATURES``, fitted on the held-out outputs
  of the fitting sources, each source weighing the same.
* **The reliability table**: each left-out source's answers, their probability from an answer
  model fitted without that source (its training rows judged by claim layers fitted without
  both), in bins of predicted probability against the share people labelled hallucinated.
* **The error rates** (``src/groundwatch/rates/_judge_error_rates.json``): sensitivity and
  specificity of the flag (``label == "hallucinated"``) on each source's held-out outputs; per
  language the median source's, with the spread across sources as low/high. FaithBench
  is measured and printed, never written: it is evaluation-only.

Usage::

    python training/calibrate_rates.py [--cache /tmp/gw-rates-cache.jsonl]
        [--semantic-cache /tmp/gw-rates-cache-semantic.jsonl] [--check] [--no-write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_local import REGULARISATION_C, fit  # noqa: E402
from calibrate_semantic import MatchedRow, fit_second_look, second_look_samples  # noqa: E402
from rates_data import DEFAULT_CACHE, Answer, load_cache  # noqa: E402

from groundwatch.judging.judges.local import LocalJudge  # noqa: E402
from groundwatch.judging.judges.local._calibration import (  # noqa: E402
    Calibration,
    LogisticModel,
    semantic_vector,
)
from groundwatch.judging.probability import (  # noqa: E402
    ANSWER_FEATURES,
    NO_CLAIMS_PROBABILITY,
    AnswerModel,
    answer_vector,
    policy_probability,
)
from groundwatch.judging.scoring import DEFAULT_MIN_GROUNDEDNESS  # noqa: E402

EN_SOURCES = ("AttributedQA", "ExpertQA", "LFQA", "Stanford-GenSearch")
"""The English fitting sources, each left out in turn."""
ZH_SOURCE = "UHGEval"
EVALUATION_SOURCE = "FaithBench"
ZH_FOLDS = 5
DEFAULT_SEMANTIC_CACHE = Path("/tmp/gw-rates-cache-semantic.jsonl")
ANSWER_MODEL = ROOT / "src" / "groundwatch" / "judging" / "_answer_probability.json"
ERROR_RATES = ROOT / "src" / "groundwatch" / "rates" / "_judge_error_rates.json"
NO_CLAIMS_PRIOR_WEIGHT = 10
RELIABILITY_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
# A 90 % two-sided normal quantile, for the single-source language's Wilson bounds.
_Z90 = 1.6448536269514722


@dataclass
class Judged:
    """One answer as a judge decided it with given fitted layers."""

    answer: Answer
    label: str
    verdicts: list[str]
    confidences: list[float]

    @property
    def flagged(self) -> bool:
        return self.label == "hallucinated"

    def vector(self) -> list[float] | None:
        """The answer model's inputs, ``None`` for an answer without claims."""
        if not self.verdicts:
            return None
        return answer_vector(self.label, self.verdicts, self.confidences)


def label_of(answer: Answer, verdicts: Sequence[str]) -> str:
    """The label scoring gives these verdicts (default policy; evidence is the judge's own
    quotes, so none is rejected)."""
    if not verdicts:
        return "no_claims"
    if "supported" not in verdicts and not answer.row.substantive:
        return "insufficient_context"
    if "contradicted" in verdicts:
        return "hallucinated"
    backed = sum(v in ("supported", "inferred") for v in verdicts) / len(verdicts)
    return "grounded" if backed >= DEFAULT_MIN_GROUNDEDNESS else "hallucinated"


def judge_answer(
    answer: Answer, calibration: Calibration, second_look: LogisticModel | None
) -> Judged:
    """Decide an answer's claims from its cached measurements, as ``LocalJudge`` (and, with a
    second-look model, ``SemanticJudge``) does."""
    judge = LocalJudge(calibration=calibration)
    verdicts: list[str] = []
    confidences: list[float] = []
    matches = answer.matches or [None] * len(answer.row.features)
    for f, match in zip(answer.row.features, matches, strict=True):
        verdict, _, confidence, _ = judge.decide(f)
        confidence = round(max(0.0, min(1.0, confidence)), 3)
        if second_look is not None and verdict == "unsupported" and match is not None:
            p = second_look.probability(semantic_vector(f, match))
            verdict, confidence = ("inferred", p) if p >= 0.5 else ("unsupported", 1.0 - p)
            confidence = round(confidence, 3)
        verdicts.append(verdict)
        confidences.append(confidence)
    return Judged(answer, label_of(answer, verdicts), verdicts, confidences)


class Fits:
    """The claim layers fitted without given sources, each fitted once."""

    def __init__(self, answers: Sequence[Answer], semantic: bool) -> None:
        self.answers = answers
        self.semantic = semantic
        self._zh_folds = {
            id(a): i % ZH_FOLDS for i, a in enumerate(x for x in answers if x.source == ZH_SOURCE)
        }

    def fold_of(self, answer: Answer) -> int | None:
        return self._zh_folds.get(id(answer))

    def _fitting(self, without: frozenset[str], zh_fold: int | None) -> list[Answer]:
        return [
            a
            for a in self.answers
            if a.source != EVALUATION_SOURCE
            and a.source not in without
            and (zh_fold is None or self.fold_of(a) != zh_fold)
        ]

    @cache  # noqa: B019 - one Fits per run
    def layers(
        self, without: frozenset[str], zh_fold: int | None = None
    ) -> tuple[Calibration, LogisticModel | None]:
        rows = self._fitting(without, zh_fold)
        calibration = fit([a.row for a in rows])
        if not self.semantic:
            return calibration, None
        matched = [
            MatchedRow(
                faithful=a.row.faithful,
                substantive=a.row.substantive,
                features=a.row.features,
                matches=a.matches,
                claim_labels=a.row.claim_labels,
            )
            for a in rows
            if a.lang == "en" and a.matches is not None
        ]
        return calibration, fit_second_look(second_look_samples(matched, calibration))

    def held_out(self, answer: Answer, also_without: frozenset[str] = frozenset()) -> Judged:
        """``answer`` judged by layers fitted without its source (its UHGEval fold), and
        without ``also_without``."""
        if answer.source == ZH_SOURCE:
            layers = self.layers(also_without, self.fold_of(answer))
        elif answer.source == EVALUATION_SOURCE:
            layers = self.layers(also_without)
        else:
            layers = self.layers(also_without | {answer.source})
        return judge_answer(answer, *layers)


def fit_answer_model(judged: Sequence[Judged]) -> AnswerModel:
    """The logistic answer model on ``judged`` (each source weighing the same) and the
    smoothed hallucinated share of their answers without claims."""
    from sklearn.linear_model import LogisticRegression

    xs: list[list[float]] = []
    ys: list[int] = []
    sources: list[str] = []
    none_h = none_n = 0
    for j in judged:
        x = j.vector()
        if x is None:
            none_n += 1
            none_h += j.answer.hallucinated
            continue
        xs.append(x)
        ys.append(int(j.answer.hallucinated))
        sources.append(j.answer.source)
    counts = {s: sources.count(s) for s in set(sources)}
    weights = [len(sources) / (len(counts) * counts[s]) for s in sources]
    model = LogisticRegression(C=REGULARISATION_C, max_iter=5000)
    model.fit(xs, ys, sample_weight=weights)
    return AnswerModel(
        coef=tuple(float(c) for c in model.coef_[0]),
        intercept=float(model.intercept_[0]),
        # Few answers lack claims: their share is shrunk towards the prior of judges without
        # a model, as if NO_CLAIMS_PRIOR_WEIGHT more answers had been seen at that prior.
        no_claims=(none_h + NO_CLAIMS_PRIOR_WEIGHT * NO_CLAIMS_PROBABILITY)
        / (none_n + NO_CLAIMS_PRIOR_WEIGHT),
    )


def probability_of(model: AnswerModel, judged: Judged) -> float:
    x = judged.vector()
    return model.no_claims if x is None else model.probability(x)


@dataclass
class HeldOut:
    """One answer's judge outputs from models never fitted on its source (its fold)."""

    source: str
    lang: str
    hallucinated: bool
    flagged: bool
    probability: float
    policy: float = 0.0
    """The probability judges without an answer model get (``policy_probability``), for
    comparison."""


def held_out_outputs(fits: Fits) -> tuple[list[HeldOut], dict[str, AnswerModel]]:
    """Every answer's held-out flag and probability, and the answer models to ship."""
    answers = fits.answers
    out: list[HeldOut] = []

    def keep(judged: Judged, model: AnswerModel) -> None:
        a = judged.answer
        policy = (
            policy_probability(judged.verdicts, judged.confidences, 1.0, DEFAULT_MIN_GROUNDEDNESS)
            if judged.verdicts
            else NO_CLAIMS_PROBABILITY
        )
        probability = probability_of(model, judged)
        out.append(HeldOut(a.source, a.lang, a.hallucinated, judged.flagged, probability, policy))

    en_fit = [a for a in answers if a.source in EN_SOURCES]
    for left in EN_SOURCES:
        train = [fits.held_out(a, frozenset({left})) for a in en_fit if a.source != left]
        model = fit_answer_model(train)
        for a in answers:
            if a.source == left:
                keep(fits.held_out(a), model)
    latin = fit_answer_model([fits.held_out(a) for a in en_fit])
    for a in answers:
        if a.source == EVALUATION_SOURCE:
            keep(fits.held_out(a), latin)
    zh = [a for a in answers if a.source == ZH_SOURCE]
    zh_judged = [fits.held_out(a) for a in zh]
    for fold in range(ZH_FOLDS):
        model = fit_answer_model([j for j in zh_judged if fits.fold_of(j.answer) != fold])
        for j in zh_judged:
            if fits.fold_of(j.answer) == fold:
                keep(j, model)
    cjk = fit_answer_model(zh_judged)
    return out, {"latin": latin, "cjk": cjk}


# --- measurements ------------------------------------------------------------------------------


def sensitivity_specificity(rows: Iterable[HeldOut]) -> tuple[float, float, int, int]:
    """(sensitivity, specificity, hallucinated answers, faithful answers) of the flag."""
    tp = pos = tn = neg = 0
    for r in rows:
        if r.hallucinated:
            pos += 1
            tp += r.flagged
        else:
            neg += 1
            tn += not r.flagged
    return tp / max(pos, 1), tn / max(neg, 1), pos, neg


def wilson(successes: float, n: int, z: float = _Z90) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def error_rates_entry(rows: Sequence[HeldOut], sources: Sequence[str]) -> dict[str, Any]:
    """One judge-and-language entry of ``_judge_error_rates.json``: the median of the sources'
    rates, low/high their spread (a single source: its rates and its 90 % Wilson bounds)."""
    per: dict[str, Any] = {}
    for source in sources:
        se, sp, pos, neg = sensitivity_specificity(r for r in rows if r.source == source)
        per[source] = {
            "sensitivity": round(se, 4),
            "specificity": round(sp, 4),
            "labelled": pos + neg,
        }
    pooled = [r for r in rows if r.source in sources]
    se, sp, pos, neg = sensitivity_specificity(pooled)
    if len(sources) > 1:
        # The point is the median source, not the pool: one large source far from the others
        # (ExpertQA's specificity is 0.26, the others' 0.65-0.71) would drag a pooled rate to
        # where no source is, and with it every Rogan-Gladen estimate; low/high still span it.
        se = statistics.median(v["sensitivity"] for v in per.values())
        sp = statistics.median(v["specificity"] for v in per.values())
        se_lo = min(v["sensitivity"] for v in per.values())
        se_hi = max(v["sensitivity"] for v in per.values())
        sp_lo = min(v["specificity"] for v in per.values())
        sp_hi = max(v["specificity"] for v in per.values())
    else:
        se_lo, se_hi = wilson(se * pos, pos)
        sp_lo, sp_hi = wilson(sp * neg, neg)
    return {
        "sensitivity": round(se, 4),
        "specificity": round(sp, 4),
        "sensitivity_low": round(min(se_lo, se), 4),
        "sensitivity_high": round(max(se_hi, se), 4),
        "specificity_low": round(min(sp_lo, sp), 4),
        "specificity_high": round(max(sp_hi, sp), 4),
        "labelled": pos + neg,
        "sources": per,
    }


def auc(rows: Sequence[HeldOut], policy: bool = False) -> float:
    """Area under the ROC curve of the probability (ties count half); of the policy rule's
    probability with ``policy``."""
    pos = [r.policy if policy else r.probability for r in rows if r.hallucinated]
    neg = [r.policy if policy else r.probability for r in rows if not r.hallucinated]
    if not pos or not neg:
        return float("nan")
    ranked = sorted([(p, 1) for p in pos] + [(p, 0) for p in neg])
    rank_sum = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # 1-based average rank of the tie group
        rank_sum += mid * sum(flag for _, flag in ranked[i:j])
        i = j
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def reliability(rows: Sequence[HeldOut]) -> list[tuple[str, int, float, float]]:
    """(bin, answers, mean predicted, share hallucinated) per probability bin."""
    out = []
    edges = RELIABILITY_BINS
    for lo, hi in itertools.pairwise(edges):
        inside = [
            r for r in rows if lo <= r.probability < hi or (hi == 1.0 and r.probability == 1.0)
        ]
        if not inside:
            out.append((f"{lo:.1f}-{hi:.1f}", 0, float("nan"), float("nan")))
            continue
        pred = sum(r.probability for r in inside) / len(inside)
        obs = sum(r.hallucinated for r in inside) / len(inside)
        out.append((f"{lo:.1f}-{hi:.1f}", len(inside), pred, obs))
    return out


def report(
    name: str, rows: Sequence[HeldOut], sources: Sequence[str], say: Callable[[str], None]
) -> None:
    """The reliability table and the per-source figures, as Markdown."""
    say(f"\n#### {name}: reliability on each left-out source\n")
    say(
        "| source | answers | AUC | AUC, policy rule | Brier | mean predicted | "
        "share hallucinated | "
        + " | ".join(f"{lo:.1f}–{hi:.1f}" for lo, hi in itertools.pairwise(RELIABILITY_BINS))
        + " |"
    )
    say("|" + "---|" * (7 + len(RELIABILITY_BINS) - 1))
    for source in sources:
        part = [r for r in rows if r.source == source]
        brier = sum((r.probability - r.hallucinated) ** 2 for r in part) / len(part)
        mean_p = sum(r.probability for r in part) / len(part)
        share = sum(r.hallucinated for r in part) / len(part)
        cells = [
            "–" if n == 0 else f"{pred:.2f} → {obs:.2f} ({n})"
            for _, n, pred, obs in reliability(part)
        ]
        say(
            f"| {source} | {len(part)} | {auc(part):.3f} | {auc(part, policy=True):.3f} | "
            f"{brier:.3f} | {mean_p:.3f} | "
            f"{share:.3f} | " + " | ".join(cells) + " |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--semantic-cache", type=Path, default=DEFAULT_SEMANTIC_CACHE)
    parser.add_argument("--check", action="store_true", help="compare with the shipped files")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    judges: dict[str, list[Answer]] = {"local": load_cache(args.cache)}
    if args.semantic_cache.exists():
        judges["semantic"] = load_cache(args.semantic_cache)
    else:
        print(f"no {args.semantic_cache}: the semantic judge is not measured")
    models: dict[str, Any] = {}
    rates: dict[str, Any] = {}
    sources = (*EN_SOURCES, EVALUATION_SOURCE, ZH_SOURCE)
    for name, answers in judges.items():
        # The semantic cache's English answers carry the meaning match; its Chinese ones are
        # judged as the local judge judges them (the second look reads English only).
        fits = Fits(answers, semantic=name == "semantic")
        rows, shipped = held_out_outputs(fits)
        models[name] = {script: m.to_json() for script, m in shipped.items()}
        rates[name] = {
            "en": error_rates_entry(rows, EN_SOURCES),
            "zh": error_rates_entry(rows, (ZH_SOURCE,)),
        }
        report(name, rows, sources, print)
        se, sp, pos, neg = sensitivity_specificity(r for r in rows if r.source == EVALUATION_SOURCE)
        for language in ("en", "zh"):
            entry = {k: v for k, v in rates[name][language].items() if k != "sources"}
            print(f"{name} error rates, {language}: {json.dumps(entry)}")
        print(
            f"{name} on FaithBench (evaluation only, not written): sensitivity {se:.3f}, "
            f"specificity {sp:.3f} ({pos + neg} answers)"
        )
    model_text = (
        json.dumps(
            {
                "version": 1,
                "features": list(ANSWER_FEATURES),
                "judges": models,
                "meta": {
                    "fitted_on": [*EN_SOURCES, ZH_SOURCE],
                    "script": "training/calibrate_rates.py",
                },
            },
            indent=2,
        )
        + "\n"
    )
    rates_text = (
        json.dumps(
            {
                "measured": (
                    "Sensitivity and specificity of the flag (label hallucinated) on "
                    "human-labelled answers of ../shared/data, each source judged by layers "
                    "fitted without it (UHGEval in five folds); the median of the sources, "
                    "low/high their spread (a single source: its 90 % Wilson bounds); "
                    "training/calibrate_rates.py."
                ),
                "judges": rates,
            },
            indent=2,
        )
        + "\n"
    )
    if args.check:
        same = (
            ANSWER_MODEL.read_text("utf-8") == model_text
            and ERROR_RATES.read_text("utf-8") == rates_text
        )
        print("shipped files are up to date" if same else "shipped files differ from a refit")
        return 0 if same else 1
    if not args.no_write:
        ANSWER_MODEL.write_text(model_text, encoding="utf-8")
        ERROR_RATES.write_text(rates_text, encoding="utf-8")
        print(f"wrote {ANSWER_MODEL} and {ERROR_RATES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
