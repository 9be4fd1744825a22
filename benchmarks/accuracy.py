"""Accuracy of the local judge on the labelled dev sets, next to a content-word-overlap baseline.

Printed in one run, for each dev set in ``../shared/data``:

* balanced accuracy (BA) of grounded-vs-not with the recall of each class, from rows the
  decision layer was not fitted on: 5-fold for the sets it is fitted on (AttributionBench,
  UHGEval: fit on four folds of both, measure on the fifth), the shipped model for FaithBench
  (never fitted on);
* ``thresholds``: the same measurements decided by the hand-set thresholds instead of the
  fitted layer (``LocalJudge(calibrated=False)``, nothing fitted);
* the overlap baseline: share of the answer's content words found in the context, its
  threshold chosen on four folds and measured on the fifth;
* the same per ``source_dataset`` of AttributionBench;
* calibration: expected calibration error (ECE) of ``Claim.confidence`` against the claim
  labels the annotations give, and a reliability table;
* selective judging: BA against coverage, the share of answers decided locally when the judge
  abstains on answers whose least confident claim is below a threshold (what ``CascadeJudge``
  escalates);
* the hand-written Chinese paraphrase-vs-hallucination set of the tests;
* with ``--ceiling``, what learned combiners of every signal reach on AttributionBench (k-fold,
  never shipped; FaithBench is not fitted on, even for this).

Label mapping: ``grounded`` and ``no_claims`` count as "grounded"; ``hallucinated`` and
``insufficient_context`` as "not grounded". Dev rows are "faithful" or "hallucinated".

Usage::

    python benchmarks/accuracy.py [--data ../shared/data] [--limit N] [--folds 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))
sys.path.insert(0, str(ROOT))

from calibrate_local import FIT_SETS, Row, default_data_dir, fit, load_rows, measure  # noqa: E402

import groundwatch as gw  # noqa: E402
from groundwatch.judging.judges.local import LocalJudge  # noqa: E402
from groundwatch.judging.judges.local._calibration import (  # noqa: E402
    Calibration,
    default_calibration,
    feature_vector,
)
from groundwatch.judging.scoring import DEFAULT_MIN_GROUNDEDNESS  # noqa: E402
from groundwatch.judging.text.lexical import content_words  # noqa: E402

DATASETS = ("attributionbench_dev", "faithbench_dev", "uhgeval_zh_dev")
COVERAGE_THRESHOLDS = (0.0, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
RELIABILITY_BINS = 5


def rates(preds: Sequence[bool], golds: Sequence[bool]) -> tuple[float, float, float]:
    """(balanced accuracy, recall of grounded, recall of hallucinated)."""
    pos = [p for p, g in zip(preds, golds, strict=True) if g]
    neg = [p for p, g in zip(preds, golds, strict=True) if not g]
    r_pos = sum(pos) / len(pos) if pos else 0.0
    r_neg = sum(not p for p in neg) / len(neg) if neg else 0.0
    if not pos or not neg:
        return (r_pos if pos else r_neg), r_pos, r_neg
    return (r_pos + r_neg) / 2, r_pos, r_neg


def best_threshold(scores: Sequence[float], golds: Sequence[bool]) -> float:
    """The threshold on ``score >= t`` with the best balanced accuracy."""
    best_t, best_ba = 0.0, -1.0
    for t in sorted(set(scores)):
        ba = rates([s >= t for s in scores], golds)[0]
        if ba > best_ba:
            best_t, best_ba = t, ba
    return best_t


def overlap_score(answer: str, contexts: Sequence[str]) -> float:
    words = content_words(answer)
    if not words:
        return 1.0
    ctx = content_words("\n".join(contexts))
    return len(words & ctx) / len(words)


def folds_of(n: int, k: int, seed: int = 0) -> list[int]:
    """A fold number for each of ``n`` rows (shuffled, balanced)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold = [0] * n
    for rank, i in enumerate(order):
        fold[i] = rank % k
    return fold


