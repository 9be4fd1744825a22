"""Fit ``NLIJudge``'s combiner: lexical measurements + the model's probabilities -> backed?

The cross-encoder is trained without any AttributionBench label (``training/train_nli.py``);
this small logistic model is the only part fitted on labels: AttributionBench dev claims (the
labels of ``calibrate_local.py``) that no lexical rule decides. ``benchmarks/nli.py`` refits it
on four folds and measures the fifth; FaithBench is never fitted on.

The functions here are used by ``benchmarks/nli.py``, which measures the combiner held out and
writes the one fitted on all of AttributionBench (``--combiner-out``), with its threshold chosen
on answer labels by the same grounded-or-not rule the benchmark scores with.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_local import REGULARISATION_C, _claim_labels  # noqa: E402

from groundwatch._shared.inputs import prepare  # noqa: E402
from groundwatch.judging.judges.local import LocalJudge  # noqa: E402
from groundwatch.judging.judges.local._calibration import Calibration, LogisticModel  # noqa: E402
from groundwatch.judging.judges.local._features import ClaimFeatures  # noqa: E402
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
    lexical.candidate_windows = judge.local.candidate_windows
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


def labelled_claims(
    rows: Sequence[NLIRow],
) -> Iterator[tuple[Claim, ClaimFeatures, Probs, bool]]:
    """(claim, measurements, model output, backed?) of every labelled claim the model reads:
    what the combiner is fitted on, and what ``finetune_nli.py`` fine-tunes the model on."""
    for row in rows:
        for c, f, p, label in zip(
            row.claims, row.features, row.probs, row.claim_labels, strict=True
        ):
            if p is not None and label is not None:
                yield c, f, p, label


def samples(rows: Sequence[NLIRow]) -> list[tuple[list[float], bool]]:
    """(combiner inputs, backed?) for every labelled claim the model reads."""
    return [(nli_vector(f, p[0], p[2]), label) for _, f, p, label in labelled_claims(rows)]


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


THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(9))  # 0.3 .. 0.7


def best_threshold(
    judge: NLIJudge,
    rows: Sequence[NLIRow],
    calibration: Calibration | None,
    combiner: LogisticModel,
    grounded: Callable[[NLIRow, list[str]], bool],
) -> float:
    """The combiner threshold with the best answer-level balanced accuracy on ``rows``: the
    combiner is fitted on claims, but an answer is grounded only when most of its claims are
    backed, so the claim-level 0.5 rejects too many faithful answers."""

    def ba(t: float) -> float:
        judge.min_probability = t
        preds = [grounded(r, verdicts(judge, r, calibration, combiner)) for r in rows]
        pos = [p for p, r in zip(preds, rows, strict=True) if r.faithful]
        neg = [not p for p, r in zip(preds, rows, strict=True) if not r.faithful]
        return 0.5 * (sum(pos) / max(len(pos), 1) + sum(neg) / max(len(neg), 1))

    best = max(THRESHOLDS, key=lambda t: (ba(t), -abs(t - 0.5)))
    judge.min_probability = best
    return best


def combiner_json(model: LogisticModel, claims: int, threshold: float) -> dict[str, Any]:
    return {
        "version": 1,
        "features": list(NLI_FEATURES),
        "model": model.to_json(),
        "threshold": threshold,
        "meta": {"fitted_on": [FIT_SET], "claims": claims, "script": "benchmarks/nli.py"},
    }


if __name__ == "__main__":
    sys.exit(
        "the combiner and its threshold are fitted by benchmarks/nli.py --combiner-out PATH "
        "(which measures them held out first)"
    )
