"""The experimental NLIJudge next to LocalJudge and SemanticJudge, held out, in one run.

Protocol (``training/README.md``): the cross-encoder never saw an AttributionBench label; its
synthetic training pairs come from the passages of one half of AttributionBench dev's rows
(``nli_data.encoder_half``). Only the small combiner (and, as for the other judges, the lexical
calibration) is fitted on labels, on four folds of AttributionBench dev, and measured on the
fifth: the same folds as ``benchmarks/semantic.py --calibrated``. FaithBench is never fitted
on: the combiner fitted on all of AttributionBench judges it through ``NLIJudge.judge`` and
``gw.evaluate``, exactly as a user would run it. Printed:

* balanced accuracy (BA) with the recall of each class on AttributionBench (5-fold; and on the
  rows whose passages the encoder never read), FaithBench and UHGEval, for all three judges,
  plus "model alone" (the entailment probability decides the open claims, no combiner) to
  show what the combination adds;
* SNLI test accuracy (3-way) of the int8 model;
* answers per second on one core for each judge, on the first ``--speed-rows`` rows of
  AttributionBench dev (CPU time, one thread);
* with ``--threshold T``, the combiner's threshold fixed at T instead of chosen on the training
  folds (an ablation);
* the stop rule: NLIJudge must beat SemanticJudge by 0.03 on AttributionBench and FaithBench.

Needs the ``semantic`` extra and a model from ``training/export_nli.py``. Usage::

    python benchmarks/nli.py --model /work/nli-run/model/model.int8.onnx \\
        [--snli-test /work/nli-run/data/snli_test.jsonl] [--data ../shared/data] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from accuracy import default_data_dir, folds_of, rates
from calibrate_local import FIT_SETS, Row, fit, load_rows
from calibrate_local import measure as measure_lexical
from calibrate_nli import (
    NLIRow,
    best_threshold,
    combiner_json,
    fit_combiner,
    measure,
    placeholder_combiner,
    samples,
    verdicts,
)
from nli_data import encoder_half
from semantic import _grounded_row, calibrated_predictions

import groundwatch as gw
from groundwatch.judging.judges.nli import NLIJudge

STOP_MARGIN = 0.03
AB, FB, ZH = "attributionbench_dev", "faithbench_dev", "uhgeval_zh_dev"


def grounded(label: str) -> bool:
    return label in ("grounded", "no_claims")


def _model_alone(row: NLIRow, calibration: Any) -> list[str]:
    """Verdicts when the entailment probability alone decides the claims the model reads."""
    local = gw.LocalJudge(calibration=calibration)
    out = []
    for f, p in zip(row.features, row.probs, strict=True):
        if p is None:
            out.append(local.decide(f)[0])
        else:
            out.append("inferred" if p[0] >= max(p[1], p[2]) else "unsupported")
    return out


def attributionbench_kfold(
    judge: NLIJudge, rows: list[NLIRow], chinese: list[Row], fixed: float | None
) -> tuple[list[bool], list[bool]]:
    """(NLIJudge, model alone) grounded-or-not per row, each from a fold not fitted on it."""
    folds = folds_of(len(rows), 5)
    combined = [False] * len(rows)
    alone = [False] * len(rows)
    for k in range(5):
        train = [r for r, f in zip(rows, folds, strict=True) if f != k]
        lexical = [
            Row(AB, i, r.faithful, "", r.substantive, r.features, r.claim_labels)
            for i, r in enumerate(train)
        ]
        first = fit(lexical + chinese)
        combiner = fit_combiner(samples(train))
        if fixed is None:
            t = best_threshold(judge, train, first, combiner, _grounded_row)
            print(f"  fold {k}: combiner threshold {t} (chosen on the other folds)", flush=True)
        else:
            judge.min_probability = fixed
        for i, f in enumerate(folds):
            if f == k:
                combined[i] = _grounded_row(rows[i], verdicts(judge, rows[i], first, combiner))
                alone[i] = _grounded_row(rows[i], _model_alone(rows[i], first))
    return combined, alone


def run_judge(judge: Any, rows: list[dict[str, Any]]) -> tuple[list[bool], float]:
    """Grounded-or-not of each row through ``gw.evaluate``, and CPU seconds per answer."""
    out = []
    start = time.process_time()
    for r in rows:
        ev = gw.evaluate(r["answer"], r["context"], r.get("question") or None, judge=judge)
        out.append(grounded(ev.label))
    return out, (time.process_time() - start) / max(len(rows), 1)


def snli_accuracy(judge: NLIJudge, path: Path, limit: int | None) -> tuple[float, int, float]:
    pairs, golds = [], []
    with path.open(encoding="utf-8") as fh:
        for line, _ in zip(fh, range(limit or 10**9), strict=False):
            r = json.loads(line)
            pairs.append((r["premise"], r["hypothesis"]))
            golds.append(r["label"])
    assert judge.encoder is not None
    start = time.process_time()
    probs = judge.encoder.probabilities(pairs)
    seconds = time.process_time() - start
    right = sum(int(p.argmax()) == g for p, g in zip(probs, golds, strict=True))
    return right / len(golds), len(golds), len(golds) / max(seconds, 1e-9)


def _fmt(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.3f} {r[1]:.2f} {r[2]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--snli-test", type=Path, default=Path("/work/nli-run/data/snli_test.jsonl")
    )
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--speed-rows", type=int, default=150)
    parser.add_argument("--combiner-out", type=Path, default=None)
    parser.add_argument(
        "--threshold", type=float, default=None, help="fix the combiner threshold (ablation)"
    )
    args = parser.parse_args()
    data = default_data_dir() if args.data is None else args.data
    try:
        semantic = gw.SemanticJudge()
        judge = NLIJudge(args.model, placeholder_combiner())
    except ImportError as exc:
        sys.exit(f"skipped: {exc}")
    if judge.encoder is None:
        sys.exit(f"could not load {args.model}")

    print("measuring AttributionBench dev with the model ...", flush=True)
    ab_raw = load_rows(data / f"{AB}.jsonl", args.limit)
    start = time.process_time()
    ab = measure(judge, ab_raw)
    print(f"  {time.process_time() - start:.0f} s CPU", flush=True)
    chinese = [
        r
        for name in FIT_SETS
        if name != AB and (data / f"{name}.jsonl").exists()
        for r in measure_lexical(name, load_rows(data / f"{name}.jsonl", args.limit))
    ]
    nli_ab, alone_ab = attributionbench_kfold(judge, ab, chinese, args.threshold)
    full = fit_combiner(samples(ab))
    # The threshold for FaithBench and UHGEval: chosen on all of AttributionBench, with the
    # shipped lexical calibration those sets are judged with.
    if args.threshold is None:
        threshold = best_threshold(judge, ab, None, full, _grounded_row)
    else:
        threshold = judge.min_probability = args.threshold
    print(f"  combiner fitted on all of AttributionBench: threshold {threshold}", flush=True)
    if args.combiner_out:
        text = json.dumps(combiner_json(full, len(samples(ab)), threshold), indent=2) + "\n"
        args.combiner_out.write_text(text, encoding="utf-8")
    judge.combiner = full

    print("LocalJudge and SemanticJudge, held out ...", flush=True)
    others = calibrated_predictions(semantic, data, args.limit)
    table: dict[str, dict[str, tuple[float, float, float]]] = {}
    gold_ab = [r.faithful for r in ab]
    unseen = [i for i, r in enumerate(ab) if not encoder_half(r.id)]
    ref = others[AB]
    table["attributionbench_dev (5-fold)"] = {
        "local": rates(ref["local"], ref["gold"]),
        "semantic": rates(ref["semantic"], ref["gold"]),
        "nli": rates(nli_ab, gold_ab),
        "alone": rates(alone_ab, gold_ab),
    }
    table[f"  unseen passages ({len(unseen)})"] = {
        key: rates([preds[i] for i in unseen], [gold_ab[i] for i in unseen])
        for key, preds in (
            ("local", ref["local"]),
            ("semantic", ref["semantic"]),
            ("nli", nli_ab),
            ("alone", alone_ab),
        )
    }

    print("FaithBench and UHGEval through NLIJudge.judge ...", flush=True)
    fb_raw = load_rows(data / f"{FB}.jsonl", args.limit)
    fb_nli, fb_cost = run_judge(judge, fb_raw)
    fb_gold = [r["label"] == "faithful" for r in fb_raw]
    fb_rows = measure(judge, fb_raw)
    table["faithbench_dev (never fitted)"] = {
        "local": rates(others[FB]["local"], others[FB]["gold"]),
        "semantic": rates(others[FB]["semantic"], others[FB]["gold"]),
        "nli": rates(fb_nli, fb_gold),
        "alone": rates([_grounded_row(r, _model_alone(r, None)) for r in fb_rows], fb_gold),
    }
    if (data / f"{ZH}.jsonl").exists():
        zh_raw = load_rows(data / f"{ZH}.jsonl", args.limit)
        zh_gold = [r["label"] == "faithful" for r in zh_raw]
        zh_local, _ = run_judge(gw.LocalJudge(), zh_raw)
        zh_nli, _ = run_judge(judge, zh_raw)
        table["uhgeval_zh_dev (shipped lexical)"] = {
            "local": rates(zh_local, zh_gold),
            "semantic": rates(zh_local, zh_gold),  # an English model: the same verdicts
            "nli": rates(zh_nli, zh_gold),
            "alone": rates(zh_nli, zh_gold),
        }

    print(
        "\nBA R+ R- (grounded vs not); FaithBench: shipped lexical calibrations, combiner fit "
        "on all of AttributionBench"
    )
    print(
        f"{'dataset':36} {'LocalJudge':>15} {'SemanticJudge':>15} {'NLIJudge':>15} "
        f"{'model alone':>15}"
    )
    for name, r in table.items():
        print(
            f"{name:36} {_fmt(r['local']):>15} {_fmt(r['semantic']):>15} {_fmt(r['nli']):>15} "
            f"{_fmt(r['alone']):>15}"
        )
    print("(UHGEval: the models are English and read no Chinese claim; SemanticJudge = Local)")

    acc, n, pairs_per_s = snli_accuracy(judge, args.snli_test, args.limit)
    print(
        f"\nSNLI test, 3-way accuracy of the int8 model: {acc:.3f} ({n} pairs, "
        f"{pairs_per_s:.0f} pairs/s on one core)"
    )

    speed = ab_raw[: args.speed_rows]
    print(f"\nanswers/s on one core (CPU time), first {len(speed)} AttributionBench rows:")
    costs = {}
    for label, j in (
        ("LocalJudge", gw.LocalJudge()),
        ("SemanticJudge", semantic),
        ("NLIJudge", judge),
    ):
        _, costs[label] = run_judge(j, speed)
        print(f"  {label:14} {1 / costs[label]:8.1f}")
    print(f"  NLIJudge on FaithBench: {1 / fb_cost:.1f} answers/s")

    d_ab = (
        table["attributionbench_dev (5-fold)"]["nli"][0]
        - table["attributionbench_dev (5-fold)"]["semantic"][0]
    )
    d_unseen = (
        table[f"  unseen passages ({len(unseen)})"]["nli"][0]
        - table[f"  unseen passages ({len(unseen)})"]["semantic"][0]
    )
    d_fb = (
        table["faithbench_dev (never fitted)"]["nli"][0]
        - table["faithbench_dev (never fitted)"]["semantic"][0]
    )
    wins = min(d_ab, d_unseen) >= STOP_MARGIN and d_fb >= STOP_MARGIN
    print(
        f"\nstop rule: NLIJudge - SemanticJudge = {d_ab:+.3f} AttributionBench (5-fold), "
        f"{d_unseen:+.3f} on its unseen passages, {d_fb:+.3f} FaithBench; needs "
        f"+{STOP_MARGIN} on both: {'SHIP' if wins else 'do not ship'}"
    )


if __name__ == "__main__":
    main()
