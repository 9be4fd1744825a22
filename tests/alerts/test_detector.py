"""The drop detector: statistics, hysteresis, floors, thread safety."""

from __future__ import annotations

import random
import threading

import pytest

from groundwatch.alerts import (
    Alert,
    DropDetector,
    MeanDesign,
    RateDesign,
    cusum_arl,
    threshold_for_arl,
)
from groundwatch.types import Evaluation


def ev(label: str, g: float | None = 1.0, f: float | None = 1.0) -> Evaluation:
    return Evaluation(label=label, groundedness=g, faithfulness=f)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_arl_matches_closed_form_random_walk() -> None:
    # Symmetric +-1 walk reflected at 0, absorbed at 3: L0 = 12 by hand.
    assert cusum_arl({1: 0.5, -1: 0.5}, 3) == pytest.approx(12.0)
    # Always up by one: the run length is exactly the threshold.
    assert cusum_arl({1: 1.0}, 7) == pytest.approx(7.0)
    # Never up: never alarms.
    assert cusum_arl({-1: 1.0}, 5) == float("inf")


def test_arl_matches_simulation() -> None:
    d = RateDesign.build(0.05, 0.15, 300)
    rng = random.Random(3)
    lengths = []
    for _ in range(1500):
        s = n = 0
        while s < d.h:
            n += 1
            s = max(0, s + d.step(1.0 if rng.random() < 0.1 else 0.0))
        lengths.append(n)
    simulated = sum(lengths) / len(lengths)
    assert simulated == pytest.approx(d.arl(0.1), rel=0.08)


def test_threshold_is_smallest_meeting_target() -> None:
    law = {20: 0.05, -2: 0.95}
    h = threshold_for_arl(law, 5000)
    assert cusum_arl(law, h) >= 5000 > cusum_arl(law, h - 1)


def test_rate_design_trades_false_alarms_for_delay() -> None:
    low = RateDesign.build(0.05, 0.15, 5_000)
    high = RateDesign.build(0.05, 0.15, 50_000)
    assert low.h < high.h
    assert 5_000 <= low.arl(0.05) < high.arl(0.05)
    assert low.arl(0.20) < high.arl(0.20) < 80


def test_no_alert_before_warmup_and_stable_traffic_is_quiet() -> None:
    det = DropDetector(warmup=200, floors=None)
    rng = random.Random(11)
    alerts = []
    for _ in range(3000):
        h = rng.random() < 0.05
        alerts += det.update(ev("hallucinated" if h else "grounded", 0.3 if h else 1.0))
    assert alerts == []
    assert det.design("flag_share") is not None


def test_step_fires_once_then_resolves() -> None:
    clock = Clock()
    det = DropDetector(warmup=300, floors=None, scores=("flag_share",), clock=clock)
    rng = random.Random(5)

    def run(p: float, n: int) -> list[tuple[int, Alert]]:
        out = []
        for i in range(n):
            for a in det.update(ev("hallucinated" if rng.random() < p else "grounded"), "faq"):
                out.append((i, a))
        return out

    assert run(0.05, 600) == []
    fired = run(0.30, 400)
    # One alert for the whole episode, however long it lasts.
    assert [a.kind for _, a in fired] == ["fired"]
    i, alert = fired[0]
    assert i < 100
    assert alert.score == "flag_share" and alert.route == "faq"
    assert alert.method == "cusum"
    assert alert.baseline == pytest.approx(0.05, abs=0.03)
    assert alert.current > 0.15 and alert.evaluations > 0
    assert alert.time > 1000.0
    assert "rose from" in alert.message and "'faq'" in alert.message
    resolved = run(0.02, 600)
    assert [a.kind for _, a in resolved] == ["resolved"]
    # Resolution waits for the statistic to drain: not at the first good answer.
    assert resolved[0][0] > 20
    assert resolved[0][1].current < 0.1


def test_mean_drop_fires_for_groundedness_and_faithfulness() -> None:
    det = DropDetector(warmup=200, floors=None, scores=("groundedness", "faithfulness"))
    rng = random.Random(2)
    for _ in range(400):
        g = rng.choice([1.0, 1.0, 1.0, 0.75, 0.8])
        assert det.update(ev("grounded", g, 1.0 if rng.random() < 0.98 else 0.5)) == []
    kinds: dict[str, list[str]] = {}
    for _ in range(300):
        for a in det.update(ev("hallucinated", rng.choice([0.25, 0.5, 0.6]), 0.6)):
            kinds.setdefault(a.score, []).append(a.kind)
    assert kinds == {"groundedness": ["fired"], "faithfulness": ["fired"]}
    design = det.design("groundedness")
    assert isinstance(design, MeanDesign) and design.mu0 > 0.85


