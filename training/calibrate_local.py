"""Fit the local judge's decision layer
(``src/groundwatch/judging/judges/local/_calibration.json``).

The model is a logistic regression over the measurements ``LocalJudge`` takes of each claim
(``groundwatch.judging.judges.local._calibration.FEATURES``), predicting whether the context backs
the claim.
There is one model per script, each fitted on the claims of the dev set of its language in
``../shared/data``:

* AttributionBench dev (English): a claim of a faithful answer is backed; the claim of a
  one-claim hallucinated answer is not; longer hallucinated answers, whose bad claim is not
  marked, are left out.
* UHGEval dev (Chinese): a claim of a faithful continuation is backed; in a hallucinated one,
  a claim that holds a marked hallucinated span is not, the others are.

FaithBench is never fitted on (its licence allows evaluation only): it stays a held-out set.
Each set's two classes get equal total weight, so neither the larger set nor the larger class
decides the fit. The rules (contradictions, missing numbers and names) are not
fitted; their precision on the same claims is recorded as their confidence.

Usage::

    python training/calibrate_local.py [--data ../shared/data] [--out PATH] [--check]

``--check`` refits and exits non-zero if the result differs from the shipped file.
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

from groundwatch._shared.inputs import prepare  # noqa: E402
from groundwatch.judging.judges.local import LocalJudge, rule_of  # noqa: E402
from groundwatch.judging.judges.local._calibration import (  # noqa: E402
    FEATURES,
    SCRIPTS,
    Calibration,
    LogisticModel,
    feature_vector,
    script_of,
)
from groundwatch.judging.judges.local._features import ClaimFeatures  # noqa: E402
from groundwatch.judging.scoring import context_is_substantive  # noqa: E402

FIT_SETS = ("attributionbench_dev", "uhgeval_zh_dev")
SHIPPED = ROOT / "src" / "groundwatch" / "judging" / "judges" / "local" / "_calibration.json"
# L2 strength of the logistic regression (scikit-learn's C); 15 features, thousands of claims.
REGULARISATION_C = 1.0
MIN_RULE_CLAIMS = 20


@dataclass
class Row:
    """One dev answer with its claims' measurements and, where known, each claim's label."""

    dataset: str
    index: int
    faithful: bool
    source: str
    substantive: bool
    features: list[ClaimFeatures]
    claim_labels: list[bool | None]


def default_data_dir() -> Path:
    """``shared/data`` beside the repository (or beside the folder holding it)."""
    for parent in ROOT.parents:
        candidate = parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return (ROOT / ".." / "shared" / "data").resolve()


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit else rows


def _claim_labels(
    row: dict[str, Any], spans: Sequence[tuple[int, int]], n: int
) -> list[bool | None]:
    if row["label"] == "faithful":
        return [True] * n
    marked = [
        (s["start"], s["end"])
        for s in row.get("spans") or []
        if s.get("type") not in ("benign", "questionable")
    ]
    if marked:
        return [any(a < e and s < b for a, b in marked) is False for s, e in spans]
    return [False] if n == 1 else [None] * n


def measure(dataset: str, rows: Sequence[dict[str, Any]]) -> list[Row]:
    """Every row's claims measured by the local judge (the measurements do not depend on the
    calibration), with the claim labels the row's annotations give."""
    judge = LocalJudge(calibrated=False)
    out: list[Row] = []
    for i, r in enumerate(rows):
        answer, passages, question, _ = prepare(
            r["answer"], r["context"], r.get("question") or None
        )
        judged = judge.judge_with_features(answer, passages, question)
        spans = [(c.start or 0, c.end or 0) for c, _ in judged]
        out.append(
            Row(
                dataset=dataset,
                index=i,
                faithful=r["label"] == "faithful",
                source=r.get("source_dataset", dataset),
                substantive=context_is_substantive(passages),
                features=[f for _, f in judged],
                claim_labels=_claim_labels(r, spans, len(judged)),
            )
        )
    return out


def fit(rows: Sequence[Row]) -> Calibration:
    """Fit one logistic model per script and measure the contradiction rules on ``rows``."""
    from sklearn.linear_model import LogisticRegression

    data: dict[str, tuple[list[list[float]], list[int], list[tuple[str, bool]]]] = {
        script: ([], [], []) for script in SCRIPTS
    }
    fired: dict[str, list[int]] = {}
    for row in rows:
        for f, label in zip(row.features, row.claim_labels, strict=True):
            if label is None:
                continue
            xs, ys, groups = data[script_of(f)]
            xs.append(feature_vector(f))
            ys.append(int(label))
            groups.append((row.dataset, label))
            rule = rule_of(f)
            if rule is not None:
                # Every rule's verdict says "not backed": it is right when the label agrees.
                for key in (rule, f"{rule}:{script_of(f)}"):
                    right_n = fired.setdefault(key, [0, 0])
                    right_n[0] += not label
                    right_n[1] += 1
    models: dict[str, LogisticModel] = {}
    for script, (xs, ys, groups) in data.items():
        if len(set(ys)) < 2:
            raise ValueError(f"no claims of both classes to fit the {script} model on")
        totals: dict[tuple[str, bool], int] = {}
        for g in groups:
            totals[g] = totals.get(g, 0) + 1
        weights = [len(groups) / (len(totals) * totals[g]) for g in groups]
        model = LogisticRegression(C=REGULARISATION_C, max_iter=5000)
        model.fit(xs, ys, sample_weight=weights)
        models[script] = LogisticModel(
            coef=tuple(float(c) for c in model.coef_[0]), intercept=float(model.intercept_[0])
        )
    # Laplace-smoothed; a rule and script seen fewer than MIN_RULE_CLAIMS times falls back to
    # the rule over all scripts, and an unseen rule to the judge's default.
    precision = {
        key: (right + 1) / (n + 2)
        for key, (right, n) in sorted(fired.items())
        if ":" not in key or n >= MIN_RULE_CLAIMS
    }
    return Calibration(
        models=models,
        threshold=0.5,
        rule_precision=precision,
        meta={
            "fitted_on": sorted({r.dataset for r in rows}),
            "claims": {script: len(d[1]) for script, d in data.items()},
            "script": "training/calibrate_local.py",
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for name in FIT_SETS:
        path = args.data / f"{name}.jsonl"
        print(f"measuring {name} ...", flush=True)
        rows.extend(measure(name, load_rows(path)))
    calibration = fit(rows)
    data = calibration.to_json()
    print(f"fitted on {data['meta']['claims']} claims")
    print(f"  {'feature':<22}" + "".join(f"{s:>9}" for s in SCRIPTS))
    models = data["models"]
    for i, name in enumerate(FEATURES):
        print(f"  {name:<22}" + "".join(f"{models[s]['coef'][i]:>9.3f}" for s in SCRIPTS))
    print(f"  {'intercept':<22}" + "".join(f"{models[s]['intercept']:>9.3f}" for s in SCRIPTS))
    print(f"  rule precision: {data['rule_precision']}")
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if args.check:
        same = SHIPPED.read_text("utf-8") == text
        print("shipped file is up to date" if same else "shipped file differs from a refit")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
