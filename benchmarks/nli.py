"""NLIJudge with a trained model next to LocalJudge and SemanticJudge, held out, in one run.

Protocol (``training/README.md``): the cross-encoder of the NLIJudge column never saw an
AttributionBench label; its synthetic training pairs come from the passages of one half of
AttributionBench dev's rows (``nli_data.encoder_half``). Only the small combiner (and, as for
the other judges, the lexical calibration) is fitted on labels, on four folds of
AttributionBench dev, and measured on the fifth: the same folds as ``benchmarks/semantic.py
--calibrated``. FaithBench is never fitted on: the combiner fitted on all of AttributionBench
judges it through ``NLIJudge.judge`` and ``gw.evaluate``, exactly as a user would run it. Printed:

* balanced accuracy (BA) with the recall of each class on AttributionBench (5-fold; and on the
  rows whose passages the encoder never read), FaithBench and UHGEval, for all three judges,
  plus "model alone" (the entailment probability decides the open claims, no combiner) to
  show what the combination adds;
* SNLI test accuracy (3-way) of the int8 model;
* answers per second on one core for each judge, on the first ``--speed-rows`` rows of
  AttributionBench dev (CPU time, one thread);
* with ``--threshold T``, the combiner's threshold fixed at T instead of chosen on the training
  folds (an ablation);
* with ``--fold-models DIR`` (``training/finetune_nli.py --out DIR``), the next step of the
  protocol next to it: the same cross-encoder fine-tuned on AttributionBench claim labels. Fold
  k is judged by the model fine-tuned on the other four folds (checked against its
  ``fine_tune.json``), with the combiner and threshold refit on those four folds as that model
  measures them; FaithBench, UHGEval and SNLI test by the model fine-tuned on all of
  AttributionBench, with the combiner fitted on all of it (written to ``DIR/all/combiner.json``);
* with ``--windows K``, the model reads each claim against its aligned evidence window and
  the windows of up to K - 1 other candidate sentences, and the most entailing one decides;
* issue #30's stop rule, for each variant: AttributionBench (5-fold) at least LocalJudge +
  0.03 with the recall of faithful and of hallucinated answers both at least 0.70, FaithBench
  at least LocalJudge - 0.01, UHGEval unchanged.

``--model`` is an ONNX file or a cross-encoder folder (``NLIJudge(model=DIR)``; a two-way
model's SNLI figure is entailment against the rest). A model with a ``manifest.json`` (written
by ``training/train_nli.py``) is refused when it lists a row of a set measured here: its
figures would not be held out.

Needs the ``semantic`` extra and a model from ``training/export_nli.py``. Usage::

    python benchmarks/nli.py --model /work/nli-run/model/model.int8.onnx \\
        [--snli-test /work/nli-run/data/snli_test.jsonl] [--data ../shared/data] [--limit N] \\
        [--fold-models /work/nli-run/folds]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
from finetune_nli import FOLDS, MANIFEST, model_names
from nli_data import encoder_half
from nli_train_data import leaked_rows, manifest_of
from semantic import calibrated_predictions, grounded_row

import groundwatch as gw
from groundwatch.judging.judges.local._calibration import LogisticModel
from groundwatch.judging.judges.nli import NLIJudge

AB_GAIN, MIN_RECALL, FB_LOSS = 0.03, 0.70, 0.01
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
    judge: NLIJudge,
    rows_by_fold: Sequence[list[NLIRow]],
    chinese: list[Row],
    fixed: float | None,
) -> tuple[list[bool], list[bool], list[float]]:
    """(NLIJudge, model alone) grounded-or-not per row, each from a fold not fitted on it, and
    each fold's combiner threshold. ``rows_by_fold[k]``: AttributionBench dev as fold k's
    model measured it (the same rows, in file order, for every fold)."""
    n = len(rows_by_fold[0])
    folds = folds_of(n, len(rows_by_fold))
    combined = [False] * n
    alone = [False] * n
    thresholds = []
    for k, rows in enumerate(rows_by_fold):
        train = [r for r, f in zip(rows, folds, strict=True) if f != k]
        lexical = [
            Row(AB, i, r.faithful, "", r.substantive, r.features, r.claim_labels)
            for i, r in enumerate(train)
        ]
        first = fit(lexical + chinese)
        combiner = fit_combiner(samples(train))
        if fixed is None:
            t = best_threshold(judge, train, first, combiner, grounded_row)
            print(f"  fold {k}: combiner threshold {t} (chosen on the other folds)", flush=True)
        else:
            t = judge.min_probability = fixed
        thresholds.append(t)
        for i, f in enumerate(folds):
            if f == k:
                combined[i] = grounded_row(rows[i], verdicts(judge, rows[i], first, combiner))
                alone[i] = grounded_row(rows[i], _model_alone(rows[i], first))
    return combined, alone, thresholds


@dataclass
class NLIColumns:
    """One NLIJudge variant's grounded-or-not per row of each set, held out as the module doc
    says, and what was fitted on all of AttributionBench for FaithBench and UHGEval."""

    ab: list[bool]
    ab_alone: list[bool]
    fb: list[bool]
    fb_alone: list[bool]
    zh: list[bool] | None
    fb_cost: float
    fold_thresholds: list[float]
    threshold: float
    combiner: LogisticModel
    claims: int


def nli_columns(
    judge: NLIJudge,
    rows_by_fold: Sequence[list[NLIRow]],
    full: list[NLIRow],
    fb_raw: list[dict[str, Any]],
    zh_raw: list[dict[str, Any]] | None,
    chinese: list[Row],
    fixed: float | None,
) -> NLIColumns:
    """Measure one NLIJudge variant: AttributionBench k-fold from ``rows_by_fold``, then the
    combiner fitted on ``full`` (AttributionBench as ``judge``'s own model measured it) judges
    FaithBench and UHGEval through ``NLIJudge.judge``."""
    ab, ab_alone, fold_thresholds = attributionbench_kfold(judge, rows_by_fold, chinese, fixed)
    combiner = fit_combiner(samples(full))
    # The threshold for FaithBench and UHGEval: chosen on all of AttributionBench, with the
    # shipped lexical calibration those sets are judged with.
    if fixed is None:
        threshold = best_threshold(judge, full, None, combiner, grounded_row)
    else:
        threshold = judge.min_probability = fixed
    print(f"  combiner fitted on all of AttributionBench: threshold {threshold}", flush=True)
    judge.combiner = combiner
    print("  FaithBench and UHGEval through NLIJudge.judge ...", flush=True)
    fb, fb_cost = run_judge(judge, fb_raw)
    fb_alone = [grounded_row(r, _model_alone(r, None)) for r in measure(judge, fb_raw)]
    zh = run_judge(judge, zh_raw)[0] if zh_raw is not None else None
    return NLIColumns(
        ab,
        ab_alone,
        fb,
        fb_alone,
        zh,
        fb_cost,
        fold_thresholds,
        threshold,
        combiner,
        len(samples(full)),
    )


def fold_judges(
    folder: Path, ab_raw: list[dict[str, Any]], windows: int
) -> tuple[list[NLIJudge], NLIJudge]:
    """The fine-tuned models of ``training/finetune_nli.py``: one per fold, then the one
    fine-tuned on all of AttributionBench. Refuses a fold model that was trained on a row of
    the fold it is to be measured on."""
    ids = [r["id"] for r in ab_raw]
    folds = folds_of(len(ids), FOLDS)
    judges = []
    for name in model_names(FOLDS):
        manifest = json.loads((folder / name / MANIFEST).read_text("utf-8"))
        trained = set(manifest["train_ids"])
        if name == "all":
            expected = set(ids)
        else:
            k = int(name.removeprefix("fold"))
            expected = {i for i, f in zip(ids, folds, strict=True) if f != k}
            leaked = trained & {i for i, f in zip(ids, folds, strict=True) if f == k}
            if leaked:
                sys.exit(f"{name} was fine-tuned on {len(leaked)} rows of its held-out fold")
        if trained != expected:
            sys.exit(f"{name} was fine-tuned on other rows than this run's folds (--limit?)")
        model = folder / name / "model.int8.onnx"
        judges.append(NLIJudge(model, placeholder_combiner(), windows=windows))
    if any(j.encoder is None for j in judges):
        sys.exit(f"could not load the models in {folder}")
    return judges[:-1], judges[-1]


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
    if len(judge.encoder.labels) == 2:  # entailment against the rest
        right = sum((int(p.argmax()) == 0) == (g == 0) for p, g in zip(probs, golds, strict=True))
    else:
        right = sum(int(p.argmax()) == g for p, g in zip(probs, golds, strict=True))
    return right / len(golds), len(golds), len(golds) / max(seconds, 1e-9)


def _fmt(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.3f} {r[1]:.2f} {r[2]:.2f}"


COLUMNS = (
    ("local", "LocalJudge"),
    ("semantic", "SemanticJudge"),
    ("nli", "NLIJudge"),
    ("alone", "model alone"),
    ("tuned", "NLI fold-tuned"),
    ("tuned_alone", "tuned alone"),
)


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
    parser.add_argument(
        "--windows", type=int, default=1, help="evidence windows the model reads per claim"
    )
    parser.add_argument(
        "--fold-models",
        type=Path,
        default=None,
        help="add the models of training/finetune_nli.py --out DIR (fine-tuned per fold)",
    )
    args = parser.parse_args()
    data = default_data_dir() if args.data is None else args.data
    try:
        semantic = gw.SemanticJudge()
        judge = NLIJudge(args.model, placeholder_combiner(), windows=args.windows)
    except ImportError as exc:
        sys.exit(f"skipped: {exc}")
    if judge.encoder is None:
        sys.exit(f"could not load {args.model}")

    ab_raw = load_rows(data / f"{AB}.jsonl", args.limit)
    evaluated = {
        r["id"]
        for name in (AB, FB, ZH)
        if (data / f"{name}.jsonl").exists()
        for r in load_rows(data / f"{name}.jsonl")
    }
    has_manifest, leaked = leaked_rows(args.model, evaluated)
    if leaked:
        sys.exit(
            f"refused: {manifest_of(args.model)} lists {len(leaked)} evaluated rows "
            f"(e.g. {sorted(leaked)[:3]})"
        )
    print(
        f"{manifest_of(args.model)}: no evaluated row among its training rows"
        if has_manifest
        else f"note: {args.model} has no {manifest_of(args.model).name}; its training rows are "
        "not checked",
        flush=True,
    )
    print("measuring AttributionBench dev with the model ...", flush=True)
    tuned_judges = fold_judges(args.fold_models, ab_raw, args.windows) if args.fold_models else None
    start = time.process_time()
    ab = measure(judge, ab_raw)
    print(f"  {time.process_time() - start:.0f} s CPU", flush=True)
    chinese = [
        r
        for name in FIT_SETS
        if name != AB and (data / f"{name}.jsonl").exists()
        for r in measure_lexical(name, load_rows(data / f"{name}.jsonl", args.limit))
    ]
    fb_raw = load_rows(data / f"{FB}.jsonl", args.limit)
    zh_raw = (
        load_rows(data / f"{ZH}.jsonl", args.limit) if (data / f"{ZH}.jsonl").exists() else None
    )
    nli = nli_columns(judge, [ab] * FOLDS, ab, fb_raw, zh_raw, chinese, args.threshold)
    if args.combiner_out:
        text = json.dumps(combiner_json(nli.combiner, nli.claims, nli.threshold), indent=2)
        args.combiner_out.write_text(text + "\n", encoding="utf-8")
    tuned = None
    if tuned_judges is not None:
        folds, tuned_all = tuned_judges
        print("fold-tuned models: measuring AttributionBench dev with each ...", flush=True)
        tuned = nli_columns(
            tuned_all,
            [measure(j, ab_raw) for j in folds],
            measure(tuned_all, ab_raw),
            fb_raw,
            zh_raw,
            chinese,
            args.threshold,
        )
        assert args.fold_models is not None
        text = json.dumps(combiner_json(tuned.combiner, tuned.claims, tuned.threshold), indent=2)
        (args.fold_models / "all" / "combiner.json").write_text(text + "\n", encoding="utf-8")

    print("LocalJudge and SemanticJudge, held out ...", flush=True)
    others = calibrated_predictions(semantic, data, args.limit)
    gold_ab = [r.faithful for r in ab]
    fb_gold = [r["label"] == "faithful" for r in fb_raw]
    unseen = [i for i, r in enumerate(ab) if not encoder_half(r.id)]
    ab_preds: dict[str, list[bool]] = {
        "local": others[AB]["local"],
        "semantic": others[AB]["semantic"],
        "nli": nli.ab,
        "alone": nli.ab_alone,
    }
    fb_preds: dict[str, list[bool]] = {
        "local": others[FB]["local"],
        "semantic": others[FB]["semantic"],
        "nli": nli.fb,
        "alone": nli.fb_alone,
    }
    if tuned is not None:
        ab_preds |= {"tuned": tuned.ab, "tuned_alone": tuned.ab_alone}
        fb_preds |= {"tuned": tuned.fb, "tuned_alone": tuned.fb_alone}
    table: dict[str, dict[str, tuple[float, float, float]]] = {
        "attributionbench_dev (5-fold)": {k: rates(v, gold_ab) for k, v in ab_preds.items()},
        f"  unseen passages ({len(unseen)})": {
            k: rates([v[i] for i in unseen], [gold_ab[i] for i in unseen])
            for k, v in ab_preds.items()
        },
        "faithbench_dev (never fitted)": {k: rates(v, fb_gold) for k, v in fb_preds.items()},
    }
    if zh_raw is not None:
        zh_gold = [r["label"] == "faithful" for r in zh_raw]
        zh_local = rates(run_judge(gw.LocalJudge(), zh_raw)[0], zh_gold)
        assert nli.zh is not None
        zh_nli = rates(nli.zh, zh_gold)
        # English models: SemanticJudge gives the local verdicts, the models read no claim.
        row = {"local": zh_local, "semantic": zh_local, "nli": zh_nli, "alone": zh_nli}
        if tuned is not None and tuned.zh is not None:
            row |= dict.fromkeys(("tuned", "tuned_alone"), rates(tuned.zh, zh_gold))
        table["uhgeval_zh_dev (shipped lexical)"] = row

    columns = [(k, title) for k, title in COLUMNS if k in ab_preds]
    print(
        "\nBA R+ R- (grounded vs not); FaithBench: shipped lexical calibrations, combiner fit "
        "on all of AttributionBench"
    )
    print(f"{'dataset':36} " + " ".join(f"{title:>15}" for _, title in columns))
    for name, r in table.items():
        print(f"{name:36} " + " ".join(f"{_fmt(r[k]):>15}" for k, _ in columns))
    print("(UHGEval: the models are English and read no Chinese claim; SemanticJudge = Local)")

    variants = [("NLIJudge", judge, nli)]
    if tuned_judges is not None and tuned is not None:
        variants.append(("NLI fold-tuned (all-AB model)", tuned_judges[1], tuned))
        print(f"\nfold-tuned combiner thresholds per fold: {tuned.fold_thresholds}")
    print()
    for label, j, _ in variants if args.snli_test.exists() else []:
        acc, n, pairs_per_s = snli_accuracy(j, args.snli_test, args.limit)
        assert j.encoder is not None
        print(
            f"SNLI test, {len(j.encoder.labels)}-way accuracy of the {label}: {acc:.3f} ({n} "
            f"pairs, {pairs_per_s:.0f} pairs/s on one core)"
        )

    speed = ab_raw[: args.speed_rows]
    print(f"\nanswers/s on one core (CPU time), first {len(speed)} AttributionBench rows:")
    for label, sj in (
        ("LocalJudge", gw.LocalJudge()),
        ("SemanticJudge", semantic),
        ("NLIJudge", judge),
    ):
        print(f"  {label:14} {1 / run_judge(sj, speed)[1]:8.1f}")
    print(f"  NLIJudge on FaithBench: {1 / nli.fb_cost:.1f} answers/s")

    print()
    ab_name, fb_name = "attributionbench_dev (5-fold)", "faithbench_dev (never fitted)"
    zh_name = "uhgeval_zh_dev (shipped lexical)"
    for label, key in [("NLIJudge", "nli")] + ([("NLI fold-tuned", "tuned")] if tuned else []):
        ab_ba, ab_faithful, ab_hallucinated = table[ab_name][key]
        fb_ba, fb_local = table[fb_name][key][0], table[fb_name]["local"][0]
        ab_wanted = table[ab_name]["local"][0] + AB_GAIN
        held = {
            f"AttributionBench {ab_ba:.3f} >= LocalJudge + {AB_GAIN}": ab_ba >= ab_wanted,
            f"recall faithful {ab_faithful:.2f}, hallucinated {ab_hallucinated:.2f} >= "
            f"{MIN_RECALL}": min(ab_faithful, ab_hallucinated) >= MIN_RECALL,
            f"FaithBench {fb_ba:.3f} >= LocalJudge - {FB_LOSS}": fb_ba >= fb_local - FB_LOSS,
        }
        if zh_name in table:
            held["UHGEval unchanged"] = table[zh_name][key] == table[zh_name]["local"]
        print(f"stop rule (issue #30), {label}:")
        for what, ok in held.items():
            print(f"  {'holds' if ok else 'FAILS'}  {what}")
        print(f"  -> {'SHIP' if all(held.values()) else 'do not ship'}")


if __name__ == "__main__":
    main()
