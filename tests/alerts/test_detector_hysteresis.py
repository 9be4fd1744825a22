"""The drop detector's resolve rule holds while the drift holds: an alert resolves once the
series is back on its baseline's side of the CUSUM's indifference level, not at the first lucky
run of good answers in the middle of a drift (synthetic score series, no demo)."""

from __future__ import annotations

import random

import pytest

from groundwatch.alerts import Alert, DropDetector, ScoreName


def _feed(det: DropDetector, score: ScoreName, values: list[float]) -> list[tuple[int, str]]:
    out = []
    for i, x in enumerate(values):
        alert: Alert | None = det.observe(score, x)
        if alert is not None:
            out.append((i, alert.kind))
    return out


def _faithfulness(rng: random.Random, n: int, contradicted: float) -> list[float]:
    """Per-answer faithfulness: 1.0, or 0.0 / 0.5 on an answer with a contradicted claim."""
    return [rng.choice([0.0, 0.5]) if rng.random() < contradicted else 1.0 for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_a_sparse_sustained_drop_fires_once_and_resolves_only_after_it_ends(seed: int) -> None:
    # As in the demo: a clean baseline, then one answer in eight contradicts its context.
    rng = random.Random(seed)
    det = DropDetector(warmup=40, mean_target_arl=500, floors=None, scores=("faithfulness",))
    assert _feed(det, "faithfulness", _faithfulness(rng, 40, 0.0)) == []
    drift = _feed(det, "faithfulness", _faithfulness(rng, 1500, 0.125))
    assert [kind for _, kind in drift] == ["fired"], drift
    back = _feed(det, "faithfulness", _faithfulness(rng, 300, 0.0))
    assert [kind for _, kind in back] == ["resolved"], back


@pytest.mark.parametrize("seed", range(8))
def test_a_sustained_rate_rise_near_the_alarm_level_does_not_flap(seed: int) -> None:
    rng = random.Random(100 + seed)
    det = DropDetector(warmup=300, floors=None, scores=("flag_share",))
    assert _feed(det, "flag_share", [float(rng.random() < 0.03) for _ in range(300)]) == []
    design = det.design("flag_share")
    assert design is not None
    # A rise to the level the CUSUM is tuned for, held for a long time.
    p1 = design.p1  # type: ignore[union-attr]
    drift = _feed(det, "flag_share", [float(rng.random() < p1) for _ in range(4000)])
    assert [kind for _, kind in drift] == ["fired"], drift
    back = _feed(det, "flag_share", [float(rng.random() < 0.03) for _ in range(1200)])
    assert [kind for _, kind in back] == ["resolved"], back
