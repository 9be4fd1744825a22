"""How the label rule on thin contexts moves the local judge's labels on the dev sets.

For each dev set in ``../shared/data``: the label counts of the shipped local judge, the
balanced accuracy (BA) of "flagged" (``hallucinated`` or ``insufficient_context``) against the
human labels, the share of rows labelled ``hallucinated`` among the human-hallucinated ones
(what ``check``'s flag share counts: ``insufficient_context`` is a retrieval failure, not a
flag), and the AUC of ``hallucination_probability``. Run it on two checkouts to compare
rules (``PYTHONPATH=<checkout>/src``). AttributionBench and UHGEval are the sets the shipped
decision layer is fitted on (compare the change there, not the level); FaithBench is held out.

Usage::

    python benchmarks/context_labels.py [--data ../shared/data] [--limit N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("attributionbench_dev", "faithbench_dev", "uhgeval_zh_dev")


def auc(scores: Sequence[float], golds: Sequence[bool]) -> float:
    """The probability that a hallucinated row scores above a faithful one (ties count half)."""
    ranked = sorted(zip(scores, golds, strict=True))
    positives = sum(golds)
    negatives = len(golds) - positives
    if not positives or not negatives:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + j + 1) / 2  # ranks i+1..j
        rank_sum += mean_rank * sum(g for _, g in ranked[i:j])
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=0, help="rows per set (0: all)")
    parser.add_argument("--json", type=Path, help="also write each row's label here")
    args = parser.parse_args(argv)
    import groundwatch as gw

    judge = gw.LocalJudge()
    out: dict[str, list[tuple[str, str, float | None]]] = {}
    print(f"groundwatch from {Path(gw.__file__).parent}")
    print(
        "set | rows | grounded | hallucinated | insufficient | no_claims | BA flagged | "
        "recall hallucinated | AUC probability"
    )
    for name in DATASETS:
        path = args.data / f"{name}.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        if args.limit:
            rows = rows[: args.limit]
        labels: list[str] = []
        probabilities: list[float] = []
        golds = [row["label"] == "hallucinated" for row in rows]
        for row in rows:
            ev = gw.evaluate(
                row["answer"], row["context"], question=row["question"] or None, judge=judge
            )
            labels.append(ev.label)
            probabilities.append(ev.hallucination_probability or 0.0)
        out[name] = [
            (r["id"], lab, p) for r, lab, p in zip(rows, labels, probabilities, strict=True)
        ]
        counts = Counter(labels)
        flagged = [lab in ("hallucinated", "insufficient_context") for lab in labels]
        pos = [f for f, g in zip(flagged, golds, strict=True) if g]
        neg = [not f for f, g in zip(flagged, golds, strict=True) if not g]
        ba = (sum(pos) / max(1, len(pos)) + sum(neg) / max(1, len(neg))) / 2
        hallucinated = [lab == "hallucinated" for lab, g in zip(labels, golds, strict=True) if g]
        print(
            f"{name} | {len(rows)} | {counts['grounded']} | {counts['hallucinated']} | "
            f"{counts['insufficient_context']} | {counts['no_claims']} | {ba:.4f} | "
            f"{sum(hallucinated) / max(1, len(hallucinated)):.4f} | "
            f"{auc(probabilities, golds):.4f}"
        )
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