def test_routes_are_independent() -> None:
    det = DropDetector(warmup=100, floors=None, scores=("flag_share",))
    rng = random.Random(9)
    for _ in range(200):
        for route in ("a", "b"):
            det.update(ev("hallucinated" if rng.random() < 0.05 else "grounded"), route)
    fired = []
    for _ in range(300):
        fired += det.update(ev("grounded"), "a")
        fired += det.update(ev("hallucinated" if rng.random() < 0.5 else "grounded"), "b")
    assert [(a.route, a.kind) for a in fired] == [("b", "fired")]


def test_floor_fires_during_warmup_with_hysteresis() -> None:
    det = DropDetector(
        warmup=10_000,
        floors={"flag_share": 0.3},
        floor_window=20,
        floor_margin=0.1,
        scores=("flag_share",),
    )
    seq = [0] * 20 + [1] * 8  # window of 20: 8/20 = 0.4 > 0.3
    out = [a for x in seq for a in det.update(ev("hallucinated" if x else "grounded"))]
    assert [(a.kind, a.method) for a in out] == [("fired", "floor")]
    assert out[0].baseline is None and out[0].current > 0.3 and out[0].evaluations == 20
    # 0.25 is below the ceiling but inside the margin: still firing.
    out = [a for _ in range(3) for a in det.update(ev("grounded"))]
    assert out == []
    out = [a for _ in range(20) for a in det.update(ev("grounded"))]
    assert [a.kind for a in out] == ["resolved"]


def test_errors_are_ignored_and_the_flag_share_counts_every_judged_answer() -> None:
    det = DropDetector(warmup=5)
    for _ in range(50):
        assert det.update(ev("error", None, None)) == []
    assert det.state() == []
    # The flag share's population is every judged answer, as the rate estimate's: no_claims
    # and insufficient_context count as not flagged; they have no score for the means.
    det.update(ev("no_claims", None, None))
    det.update(ev("insufficient_context", 0.0, 1.0))
    state = {s["score"]: s for s in det.state()}
    assert state["flag_share"]["window_mean"] == 0.0
    assert state["flag_share"]["evaluations"] == 2
    assert state["groundedness"]["window_mean"] == 0.0


def test_the_former_series_name_warns_and_keeps_working() -> None:
    with pytest.warns(FutureWarning, match="flag_share"):
        det = DropDetector(scores=("hallucination_rate",), floors={"hallucination_rate": 0.3})  # type: ignore[arg-type]
    assert det.scores == ("flag_share",) and det.floors == {"flag_share": 0.3}
    with pytest.warns(FutureWarning):
        assert det.design("hallucination_rate") is None  # type: ignore[arg-type]


def test_adaptive_baseline_follows_slow_drift() -> None:
    frozen = DropDetector(warmup=300, floors=None, scores=("flag_share",))
    adapting = DropDetector(warmup=300, floors=None, scores=("flag_share",), adapt_halflife=1000)
    rng = random.Random(5)
    fired = {"frozen": 0, "adapting": 0}
    p = 0.02
    for i in range(12_000):
        if i > 300:
            p = min(0.12, p + 0.00002)  # a rise slow enough to be seasonal
        label = "hallucinated" if rng.random() < p else "grounded"
        fired["frozen"] += sum(a.kind == "fired" for a in frozen.update(ev(label)))
        fired["adapting"] += sum(a.kind == "fired" for a in adapting.update(ev(label)))
    assert fired["frozen"] == 1  # one episode, no flapping
    frozen_design = frozen.design("flag_share")
    adapted = adapting.design("flag_share")
    assert isinstance(frozen_design, RateDesign) and isinstance(adapted, RateDesign)
    assert frozen_design.p0 < 0.06 < 0.1 < adapted.p0
    assert fired["adapting"] <= fired["frozen"]


def test_update_is_thread_safe() -> None:
    det = DropDetector(warmup=50, floors=None, scores=("flag_share",))
    for i in range(100):
        det.update(ev("hallucinated" if i % 20 == 0 else "grounded"))
    barrier = threading.Barrier(4)
    results: list[Alert] = []

    def worker() -> None:
        barrier.wait()
        for i in range(2000):
            results.extend(det.update(ev("hallucinated" if i % 2 else "grounded")))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = det.state()[0]
    assert state["evaluations"] == 8100
    assert [a.kind for a in results] == ["fired"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        DropDetector(warmup=1)
    with pytest.raises(ValueError):
        DropDetector(scores=("latency",))  # type: ignore[arg-type]


def test_routes_are_bounded() -> None:
    det = DropDetector(warmup=5, max_routes=3, scores=("flag_share",))
    for i in range(10):
        det.update(ev("grounded"), route=f"user-{i}")
    assert {s["route"] for s in det.state()} == {"user-0", "user-1", "user-2"}
    assert det.routes_dropped == 7
    det.update(ev("grounded"), route="user-1")  # a watched route keeps working
    assert det.routes_dropped == 7