class Judged:
    """One answer as the judge decided it: label, claim verdicts and confidences."""

    def __init__(self, row: Row, calibration: Calibration | None) -> None:
        judge = LocalJudge(calibrated=calibration is not None, calibration=calibration)
        decided = [judge.decide(f) for f in row.features]
        self.verdicts = [d[0] for d in decided]
        self.confidences = [d[2] for d in decided]
        self.row = row
        self.grounded = self._grounded()
        # The answer is as sure as its least sure claim (the cascade's rule).
        self.confidence = min(self.confidences, default=1.0)

    def _grounded(self) -> bool:
        v = self.verdicts
        if not v:
            return True  # no_claims
        if not self.row.substantive and "supported" not in v:
            return False  # insufficient_context
        if "contradicted" in v:
            return False
        return sum(x in ("supported", "inferred") for x in v) / len(v) >= DEFAULT_MIN_GROUNDEDNESS

    def claim_outcomes(self) -> list[tuple[float, bool]]:
        """(confidence, verdict right?) for each claim with a known label."""
        out = []
        for verdict, conf, label in zip(
            self.verdicts, self.confidences, self.row.claim_labels, strict=True
        ):
            if label is None:
                continue
            backed = verdict in ("supported", "inferred")
            out.append((conf, backed == label))
        return out


def held_out(
    rows_by_set: dict[str, list[Row]],
    k: int,
    fitter: Callable[[list[Row]], Calibration],
    seed: int = 0,
) -> dict[str, list[Judged]]:
    """Each row judged by a model that was not fitted on it."""
    out: dict[str, list[Judged]] = {}
    fitted = [name for name in FIT_SETS if name in rows_by_set]
    folds = {name: folds_of(len(rows_by_set[name]), k, seed) for name in fitted}
    judged: dict[str, list[Judged | None]] = {
        name: [None] * len(rows_by_set[name]) for name in fitted
    }
    for fold in range(k):
        train = [
            r
            for name in fitted
            for r, f in zip(rows_by_set[name], folds[name], strict=True)
            if f != fold
        ]
        model = fitter(train)
        for name in fitted:
            for i, (r, f) in enumerate(zip(rows_by_set[name], folds[name], strict=True)):
                if f == fold:
                    judged[name][i] = Judged(r, model)
    for name in fitted:
        out[name] = [j for j in judged[name] if j is not None]
    shipped = default_calibration()
    for name, rows in rows_by_set.items():
        if name not in out:
            out[name] = [Judged(r, shipped) for r in rows]
    return out


