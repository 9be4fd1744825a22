"""PPI++ from the sums against the authors' reference implementation, ``ppi-python``.

``ppi-python`` pulls in numba, pandas, statsmodels and scikit-learn (about 600 MB), too heavy
for requirements-dev.txt, so this module skips where it is not installed; ``.ci/run`` installs
it in a venv of its own and runs it there. ``benchmarks/ppi_reference.py`` runs the same
comparison on more streams.
"""

from __future__ import annotations

from statistics import NormalDist

import pytest

from groundwatch.rates._estimate import ppi_interval

from ..extras import require_ppi_reference
from .streams import stream

require_ppi_reference()

import numpy as np  # noqa: E402
import ppi_py as ppi  # noqa: E402


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95])
def test_ppi_matches_ppi_python(seed: int, confidence: float) -> None:
    drawn = stream(
        seed,
        size=(500, 1000, 2000)[seed % 3],
        rate=(0.02, 0.05, 0.1, 0.3, 0.5)[seed % 5],
        labelled=(100, 200, 400)[seed % 3],
        signal=1.0 + seed % 4,
    )
    mine = ppi_interval(drawn.totals, NormalDist().inv_cdf(0.5 + confidence / 2))
    if mine is None:  # too few labels of one kind: the labels alone apply
        assert min(sum(drawn.labels), len(drawn.labels) - sum(drawn.labels)) < 5
        return
    y = np.asarray(drawn.labels, dtype=float)
    yhat = np.asarray(drawn.labelled_predictions)
    unlabelled = np.asarray(drawn.unlabelled_predictions)
    point = ppi.ppi_mean_pointestimate(y, yhat, unlabelled, lam=None)
    lower, upper = ppi.ppi_mean_ci(y, yhat, unlabelled, alpha=1 - confidence, lam=None)
    assert mine == pytest.approx((float(point[0]), float(lower[0]), float(upper[0])), abs=1e-9)
