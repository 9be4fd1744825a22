"""Accuracy and cost of the optional SemanticJudge next to the LocalJudge, on the dev sets.

For each dev set, in one run:

* ``LocalJudge`` and ``SemanticJudge`` as shipped: balanced accuracy (grounded vs not, the
  mapping of ``benchmarks/accuracy.py``) and the recall of each class;
* the semantic threshold chosen the way the shipped default was (one value for all sets, best
  mean balanced accuracy on one half of each set) and measured on the other halves (2-fold, 5
  random splits), and the per-set best threshold (optimistic);
* milliseconds of CPU per answer and the share of answers that needed the second look.

``--calibrated`` adds the shipped, calibrated pipeline (calibrated ``LocalJudge``, then the fitted
second-look model) next to ``LocalJudge``: 5-fold on AttributionBench (both stages refit on four
folds, measured on the fifth), the shipped models on FaithBench (never fitted on).

``--ceiling`` adds what a learned combination of every signal both judges compute reaches: a
logistic regression over answer-level features (lexical scores, the worst claim's alignment,
the meaning match of every claim), 5-fold cross-validated on each set. It is not shipped; it
shows how much is left for a combiner of these signals, as opposed to a better signal.

Needs ``pip install -e ".[semantic]"``. Usage::

    python benchmarks/semantic.py [--data ../shared/data] [--limit N] [--ceiling] [--calibrated]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from accuracy import DATASETS, default_data_dir, folds_of, rates
from calibrate_local import FIT_SETS, Row, fit, load_rows
from calibrate_local import measure as measure_lexical
from calibrate_semantic import MatchedRow, fit_second_look, second_look_samples
from calibrate_semantic import measure as measure_with_meaning

import groundwatch as gw
from groundwatch._shared.inputs import prepare
from groundwatch.judging.judges.local._calibration import feature_vector
from groundwatch.judging.judges.semantic import DEFAULT_SUPPORT_THRESHOLD
from groundwatch.judging.scoring import DEFAULT_MIN_GROUNDEDNESS, score
from groundwatch.types import Judgement

GRID = [round(0.66 + 0.01 * i, 2) for i in range(21)]  # 0.66 .. 0.86


def grounded(label: str) -> bool:
    return label in ("grounded", "no_claims")


def run_dataset(
    judge: gw.SemanticJudge, rows: list[dict[str, Any]], ceiling: bool
) -> dict[str, Any]:
    golds = [r["label"] == "faithful" for r in rows]
    prepared = [prepare(r["answer"], r["context"], r.get("question") or None) for r in rows]
    matches = []
    second_look = 0
    start = time.process_time()
    for answer, passages, question, _ in prepared:
        m = judge.matches(answer, passages, question)
        second_look += any(x is not None for _, x in m)
        matches.append(m)
    cpu_ms = (time.process_time() - start) * 1000 / len(rows)

    def labels_at(t: float) -> list[bool]:
        judge.support_threshold = t
        out = []
        for (answer, passages, _, _), m in zip(prepared, matches, strict=True):
            claims = [judge.decide(c, x) for c, x in m]
            out.append(grounded(score(Judgement(claims=claims), answer, passages).label))
        return out

    table = {t: labels_at(t) for t in [*GRID, 2.0]}  # 2.0: nothing passes = LocalJudge alone
    judge.support_threshold = DEFAULT_SUPPORT_THRESHOLD
    shipped = labels_at(judge.support_threshold)
    result = {
        "n": len(rows),
        "golds": golds,
        "table": table,
        "local": rates(table[2.0], golds),
        "semantic": rates(shipped, golds),
        "best_t": max(GRID, key=lambda t: rates(table[t], golds)[0]),
        "cpu_ms": cpu_ms,
        "second_look": second_look / len(rows),
    }
    result["best_ba"] = rates(table[result["best_t"]], golds)[0]
    if ceiling:
        result["ceiling"] = learned_ceiling(judge, prepared, golds)
    return result


def held_out(results: dict[str, dict[str, Any]], sets: list[str]) -> dict[str, float]:
    """One threshold for all sets, chosen on half of each, measured on the other halves."""
    held: dict[str, list[float]] = {name: [] for name in sets}
    for seed in range(5):
        halves = {}
        for name in sets:
            idx = list(range(results[name]["n"]))
            random.Random(seed).shuffle(idx)
            halves[name] = (idx[: len(idx) // 2], idx[len(idx) // 2 :])
        for fold in (0, 1):
            t = max(GRID, key=lambda t: _mean_ba(results, sets, halves, t, fold))
            for name in sets:
                r, idx = results[name], halves[name][1 - fold]
                held[name].append(
                    rates([r["table"][t][i] for i in idx], [r["golds"][i] for i in idx])[0]
                )
    return {name: statistics.mean(v) for name, v in held.items()}


def _mean_ba(
    results: dict[str, dict[str, Any]],
    sets: list[str],
    halves: dict[str, tuple[list[int], list[int]]],
    t: float,
    part: int,
) -> float:
    total = 0.0
    for name in sets:
        r, idx = results[name], halves[name][part]
        total += rates([r["table"][t][i] for i in idx], [r["golds"][i] for i in idx])[0]
    return total / len(sets)


def learned_ceiling(
    judge: gw.SemanticJudge, prepared: list[Any], golds: list[bool]
) -> tuple[float, float]:
    """5-fold cross-validated balanced accuracy of a logistic regression over all signals."""
    import numpy as np

    feats = []
    for answer, passages, question, _ in prepared:
        judged = judge.local.judge_with_features(answer, passages, question)
        ev = score(Judgement(claims=[c for c, _ in judged]), answer, passages)
        fs = [f for _, f in judged]
        meaning = [0.0]
        if fs:
            meaning = judge.meaning_scores([c.text for c, _ in judged], passages) or meaning
        feats.append(
            [
                ev.groundedness if ev.groundedness is not None else 1.0,
                ev.faithfulness if ev.faithfulness is not None else 1.0,
                min((f.sentence_score for f in fs), default=1.0),
                min((f.score for f in fs), default=1.0),
                statistics.mean([f.score for f in fs] or [1.0]),
                min((f.cover_context for f in fs), default=1.0),
                max((f.numbers_unmatched for f in fs), default=0),
                max((f.novel_names for f in fs), default=0),
                len(fs),
                min(meaning),
                statistics.mean(meaning),
            ]
        )
    x = np.asarray(feats, dtype=float)
    y = np.asarray(golds, dtype=float)
    scores = []
    for with_meaning in (False, True):
        cols = x if with_meaning else x[:, :-2]
        bas = []
        for seed in range(5):
            idx = np.random.default_rng(seed).permutation(len(y))
            pred = np.zeros(len(y), dtype=bool)
            for k in range(5):
                test = idx[k::5]
                train = np.setdiff1d(idx, test)
                mu, sd = cols[train].mean(0), cols[train].std(0) + 1e-9
                w = _fit_logistic((cols[train] - mu) / sd, y[train])
                pred[test] = _logit((cols[test] - mu) / sd, w) > 0
            bas.append(rates(pred.tolist(), golds)[0])
        scores.append(statistics.mean(bas))
    return scores[0], scores[1]


def _logit(x: Any, w: Any) -> Any:
    return x @ w[1:] + w[0]


def _fit_logistic(x: Any, y: Any, l2: float = 1.0) -> Any:
    """Class-balanced, L2-regularised logistic regression by Newton's method."""
    import numpy as np

    w = np.zeros(x.shape[1] + 1)
    sample = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    xb = np.hstack([np.ones((len(x), 1)), x])
    reg = np.eye(len(w)) * l2
    reg[0, 0] = 0.0
    for _ in range(25):
        p = 1 / (1 + np.exp(-(xb @ w)))
        grad = xb.T @ (sample * (p - y)) + reg @ w
        hess = (xb * (sample * p * (1 - p))[:, None]).T @ xb + reg
        w -= np.linalg.solve(hess, grad)
    return w


