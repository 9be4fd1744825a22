"""Fit ``NLIJudge``'s combiner: lexical measurements + the model's probabilities -> backed?

The cross-encoder is trained without any AttributionBench label (``training/train_nli.py``);
this small logistic model is the only part fitted on labels: AttributionBench dev claims (the
labels of ``calibrate_local.py``) that no lexical rule decides. ``benchmarks/nli.py`` refits it
on four folds and measures the fifth; FaithBench is never fitted on.

Usage::

    python training/calibrate_nli.py --model /work/nli-run/model/model.int8.onnx \\
        [--out /work/nli-run/model/combiner.json] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_local import REGULARISATION_C, _claim_labels, default_data_dir, load_rows  # noqa: E402

from groundwatch._inputs import prepare  # noqa: E402
from groundwatch.judging.judges._calibration import Calibration, LogisticModel  # noqa: E402
from groundwatch.judging.judges.local import ClaimFeatures, LocalJudge  # noqa: E402
from groundwatch.judging.judges.nli import NLI_FEATURES, NLIJudge, nli_vector  # noqa: E402
from groundwatch.judging.scoring import context_is_substantive  # noqa: E402
from groundwatch.types import Claim, Evidence, Passage  # noqa: E402

FIT_SET = "attributionbench_dev"
Probs = tuple[float, float, float, Evidence]


@dataclass
class NLIRow:
    """One answer: its claims as the lexical judge measured them, the model's probabilities for
    the claims it reads (``None`` for the others) and the claim labels where known."""

    id: str
    faithful: bool
    substantive: bool
    passages: list[Passage]
    claims: list[Claim]
    features: list[ClaimFeatures]
    probs: list[Probs | None]
    claim_labels: list[bool | None]


def placeholder_combiner() -> LogisticModel:
    """A combiner that is never asked (measuring needs the model, not the combiner)."""
    return LogisticModel(coef=(0.0,) * len(NLI_FEATURES), intercept=0.0)


def measure(judge: NLIJudge, rows: Sequence[dict[str, Any]]) -> list[NLIRow]:
    """Measure every claim and run the model once per claim it reads."""
    lexical = LocalJudge(calibrated=False)  # measurements do not depend on the calibration
    out = []
    for r in rows:
        answer, passages, question, _ = prepare(
            r["answer"], r["context"], r.get("question") or None
        )
        judged = lexical.judge_with_features(answer, passages, question)
        spans = [(c.start or 0, c.end or 0) for c, _ in judged]
        out.append(
            NLIRow(
                id=r["id"],
                faithful=r["label"] == "faithful",
                substantive=context_is_substantive(passages),
                passages=passages,
                claims=[c for c, _ in judged],
                features=[f for _, f in judged],
                probs=judge.entailment(judged, passages),
                claim_labels=_claim_labels(r, spans, len(judged)),
            )
        )
    return out


def samples(rows: Sequence[NLIRow]) -> list[tuple[list[float], bool]]:
    """(combiner inputs, backed?) for every labelled claim the model reads."""
    return [
        (nli_vector(f, p[0], p[2]), label)
        for row in rows
        for f, p, label in zip(row.features, row.probs, row.claim_labels, strict=True)
        if p is not None and label is not None
    ]


def fit_combiner(data: Sequence[tuple[list[float], bool]]) -> LogisticModel:
    from sklearn.linear_model import LogisticRegression

    # Balanced classes, as the local judge's own model: the combiner decides every open claim.
    model = LogisticRegression(C=REGULARISATION_C, max_iter=5000, class_weight="balanced")
    model.fit([x for x, _ in data], [int(y) for _, y in data])
    return LogisticModel(
        coef=tuple(float(c) for c in model.coef_[0]), intercept=float(model.intercept_[0])
    ).expect(NLI_FEATURES)


def verdicts(
    judge: NLIJudge, row: NLIRow, calibration: Calibration | None, combiner: LogisticModel
) -> list[str]:
    """Each claim's final verdict under a given lexical calibration and combiner: the same
    decisions ``NLIJudge.judge`` takes, on the cached model outputs."""
    local = LocalJudge(calibration=calibration)
    judge.combiner = combiner
    out = []
    for claim, f, p in zip(row.claims, row.features, row.probs, strict=True):
        verdict = local.decide(f)[0]
        if p is not None:
            verdict = judge.decide(claim.model_copy(update={"verdict": verdict}), f, p).verdict
        out.append(verdict)
    return out


def combiner_json(model: LogisticModel, claims: int) -> dict[str, Any]:
    return {
        "version": 1,
        "features": list(NLI_FEATURES),
        "model": model.to_json(),
        "meta": {"fitted_on": [FIT_SET], "claims": claims, "script": "training/calibrate_nli.py"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=default_data_dir())
    args = parser.parse_args(argv)
    judge = NLIJudge(args.model, placeholder_combiner())
    print(f"measuring {FIT_SET} ...", flush=True)
    rows = measure(judge, load_rows(args.data / f"{FIT_SET}.jsonl"))
    data = samples(rows)
    model = fit_combiner(data)
    for name, c in zip(NLI_FEATURES, model.coef, strict=True):
        print(f"  {name:<22}{c:>9.3f}")
    print(f"  {'intercept':<22}{model.intercept:>9.3f}  ({len(data)} claims)")
    out = args.out or args.model.parent / "combiner.json"
    out.write_text(json.dumps(combiner_json(model, len(data)), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
