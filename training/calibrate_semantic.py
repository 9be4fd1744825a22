"""Fit ``SemanticJudge``'s second-look model (``judging/judges/local/_calibration_semantic.json``).

``SemanticJudge`` runs the calibrated ``LocalJudge`` first and gives the claims it left plainly
unsupported (no missing number or name, no contradiction; English text) a second look by
meaning. This script fits the logistic model that decides that second look: inputs are the
lexical measurements (``FEATURES``) plus the meaning match, the target is whether the context
backs the claim, on AttributionBench dev (claim labels as in ``calibrate_local.py``).
FaithBench is never fitted on. Needs ``pip install -e ".[semantic]"``.

Usage::

    python training/calibrate_semantic.py [--data ../shared/data] [--check]
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

from calibrate_local import (  # noqa: E402
    REGULARISATION_C,
    _claim_labels,
    default_data_dir,
    load_rows,
)

from groundwatch._shared.inputs import prepare  # noqa: E402
from groundwatch.judging.judges.local import LocalJudge  # noqa: E402
from groundwatch.judging.judges.local._calibration import (  # noqa: E402
    SEMANTIC_FEATURES,
    Calibration,
    LogisticModel,
    feature_vector,
)
from groundwatch.judging.judges.local._features import ClaimFeatures  # noqa: E402
from groundwatch.judging.judges.semantic import SemanticJudge  # noqa: E402
from groundwatch.judging.scoring import context_is_substantive  # noqa: E402

FIT_SET = "attributionbench_dev"
SHIPPED = ROOT / "src" / "groundwatch" / "judging" / "judges" / "local"
SHIPPED = SHIPPED / "_calibration_semantic.json"


@dataclass
class MatchedRow:
    """One answer: each claim's measurements, meaning match (where it can get a second look)
    and label."""

    faithful: bool
    substantive: bool
    features: list[ClaimFeatures]
    matches: list[float | None]
    claim_labels: list[bool | None]


def measure(judge: SemanticJudge, rows: Sequence[dict[str, Any]]) -> list[MatchedRow]:
    """Measure every claim and its meaning match once. The match is computed for every claim
    the second look could reach under any calibration (so folds can refit the first stage)."""
    first = LocalJudge(calibrated=False)  # measurements do not depend on the calibration
    out: list[MatchedRow] = []
    for r in rows:
        answer, passages, question, _ = prepare(
            r["answer"], r["context"], r.get("question") or None
        )
        judged = first.judge_with_features(answer, passages, question)
        # Present every claim that is not rejected for a number or name as "unsupported", so
        # the second look measures it whatever the first stage decides later.
        candidates = [
            (
                c.model_copy(update={"verdict": "unsupported"})
                if c.verdict != "contradicted"
                else c,
                f,
            )
            for c, f in judged
        ]
        found = judge.second_look(candidates, passages)
        spans = [(c.start or 0, c.end or 0) for c, _ in judged]
        out.append(
            MatchedRow(
                faithful=r["label"] == "faithful",
                substantive=context_is_substantive(passages),
                features=[f for _, f in judged],
                matches=[
                    m.score if m is not None and not m.negation_differs else None for m in found
                ],
                claim_labels=_claim_labels(r, spans, len(judged)),
            )
        )
    return out


def second_look_samples(
    rows: Sequence[MatchedRow], calibration: Calibration | None
) -> list[tuple[list[float], bool]]:
    """(inputs, backed?) for the claims the first stage leaves plainly unsupported."""
    judge = LocalJudge(calibration=calibration)
    out = []
    for row in rows:
        for f, m, label in zip(row.features, row.matches, row.claim_labels, strict=True):
            if m is None or label is None:
                continue
            verdict = judge.decide(f)[0]
            if verdict == "unsupported" and not (f.numbers_unmatched or f.novel_names):
                out.append(([*feature_vector(f), m], label))
    return out


def fit_second_look(samples: Sequence[tuple[list[float], bool]]) -> LogisticModel:
    from sklearn.linear_model import LogisticRegression

    # No class weights: the claims the first stage rejects are mostly unbacked, and the second
    # look must be calibrated to that population, or it promotes half of them.
    xs = [x for x, _ in samples]
    ys = [int(y) for _, y in samples]
    model = LogisticRegression(C=REGULARISATION_C, max_iter=5000)
    model.fit(xs, ys)
    return LogisticModel(
        coef=tuple(float(c) for c in model.coef_[0]), intercept=float(model.intercept_[0])
    ).expect(SEMANTIC_FEATURES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = parser.parse_args(argv)
    judge = SemanticJudge()
    print(f"measuring {FIT_SET} (the meaning match of every claim) ...", flush=True)
    rows = measure(judge, load_rows(args.data / f"{FIT_SET}.jsonl"))
    samples = second_look_samples(rows, None)
    model = fit_second_look(samples)
    data = {
        "version": 1,
        "features": list(SEMANTIC_FEATURES),
        "model": model.to_json(),
        "meta": {
            "fitted_on": [FIT_SET],
            "claims": len(samples),
            "script": "training/calibrate_semantic.py",
        },
    }
    for name, c in zip(SEMANTIC_FEATURES, data["model"]["coef"], strict=True):
        print(f"  {name:<22}{c:>9.3f}")
    print(f"  {'intercept':<22}{data['model']['intercept']:>9.3f}  ({len(samples)} claims)")
    text = json.dumps(data, indent=2) + "\n"
    if args.check:
        same = SHIPPED.read_text("utf-8") == text
        print("shipped file is up to date" if same else "shipped file differs from a refit")
        return 0 if same else 1
    SHIPPED.write_text(text, encoding="utf-8")
    print(f"wrote {SHIPPED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