def grounded_row(row: MatchedRow, verdicts: list[str]) -> bool:
    if not verdicts:
        return True
    if not row.substantive and "supported" not in verdicts:
        return False
    if "contradicted" in verdicts:
        return False
    backed = sum(v in ("supported", "inferred") for v in verdicts)
    return backed / len(verdicts) >= DEFAULT_MIN_GROUNDEDNESS


def _labels(rows: list[MatchedRow], calibration: Any, second: Any) -> tuple[list[bool], list[bool]]:
    """(local alone, local + second look) grounded-or-not for each row."""
    local = gw.LocalJudge(calibration=calibration)
    alone, both = [], []
    for row in rows:
        first = [local.decide(f)[0] for f in row.features]
        after = list(first)
        for i, (f, m) in enumerate(zip(row.features, row.matches, strict=True)):
            plain = first[i] == "unsupported" and not (f.numbers_unmatched or f.novel_names)
            if plain and m is not None and second.probability([*feature_vector(f), m]) >= 0.5:
                after[i] = "inferred"
        alone.append(grounded_row(row, first))
        both.append(grounded_row(row, after))
    return alone, both


def calibrated_predictions(
    judge: gw.SemanticJudge, data: Path, limit: int | None
) -> dict[str, dict[str, list[bool]]]:
    """Calibrated LocalJudge and calibrated SemanticJudge, held out (see the module doc): per
    set, the gold label and each pipeline's grounded-or-not of every row, in file order."""
    measured = {
        name: measure_with_meaning(judge, load_rows(data / f"{name}.jsonl", limit))
        for name in ("attributionbench_dev", "faithbench_dev")
        if (data / f"{name}.jsonl").exists()
    }
    chinese = [
        r
        for name in FIT_SETS
        if name != "attributionbench_dev" and (data / f"{name}.jsonl").exists()
        for r in measure_lexical(name, load_rows(data / f"{name}.jsonl", limit))
    ]

    def as_rows(rows: list[MatchedRow]) -> list[Row]:
        return [
            Row(
                "attributionbench_dev", i, r.faithful, "", r.substantive, r.features, r.claim_labels
            )
            for i, r in enumerate(rows)
        ]

    out: dict[str, dict[str, list[bool]]] = {}
    ab = measured.get("attributionbench_dev")
    if ab:
        folds = folds_of(len(ab), 5)
        alone = [False] * len(ab)
        both = [False] * len(ab)
        for k in range(5):
            train = [r for r, f in zip(ab, folds, strict=True) if f != k]
            test_idx = [i for i, f in enumerate(folds) if f == k]
            first = fit(as_rows(train) + chinese)
            second = fit_second_look(second_look_samples(train, first))
            a, b = _labels([ab[i] for i in test_idx], first, second)
            for i, x, y in zip(test_idx, a, b, strict=True):
                alone[i], both[i] = x, y
        out["attributionbench_dev"] = {
            "gold": [r.faithful for r in ab],
            "local": alone,
            "semantic": both,
        }
    fb = measured.get("faithbench_dev")
    if fb:
        from groundwatch.judging.judges.local._calibration import (
            default_calibration,
            default_semantic_model,
        )

        a, b = _labels(fb, default_calibration(), default_semantic_model())
        out["faithbench_dev"] = {"gold": [r.faithful for r in fb], "local": a, "semantic": b}
    return out


