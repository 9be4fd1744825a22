"""Accuracy of the local judge on the labelled dev sets, next to a content-word-overlap baseline.

For each dev set this prints, in one run:

* the local judge as shipped (``groundwatch.evaluate`` with the default ``LocalJudge`` and
  label policy): balanced accuracy of grounded-vs-not and the recall of each class;
* the same judge with its two decision parameters (``infer_threshold`` and
  ``min_groundedness``) tuned on one half of the set and measured on the other half, both ways
  (2-fold, averaged over 5 random splits) -- an estimate of what tuning buys without fooling
  ourselves;
* the baseline: share of the answer's content words found in the context, threshold tuned on the
  whole dev set (optimistic), and the same with 2-fold tuning.

Label mapping: ``grounded`` and ``no_claims`` (nothing checkable was asserted) count as
"grounded"; ``hallucinated`` and ``insufficient_context`` count as "not grounded". Dev rows are
"faithful" (grounded) or "hallucinated".

Usage::

    python benchmarks/accuracy.py [--data ../shared/data] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import groundwatch as gw  # noqa: E402
from groundwatch._inputs import prepare  # noqa: E402
from groundwatch._lexical import content_words  # noqa: E402
from groundwatch.judges.local import ClaimFeatures, LocalJudge  # noqa: E402
from groundwatch.scoring import DEFAULT_MIN_GROUNDEDNESS, context_is_substantive  # noqa: E402

DATASETS = ("attributionbench_dev", "faithbench_dev", "uhgeval_zh_dev")
INFER_GRID = [round(0.30 + 0.05 * i, 2) for i in range(8)]  # 0.30 .. 0.65
GROUNDED_GRID = [0.5, 0.67, 0.75, 0.8, 1.0]
CONFIDENCE_CUT = 0.6


def default_data_dir() -> Path:
    """``$GROUNDWATCH_DATA``, else ``shared/data`` beside the repository (or beside the folder
    holding it, for git worktrees)."""
    env = os.environ.get("GROUNDWATCH_DATA")
    if env:
        return Path(env)
    for parent in ROOT.parents:
        candidate = parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return (ROOT / ".." / "shared" / "data").resolve()


def load(path: Path, limit: int | None) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit else rows


def rates(preds: Sequence[bool], golds: Sequence[bool]) -> tuple[float, float, float]:
    """(balanced accuracy, recall of grounded, recall of hallucinated)."""
    pos = [p for p, g in zip(preds, golds, strict=True) if g]
    neg = [p for p, g in zip(preds, golds, strict=True) if not g]
    r_pos = sum(pos) / len(pos) if pos else 0.0
    r_neg = sum(not p for p in neg) / len(neg) if neg else 0.0
    return (r_pos + r_neg) / 2, r_pos, r_neg


def best_threshold(scores: Sequence[float], golds: Sequence[bool]) -> float:
    """The threshold on ``score >= t`` with the best balanced accuracy."""
    candidates = sorted(set(scores))
    best_t, best_ba = 0.0, -1.0
    for t in candidates:
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


def two_fold(
    n: int, fit: Callable[[list[int]], Any], measure: Callable[[list[int], Any], float]
) -> float:
    """Mean held-out score over 5 random 2-fold splits."""
    scores = []
    for seed in range(5):
        idx = list(range(n))
        random.Random(seed).shuffle(idx)
        a, b = idx[: n // 2], idx[n // 2 :]
        for train, test in ((a, b), (b, a)):
            scores.append(measure(test, fit(train)))
    return sum(scores) / len(scores)


def grounded_from_features(
    features: list[ClaimFeatures], substantive: bool, infer: float, min_grounded: float
) -> bool:
    """The label the judge + scoring would give with these parameters (grounded or not)."""
    if not features:
        return True  # no_claims
    judge = LocalJudge(infer_threshold=infer)
    verdicts = [judge.decide(f)[0] for f in features]
    if not substantive and "supported" not in verdicts:
        return False  # insufficient_context
    if "contradicted" in verdicts:
        return False
    ok = sum(v in ("supported", "inferred") for v in verdicts) / len(verdicts)
    return ok >= min_grounded


def run_dataset(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    golds = [r["label"] == "faithful" for r in rows]
    # 1. The judge as shipped, through the public API.
    labels: Counter[str] = Counter()
    preds: list[bool] = []
    low_conf: list[bool] = []  # the answer's least confident claim is below CONFIDENCE_CUT
    start = time.perf_counter()
    for r in rows:
        ev = gw.evaluate(r["answer"], r["context"], question=r.get("question") or None)
        labels[ev.label] += 1
        preds.append(ev.label in ("grounded", "no_claims"))
        low_conf.append(min((c.confidence or 0.0 for c in ev.claims), default=1.0) < CONFIDENCE_CUT)
    elapsed = time.perf_counter() - start
    shipped = rates(preds, golds)
    correct = [p == g for p, g in zip(preds, golds, strict=True)]
    n_low = sum(low_conf)
    confidence = (
        n_low / len(rows),
        sum(c for c, lo in zip(correct, low_conf, strict=True) if lo) / max(n_low, 1),
        sum(c for c, lo in zip(correct, low_conf, strict=True) if not lo)
        / max(len(rows) - n_low, 1),
    )
    # 2. The judge's parameters tuned on one half, measured on the other.
    judge = LocalJudge()
    feats: list[list[ClaimFeatures]] = []
    substantive: list[bool] = []
    for r in rows:
        answer, passages, question, _ = prepare(
            r["answer"], r["context"], r.get("question") or None
        )
        feats.append(judge.features(answer, passages, question))
        substantive.append(context_is_substantive(passages))
    table: dict[tuple[float, float], list[bool]] = {
        (i, g): [
            grounded_from_features(f, s, i, g) for f, s in zip(feats, substantive, strict=True)
        ]
        for i in INFER_GRID
        for g in GROUNDED_GRID
    }

    def fit_judge(train: list[int]) -> tuple[float, float]:
        return max(
            table,
            key=lambda k: rates([table[k][i] for i in train], [golds[i] for i in train])[0],
        )

    def measure_judge(test: list[int], params: tuple[float, float]) -> float:
        return rates([table[params][i] for i in test], [golds[i] for i in test])[0]

    judge_cv = two_fold(len(rows), fit_judge, measure_judge)
    best_params = fit_judge(list(range(len(rows))))
    # 3. The overlap baseline.
    scores = [overlap_score(r["answer"], r["context"]) for r in rows]
    t_full = best_threshold(scores, golds)
    baseline_full = rates([s >= t_full for s in scores], golds)

    def fit_base(train: list[int]) -> float:
        return best_threshold([scores[i] for i in train], [golds[i] for i in train])

    def measure_base(test: list[int], t: float) -> float:
        return rates([scores[i] >= t for i in test], [golds[i] for i in test])[0]

    baseline_cv = two_fold(len(rows), fit_base, measure_base)
    return {
        "name": name,
        "n": len(rows),
        "shipped": shipped,
        "judge_cv": judge_cv,
        "best_params": best_params,
        "best_full": rates(table[best_params], golds)[0],
        "baseline_full": baseline_full,
        "baseline_t": t_full,
        "baseline_cv": baseline_cv,
        "labels": dict(labels),
        "per_s": len(rows) / elapsed if elapsed else float("inf"),
        "table": table,
        "golds": golds,
        "confidence": confidence,
    }


def _on_half(
    res: dict[str, Any], part: list[int], key: tuple[float, float]
) -> tuple[float, float, float]:
    return rates([res["table"][key][i] for i in part], [res["golds"][i] for i in part])


def joint_cv(results: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    """Held-out figures for the procedure that chose the shipped defaults.

    One ``(infer_threshold, min_groundedness)`` for all sets, maximising the summed balanced
    accuracy of the English sets while the Chinese set keeps R+ >= 0.95 and R- >= 0.85 --
    chosen on one half of every set, measured on the other half (both ways, 5 random splits).
    """
    by_name = {r["name"]: r for r in results}
    english = [n for n in ("attributionbench_dev", "faithbench_dev") if n in by_name]
    chinese = "uhgeval_zh_dev" if "uhgeval_zh_dev" in by_name else None
    keys = list(results[0]["table"])
    sums: dict[str, list[tuple[float, float, float]]] = {n: [] for n in by_name}
    for seed in range(5):
        halves: dict[str, tuple[list[int], list[int]]] = {}
        for name, res in by_name.items():
            idx = list(range(res["n"]))
            random.Random(seed).shuffle(idx)
            halves[name] = (idx[: len(idx) // 2], idx[len(idx) // 2 :])
        for train_side in (0, 1):

            def objective(
                key: tuple[float, float],
                side: int = train_side,
                halves: dict[str, tuple[list[int], list[int]]] = halves,
            ) -> tuple[bool, float]:
                ok = True
                if chinese is not None:
                    _, rp, rn = _on_half(by_name[chinese], halves[chinese][side], key)
                    ok = rp >= 0.95 and rn >= 0.85
                return ok, sum(_on_half(by_name[n], halves[n][side], key)[0] for n in english)

            best = max(keys, key=objective)
            for name in by_name:
                sums[name].append(_on_half(by_name[name], halves[name][1 - train_side], best))
    return {
        name: (
            sum(v[0] for v in vals) / len(vals),
            sum(v[1] for v in vals) / len(vals),
            sum(v[2] for v in vals) / len(vals),
        )
        for name, vals in sums.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--limit", type=int, default=None, help="rows per set (quick runs)")
    args = parser.parse_args(argv)
    judge = LocalJudge()
    print(
        f"local judge defaults: infer_threshold={judge.infer_threshold}, "
        f"support_threshold={judge.support_threshold}, "
        f"min_groundedness={DEFAULT_MIN_GROUNDEDNESS}"
    )
    print("BA = balanced accuracy of grounded vs not; R+ / R- = recall of faithful / hallucinated")
    print()
    header = (
        f"{'dataset':<22}{'n':>6}  {'judge BA':>8} {'R+':>6} {'R-':>6}  {'judge CV':>8}"
        f"  {'tuned (infer, min_g) -> full BA':<32}{'overlap BA':>10} {'R+':>6} {'R-':>6}"
        f"  {'overlap CV':>10}"
    )
    print(header)
    print("-" * len(header))
    results = []
    for name in DATASETS:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name:<22} missing: {path}")
            continue
        res = run_dataset(name, load(path, args.limit))
        results.append(res)
        ba, rp, rn = res["shipped"]
        bba, brp, brn = res["baseline_full"]
        tuned = f"{res['best_params']} -> {res['best_full']:.3f}"
        print(
            f"{name:<22}{res['n']:>6}  {ba:>8.3f} {rp:>6.3f} {rn:>6.3f}  {res['judge_cv']:>8.3f}"
            f"  {tuned:<32}{bba:>10.3f} {brp:>6.3f} {brn:>6.3f}  {res['baseline_cv']:>10.3f}"
        )
    if results:
        print()
        print(
            "held out, the procedure that chose the shipped defaults (one setting for all sets,"
            " chosen on half of each set, measured on the other half):"
        )
        for name, (ba, rp, rn) in joint_cv(results).items():
            print(f"  {name:<22} BA {ba:.3f}  R+ {rp:.3f}  R- {rn:.3f}")
        print()
        print(
            f"confidence: answers whose least confident claim is < {CONFIDENCE_CUT} "
            "(what a cascade would escalate), and label accuracy on them vs the rest:"
        )
        for res in results:
            share, acc_low, acc_rest = res["confidence"]
            print(
                f"  {res['name']:<22} {share:>5.0%} of answers, accuracy {acc_low:.3f}"
                f" vs {acc_rest:.3f}"
            )
    print()
    for res in results:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(res["labels"].items()))
        print(f"{res['name']}: labels {labels}; baseline threshold {res['baseline_t']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