def ece(outcomes: Sequence[tuple[float, bool]], bins: int = 10) -> float:
    """Expected calibration error: mean |accuracy - confidence| over equal-width bins."""
    if not outcomes:
        return float("nan")
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        part = [(c, ok) for c, ok in outcomes if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if part:
            conf = sum(c for c, _ in part) / len(part)
            acc = sum(ok for _, ok in part) / len(part)
            total += len(part) / len(outcomes) * abs(acc - conf)
    return total


def reliability(outcomes: Sequence[tuple[float, bool]], bins: int) -> list[tuple[str, int, float]]:
    lo0 = 0.5  # verdict confidences are probabilities of the chosen side: >= 0.5 mostly
    out = []
    for b in range(bins):
        lo = lo0 + (1 - lo0) * b / bins
        hi = lo0 + (1 - lo0) * (b + 1) / bins
        part = [
            ok
            for c, ok in outcomes
            if (lo <= c < hi) or (b == bins - 1 and c >= hi) or (b == 0 and c < lo)
        ]
        label = f"{lo:.1f}-{hi:.1f}"
        out.append((label, len(part), sum(part) / len(part) if part else float("nan")))
    return out


def overlap_kfold(rows: list[dict[str, Any]], k: int, seed: int = 0) -> list[bool]:
    """The baseline's prediction for each row, its threshold chosen on the other folds."""
    scores = [overlap_score(r["answer"], r["context"]) for r in rows]
    golds = [r["label"] == "faithful" for r in rows]
    folds = folds_of(len(rows), k, seed)
    preds = [False] * len(rows)
    for fold in range(k):
        train = [i for i in range(len(rows)) if folds[i] != fold]
        t = best_threshold([scores[i] for i in train], [golds[i] for i in train])
        for i in range(len(rows)):
            if folds[i] == fold:
                preds[i] = scores[i] >= t
    return preds


def ceiling(rows: list[Row], k: int, repeats: int) -> dict[str, float]:
    """What a learned combination of every signal the judge computes reaches on one set:
    answer-level features (min and mean over the claims of the model's inputs and the rule
    flags), a class-balanced logistic regression and gradient boosting, k-fold. Not shipped:
    it bounds what a better decision over these signals could gain."""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    def vector(f: Any) -> list[float]:
        flags = [f.conflict is not None, f.negation_flip, f.direction_flip, f.causal_flip]
        return [*feature_vector(f), *(float(x) for x in flags), float(bool(f.evidence_lacks))]

    width = len(vector(rows[0].features[0])) if rows and rows[0].features else 1
    xs = []
    for r in rows:
        claims = np.array([vector(f) for f in r.features]) if r.features else np.ones((1, width))
        xs.append([*claims.min(0), *claims.mean(0)])
    x, y = np.array(xs), np.array([r.faithful for r in rows])
    models: dict[str, Callable[[], Any]] = {
        "logistic": lambda: LogisticRegression(max_iter=5000, class_weight="balanced"),
        "gradient boosting": lambda: HistGradientBoostingClassifier(
            max_iter=200, learning_rate=0.05, class_weight="balanced"
        ),
    }
    out = {}
    for name, make in models.items():
        scores = []
        for seed in range(repeats):
            fold = np.array(folds_of(len(rows), k, seed))
            pred = np.zeros(len(y), dtype=bool)
            for part in range(k):
                model = make().fit(x[fold != part], y[fold != part])
                pred[fold == part] = model.predict(x[fold == part])
            scores.append(rates(pred.tolist(), y.tolist())[0])
        out[name] = sum(scores) / len(scores)
    return out


def chinese_set() -> tuple[float, int]:
    from testkit.zh_cases import CASES, PASSAGES

    preds, golds = [], []
    for key, answer, faithful in CASES:
        ev = gw.evaluate(answer, [PASSAGES[key]])
        preds.append(ev.label in ("grounded", "no_claims"))
        golds.append(faithful)
    return rates(preds, golds)[0], len(CASES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--limit", type=int, default=None, help="rows per set (quick runs)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="k-fold shuffles to average")
    parser.add_argument(
        "--ceiling", action="store_true", help="also fit learned combiners per set (not shipped)"
    )
    args = parser.parse_args(argv)
    raw: dict[str, list[dict[str, Any]]] = {}
    rows_by_set: dict[str, list[Row]] = {}
    shipped: dict[str, tuple[tuple[float, float, float], float]] = {}
    for name in DATASETS:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: missing {path}")
            continue
        raw[name] = load_rows(path, args.limit)
        rows_by_set[name] = measure(name, raw[name])
        start = time.perf_counter()
        preds = [
            gw.evaluate(r["answer"], r["context"], question=r.get("question") or None).label
            in ("grounded", "no_claims")
            for r in raw[name]
        ]
        per_s = len(preds) / (time.perf_counter() - start)
        golds = [r["label"] == "faithful" for r in raw[name]]
        shipped[name] = (rates(preds, golds), per_s)
    repeats = [held_out(rows_by_set, args.folds, fit, seed) for seed in range(args.repeats)]
    baselines = [
        {name: overlap_kfold(rows, args.folds, seed) for name, rows in raw.items()}
        for seed in range(args.repeats)
    ]
    judged = repeats[0]

    print(
        f"BA = balanced accuracy of grounded vs not; R+ / R- = recall of faithful / hallucinated."
        f"\nheld out: {args.folds}-fold, mean of {args.repeats} shuffles, for {', '.join(FIT_SETS)}"
        " (the decision layer is fitted on them); FaithBench is never fitted on. 'shipped' is the"
        " packaged model on every row (in-sample where it was fitted)."
    )
    print()
    header = (
        f"{'dataset':<38}{'n':>6}  {'held-out BA':>11} {'R+':>6} {'R-':>6}"
        f"  {'overlap BA':>10} {'R+':>6} {'R-':>6}  {'thresholds':>10}"
        f"  {'shipped BA':>10} {'answers/s':>9}"
    )
    print(header)
    print("-" * len(header))

    def mean_rates(parts: list[tuple[list[bool], list[bool]]]) -> tuple[float, float, float]:
        got = [rates(p, g) for p, g in parts]
        return (
            sum(x[0] for x in got) / len(got),
            sum(x[1] for x in got) / len(got),
            sum(x[2] for x in got) / len(got),
        )

    def line(name: str, idx: list[int] | None, extra: str = "") -> None:
        judge_parts, base_parts = [], []
        for rep, base in zip(repeats, baselines, strict=True):
            js = rep[dataset] if idx is None else [rep[dataset][i] for i in idx]
            bl = base[dataset] if idx is None else [base[dataset][i] for i in idx]
            golds = [j.row.faithful for j in js]
            judge_parts.append(([j.grounded for j in js], golds))
            base_parts.append((bl, golds))
        ba, rp, rn = mean_rates(judge_parts)
        oba, orp, orn = mean_rates(base_parts)
        n = len(judge_parts[0][1])
        print(
            f"{name:<38}{n:>6}  {ba:>11.3f} {rp:>6.3f} {rn:>6.3f}"
            f"  {oba:>10.3f} {orp:>6.3f} {orn:>6.3f}{extra}"
        )

    for dataset, js in judged.items():
        (sba, _, _), per_s = shipped[dataset]
        rule = [Judged(j.row, None) for j in js]
        tba = rates([j.grounded for j in rule], [j.row.faithful for j in rule])[0]
        line(dataset, None, f"  {tba:>10.3f}  {sba:>10.3f} {per_s:>9.0f}")
        if dataset == "attributionbench_dev":
            # One setting for the whole set, as for the judge; sliced by source.
            for source in sorted({j.row.source for j in js}):
                line(f"  {source}", [i for i, j in enumerate(js) if j.row.source == source])
    zh_ba, zh_n = chinese_set()
    print(f"{'own Chinese set (tests/core)':<38}{zh_n:>6}  {zh_ba:>11.3f}  (shipped model)")

    print()
    print("calibration of Claim.confidence (probability that the verdict is right), held out:")
    print(
        f"  {'dataset':<22}{'claims':>7}  {'ECE':>6}   reliability: confidence bin -> n, accuracy"
    )
    for name, js in judged.items():
        outcomes = [o for j in js for o in j.claim_outcomes()]
        cells = "  ".join(
            f"{label} {n:>4} {acc:.2f}" for label, n, acc in reliability(outcomes, RELIABILITY_BINS)
        )
        print(f"  {name:<22}{len(outcomes):>7}  {ece(outcomes):>6.3f}   {cells}")

    print()
    print(
        "selective judging: decide locally only answers whose least confident claim reaches the"
        " threshold (the rest go to CascadeJudge's second judge), held out:"
    )
    print(f"  {'threshold':>9}" + "".join(f"  {n[:18]:>24}" for n in judged))
    for t in COVERAGE_THRESHOLDS:
        cells = []
        for js in judged.values():
            kept = [j for j in js if j.confidence >= t]
            ba = rates([j.grounded for j in kept], [j.row.faithful for j in kept])[0] if kept else 0
            cells.append(f"coverage {len(kept) / len(js):>4.0%} BA {ba:.3f}")
        print(f"  {t:>9.2f}" + "".join(f"  {c:>24}" for c in cells))
    if args.ceiling:
        print()
        print(
            "learned ceiling over every signal the judge computes, per set, k-fold (not shipped):"
        )
        for name in ("attributionbench_dev", "faithbench_dev"):
            if name in rows_by_set:
                cells = "  ".join(
                    f"{m} {ba:.3f}"
                    for m, ba in ceiling(rows_by_set[name], args.folds, args.repeats).items()
                )
                print(f"  {name:<22} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
