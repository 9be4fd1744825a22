"""Drop-detector benchmark: false alarms at a stable rate, detection delay after a step.

Simulated traffic, seeded. Each evaluation is hallucinated with probability ``p``; its
groundedness and faithfulness are drawn from a claim-level model (answers of 2-6 claims; a
grounded answer has at most one unsupported claim, a hallucinated one has several, sometimes a
contradicted one), so the mean series move with the rate as they do in production.

* False alarms: every run warms up on ``--warmup`` evaluations at 5 %, then watches
  ``--length`` more at 5 %; every ``fired`` alert of any series is a false alarm.
* Delay: warm-up at 5 %, ``--settle`` more at 5 % (so the statistic is in its steady state),
  then a step to 20 %; the delay is the number of evaluations after the step until the
  hallucination-rate alert fires (runs with a false alarm before the step are counted apart).

    python benchmarks/alerts.py                 # default design, the figures in docs/alerts.md
    python benchmarks/alerts.py --sweep         # the trade-off table over target_arl
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from groundwatch.alerts import SCORE_NAMES, DropDetector, RateDesign

SERIES = ("hallucination_rate", "groundedness", "faithfulness")


def draw(rng: random.Random, p: float) -> tuple[float, float, float]:
    """One evaluation: (hallucinated 0/1, groundedness, faithfulness)."""
    n = rng.randint(2, 6)
    if rng.random() < p:
        unsupported = rng.randint(max(1, n // 2), n)
        contradicted = 1 if rng.random() < 0.4 else 0
        contradicted = min(contradicted, unsupported)
        return 1.0, (n - unsupported) / n, 1.0 - contradicted / n
    unsupported = 1 if rng.random() < 0.3 else 0
    return 0.0, (n - unsupported) / n, 1.0


def feed(det: DropDetector, rng: random.Random, p: float, count: int) -> list[tuple[int, str]]:
    """Feed ``count`` evaluations; returns (index, score) of each fired alert."""
    fired = []
    for i in range(count):
        values = draw(rng, p)
        for score, v in zip(SERIES, values, strict=True):
            alert = det.observe(score, v)  # type: ignore[arg-type]
            if alert is not None and alert.kind == "fired":
                fired.append((i, score))
    return fired


def false_alarms(runs: int, length: int, seed: int, **kw: float) -> dict[str, int]:
    counts = {s: 0 for s in SCORE_NAMES}
    for r in range(runs):
        rng = random.Random(seed * 1_000_003 + r)
        det = DropDetector(**kw)  # type: ignore[arg-type]
        feed(det, rng, 0.05, int(kw.get("warmup", 500)))
        for _, score in feed(det, rng, 0.05, length):
            counts[score] += 1
    return counts


def delays(runs: int, settle: int, seed: int, **kw: float) -> tuple[list[int], int, int]:
    out: list[int] = []
    early = missed = 0
    for r in range(runs):
        rng = random.Random(seed * 7_000_001 + r)
        det = DropDetector(**kw)  # type: ignore[arg-type]
        feed(det, rng, 0.05, int(kw.get("warmup", 500)) + settle)
        if det.state() and any(s["firing"] for s in det.state()):
            early += 1
            continue
        for i in range(2000):
            values = draw(rng, 0.20)
            hit = False
            for score, v in zip(SERIES, values, strict=True):
                alert = det.observe(score, v)  # type: ignore[arg-type]
                if score == "hallucination_rate" and alert is not None and alert.kind == "fired":
                    hit = True
            if hit:
                out.append(i + 1)
                break
        else:
            missed += 1
    return out, early, missed


def pct(xs: list[int], q: float) -> float:
    xs = sorted(xs)
    return float(xs[min(len(xs) - 1, int(q * len(xs)))]) if xs else math.nan


def poisson_upper(k: int) -> float:
    """Upper end of the exact 95 % interval of a Poisson count (Wilson-Hilferty)."""
    k1 = k + 1
    return k1 * (1 - 1 / (9 * k1) + 1.96 / (3 * math.sqrt(k1))) ** 3


def update_cost(n: int = 20_000) -> float:
    """Microseconds per ``DropDetector.update`` on a scored Evaluation (all three series)."""
    from groundwatch.types import Evaluation

    det = DropDetector()
    rng = random.Random(1)
    evs = []
    for _ in range(n):
        h, g, f = draw(rng, 0.05)
        label = "hallucinated" if h else "grounded"
        evs.append(Evaluation(label=label, groundedness=g, faithfulness=f))  # type: ignore[arg-type]
    start = time.perf_counter()
    for ev in evs:
        det.update(ev, route="faq")
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100, help="false-alarm runs")
    ap.add_argument("--length", type=int, default=10_000, help="evaluations per false-alarm run")
    ap.add_argument("--delay-runs", type=int, default=400)
    ap.add_argument("--settle", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sweep", action="store_true", help="trade-off table over target_arl")
    args = ap.parse_args()

    targets = [10_000.0, 20_000.0, 50_000.0, 100_000.0] if args.sweep else [None]
    print(
        f"stable 5 %: {args.runs} runs x {args.length} evaluations after a "
        f"{args.warmup}-evaluation warm-up; step 5 % -> 20 %: {args.delay_runs} runs "
        f"(seed {args.seed})\n"
    )
    header = (
        "| target ARL0 | h (rate, LLR) | theory: false alarms/10k (rate) | theory: mean delay "
        "| false alarms/10k: rate | means | all (95% upper) | delay median | p90 | mean "
        "| early | missed |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for target in targets:
        kw: dict[str, float] = {"warmup": args.warmup}
        if target is not None:
            kw["target_arl"] = target
        fa = false_alarms(args.runs, args.length, args.seed, **kw)
        ds, early, missed = delays(args.delay_runs, args.settle, args.seed, **kw)
        det = DropDetector(**kw)  # type: ignore[arg-type]
        tgt = det.target_arl
        # Theory for a perfectly known 5 % baseline with the default p1.
        d = RateDesign.build(0.05, max(0.05 * det.rate_rise, 0.05 + det.min_rate_rise), tgt)
        total_evals = args.runs * args.length

        def per10k(k: float, total: int = total_evals) -> float:
            return 10_000 * k / total

        n_all = sum(fa.values())
        print(
            f"| {tgt:,.0f} | {d.h / d.scale:.2f} | {10_000 / d.arl(0.05):.2f} | {d.arl(0.20):.1f} "
            f"| {per10k(fa['hallucination_rate']):.2f} "
            f"| {per10k(fa['groundedness'] + fa['faithfulness']):.2f} "
            f"| {per10k(n_all):.2f} ({per10k(poisson_upper(n_all)):.2f}) "
            f"| {pct(ds, 0.5):.0f} | {pct(ds, 0.9):.0f} | {statistics.fmean(ds):.1f} "
            f"| {early} | {missed} |",
            flush=True,
        )
    print(f"\nDropDetector.update: {update_cost():.1f} us per evaluation (three series, one route)")


if __name__ == "__main__":
    main()
