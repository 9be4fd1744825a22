"""groundwatch's PPI++ from the running sums against the authors' ``ppi-python``.

``groundwatch.estimate_rate`` computes prediction-powered inference with a power-tuned weight
(PPI++) from eleven sums that add across replicas; ``ppi-python`` (Angelopoulos, Duchi, Zrnic)
computes it from the arrays. This script draws streams of judged answers (rates 2-50 %,
500-5,000 answers, 50-400 audit labels, judges from useless to sharp), runs both on each and
prints the largest difference in the point estimate and in the bounds. ``ppi-python`` pulls in
numba, pandas, statsmodels and scikit-learn (about 600 MB), so it lives in a venv of its own::

    python -m venv /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python pydantic
    PYTHONPATH=src /tmp/ppivenv/bin/python benchmarks/ppi_reference.py --streams 2000

Streams whose audit holds fewer than five labels of either kind are counted apart: there
groundwatch uses the labels' own (Wilson) interval instead (``_estimate.MIN_LABELS_EACH_KIND``).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from statistics import NormalDist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from groundwatch.rates import RateTotals
from groundwatch.rates._estimate import ppi_interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    worst_point = worst_bound = 0.0
    compared = skipped = 0
    for _ in range(args.streams):
        size = rng.choice((500, 1000, 2000, 5000))
        labelled = rng.choice((50, 100, 200, 400))
        rate = rng.choice((0.02, 0.05, 0.1, 0.2, 0.3, 0.5))
        signal = rng.uniform(0.0, 5.0)
        confidence = rng.choice((0.8, 0.9, 0.95, 0.99))
        truth = [1.0 if rng.random() < rate else 0.0 for _ in range(size)]
        f = [1 / (1 + math.exp(-(signal * (y - 0.5) + rng.gauss(0, 1)))) for y in truth]
        audited = set(rng.sample(range(size), labelled))
        totals = RateTotals.from_answers(
            [p > 0.5 for p in f], f, [bool(truth[i]) if i in audited else None for i in range(size)]
        )
        mine = ppi_interval(totals, NormalDist().inv_cdf(0.5 + confidence / 2))
        if mine is None:
            skipped += 1
            continue
        order = sorted(audited)
        y = np.array([truth[i] for i in order])
        yhat = np.array([f[i] for i in order])
        rest = np.array([p for i, p in enumerate(f) if i not in audited])
        point = float(ppi_mean_pointestimate(y, yhat, rest, lam=None)[0])
        lower, upper = ppi_mean_ci(y, yhat, rest, alpha=1 - confidence, lam=None)
        worst_point = max(worst_point, abs(mine[0] - point))
        worst_bound = max(worst_bound, abs(mine[1] - lower[0]), abs(mine[2] - upper[0]))
        compared += 1
    print(f"streams compared with ppi-python: {compared} (labels alone: {skipped})")
    print(f"largest difference, point estimate: {worst_point:.2e}")
    print(f"largest difference, interval bounds: {worst_bound:.2e}")


if __name__ == "__main__":
    main()
