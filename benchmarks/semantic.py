"""Accuracy and cost of the optional SemanticJudge next to the LocalJudge, on the dev sets.

For each dev set, in one run:

* ``LocalJudge`` and ``SemanticJudge`` as shipped: balanced accuracy (grounded vs not, the
  mapping of ``benchmarks/accuracy.py``) and the recall of each class;
* the semantic threshold chosen the way the shipped default was (one value for all sets, best
  mean balanced accuracy on one half of each set) and measured on the other halves (2-fold, 5
  random splits), and the per-set best threshold (optimistic);
* milliseconds of CPU per answer and the share of answers that needed the second look.

``--ceiling`` adds what a learned combination of every signal both judges compute reaches: a
logistic regression over answer-level features (lexical scores, the worst claim's alignment,
the meaning match of every claim), 5-fold cross-validated on each set. It is not shipped; it
shows how much is left for a combiner of these signals, as opposed to a better signal.

Needs ``pip install -e ".[semantic]"``. Usage::

    python benchmarks/semantic.py [--data ../shared/data] [--limit N] [--ceiling]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from accuracy import DATASETS, default_data_dir, load, rates

import groundwatch as gw
from groundwatch._inputs import prepare
from groundwatch.judges.semantic import _match
from groundwatch.scoring import score
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
    judge.support_threshold = gw.judges.semantic.DEFAULT_SUPPORT_THRESHOLD
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
        target = judge._context(passages)
        meaning = [0.0]
        if fs and target.vectors is not None:
            texts = [c.text for c, _ in judged]
            encoded = judge.encoder.encode(texts)
            meaning = [
                _match(t, tv, target).score if tv.pieces else 0.0
                for t, tv in zip(texts, encoded, strict=True)
            ]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=str, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--ceiling", action="store_true")
    args = parser.parse_args()
    try:
        judge = gw.SemanticJudge()
    except ImportError as exc:
        sys.exit(f"skipped: {exc}")
    data = default_data_dir() if args.data is None else Path(args.data)
    results = {}
    for name in DATASETS:
        path = data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: {path} not found, skipped")
            continue
        # The model is English: the learned ceiling is computed for the English sets only.
        ceiling = args.ceiling and not name.startswith("uhgeval")
        results[name] = run_dataset(judge, load(path, args.limit), ceiling)
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