def calibrated_table(judge: gw.SemanticJudge, data: Path, limit: int | None) -> None:
    """Print :func:`calibrated_predictions` as balanced accuracy and recalls."""
    print("calibrated pipeline, held out (BA, R+, R-):")
    how = {"attributionbench_dev": "(5-fold) ", "faithbench_dev": "(shipped)"}
    for name, p in calibrated_predictions(judge, data, limit).items():
        print(
            f"  {name} {how[name]}  LocalJudge {_fmt(rates(p['local'], p['gold']))}"
            f"   SemanticJudge {_fmt(rates(p['semantic'], p['gold']))}"
        )


def _fmt(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.3f} {r[1]:.2f} {r[2]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=str, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--ceiling", action="store_true")
    parser.add_argument("--calibrated", action="store_true")
    args = parser.parse_args()
    try:
        judge = gw.SemanticJudge()
    except ImportError as exc:
        sys.exit(f"skipped: {exc}")
    data = default_data_dir() if args.data is None else Path(args.data)
    if args.calibrated:
        calibrated_table(judge, data, args.limit)
        return
    results = {}
    for name in DATASETS:
        path = data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: {path} not found, skipped")
            continue
        # The model is English: the learned ceiling is computed for the English sets only.
        ceiling = args.ceiling and not name.startswith("uhgeval")
        results[name] = run_dataset(judge, load_rows(path, args.limit), ceiling)
    tuned_on = [n for n in ("attributionbench_dev", "faithbench_dev") if n in results]
    held = held_out(results, tuned_on) if tuned_on else {}
    print(f"SemanticJudge support_threshold={judge.support_threshold}; BA = balanced accuracy")
    print(
        f"{'dataset':22} {'n':>5}  {'local BA':>8} {'R+':>5} {'R-':>5}  {'semantic BA':>11} "
        f"{'R+':>5} {'R-':>5}  {'held-out':>8}  {'best t -> BA':>14}  {'ms/answer':>9} "
        f"{'2nd look':>8}"
    )
    for name, r in results.items():
        lo, se = r["local"], r["semantic"]
        ho = f"{held[name]:.3f}" if name in held else "-"
        print(
            f"{name:22} {r['n']:>5}  {lo[0]:>8.3f} {lo[1]:>5.2f} {lo[2]:>5.2f}  {se[0]:>11.3f} "
            f"{se[1]:>5.2f} {se[2]:>5.2f}  {ho:>8}  {r['best_t']:>6} -> {r['best_ba']:.3f}  "
            f"{r['cpu_ms']:>9.1f} {r['second_look']:>8.0%}"
        )
    if args.ceiling:
        print("\nlearned ceiling (logistic regression, 5-fold CV; not shipped):")
        for name, r in results.items():
            if "ceiling" not in r:
                continue
            lex, both = r["ceiling"]
            print(f"  {name:22} lexical signals {lex:.3f}   + meaning match {both:.3f}")


if __name__ == "__main__":
    main()
