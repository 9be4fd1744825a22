"""Drop-detector benchmark: false alarms at a stable rate, detection delay after a step.

Two kinds of traffic, seeded:

* ``perfect``: simulated answers whose judge is always right. Each is hallucinated with
  probability ``p``; its groundedness and faithfulness come from a claim-level model (answers of
  2-6 claims; a grounded answer has at most one unsupported claim, a hallucinated one several,
  sometimes a contradicted one), so the mean series move with the rate as they do in production.
* ``judge``: answers drawn from ``../shared/data`` at a chosen true rate (a human-labelled
  hallucinated answer with probability ``p``, a faithful one otherwise, with replacement), each
  with what the local judge made of it: its label, groundedness and faithfulness, from claim
  layers fitted without the answer's source (``training/calibrate_rates.py``'s ``Fits``; FaithBench
  is never fitted on). Three domains: web search answers with citations (Stanford-GenSearch),
  other attributed QA (ExpertQA, LFQA, AttributedQA) and news summaries (FaithBench).

Measured per traffic and detector configuration:

* false alarms per 10,000 evaluations: every run watches ``--warmup`` evaluations at 5 % (the
  warm-up, when only floors can fire) and ``--length`` more; every ``fired`` alert of any series
  is a false alarm (an alert that never resolves counts once), and the runs with any;
* the delay after a step of the true rate from 5 % to 10 % and to 20 %: warm-up at 5 %,
  ``--settle`` more at 5 %, then the step; the delay is the number of evaluations until the
  hallucination-rate alert fires (median over the runs that fired within ``--horizon``; runs
  that fired before the step are counted as early, runs that never did as missed).

Configurations: ``before`` is the detector as it was designed for perfect labels (a ceiling of
0.30 on the rate over 50 evaluations; the CUSUM tuned for ``max(3 p0, p0 + 0.05)`` in flags);
``before, no rate ceiling`` the same without the ceiling; ``defaults`` is ``DropDetector()`` as
shipped (a floor on faithfulness only; the CUSUM designed from the judge's shipped sensitivity
and specificity where they are known).

    python benchmarks/alerts.py                  # the table in docs/alerts.md
    python benchmarks/alerts.py --sweep          # perfect labels: the trade-off over target_arl

The judge outputs are computed once (about a minute) from the measurements that
``training/rates_data.py`` caches (``/tmp/gw-rates-cache.jsonl``) and kept in ``--judge-cache``
(``/tmp/gw-alerts-cache.jsonl``); fitting needs ``training/requirements.txt`` (scikit-learn).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwatch.alerts import SCORE_NAMES, DropDetector, RateDesign, ScoreName
from groundwatch.rates import judge_error_rates

ROOT = Path(__file__).resolve().parents[1]
SERIES: tuple[ScoreName, ...] = ("flag_share", "groundedness", "faithfulness")
DEFAULT_MEASUREMENTS = Path("/tmp/gw-rates-cache.jsonl")
DEFAULT_JUDGE_CACHE = Path("/tmp/gw-alerts-cache.jsonl")
DOMAINS: Mapping[str, tuple[str, ...]] = {
    "web search QA": ("Stanford-GenSearch",),
    "other attributed QA": ("ExpertQA", "LFQA", "AttributedQA"),
    "news summaries": ("FaithBench",),
}
# The labels whose answer counts towards the detector's rate (its _RATE_LABELS).
RATE_LABELS = frozenset({"grounded", "hallucinated", "insufficient_context"})

# One evaluation as the detector sees it: the rate's 0/1 (None: no verdict on the answer),
# groundedness and faithfulness (None: nothing to score).
Observation = tuple[float | None, float | None, float | None]
Draw = Callable[[random.Random, float], Observation]


def draw_perfect(rng: random.Random, p: float) -> Observation:
    """One simulated evaluation whose judge is always right."""
    n = rng.randint(2, 6)
    if rng.random() < p:
        unsupported = rng.randint(max(1, n // 2), n)
        contradicted = 1 if rng.random() < 0.4 else 0
        contradicted = min(contradicted, unsupported)
        return 1.0, (n - unsupported) / n, 1.0 - contradicted / n
    unsupported = 1 if rng.random() < 0.3 else 0
    return 0.0, (n - unsupported) / n, 1.0


@dataclass(frozen=True)
class JudgeOutput:
    """What the local judge made of one human-labelled answer (held out from its fit)."""

    source: str
    lang: str
    hallucinated: bool
    label: str
    groundedness: float | None
    faithfulness: float | None

    def observation(self) -> Observation:
        rate = (1.0 if self.label == "hallucinated" else 0.0) if self.label in RATE_LABELS else None
        return rate, self.groundedness, self.faithfulness


def build_judge_outputs(measurements: Path, cache: Path) -> None:
    """Every cached answer judged by claim layers fitted without its source, to ``cache``."""
    sys.path.insert(0, str(ROOT / "training"))
    from calibrate_rates import Fits  # type: ignore[import-not-found]
    from rates_data import load_cache  # type: ignore[import-not-found]

    fits = Fits(load_cache(measurements), semantic=False)
    with cache.open("w", encoding="utf-8") as fh:
        for answer in fits.answers:
            judged = fits.held_out(answer)
            verdicts = judged.verdicts
            n = len(verdicts)
            row = {
                "source": answer.source,
                "lang": answer.lang,
                "hallucinated": answer.hallucinated,
                "label": judged.label,
                "groundedness": sum(v in ("supported", "inferred") for v in verdicts) / n
                if n
                else None,
                "faithfulness": 1.0 - verdicts.count("contradicted") / n if n else None,
            }
            fh.write(json.dumps(row) + "\n")


def judge_outputs(measurements: Path, cache: Path) -> list[JudgeOutput]:
    if not cache.exists():
        if not measurements.exists():
            raise SystemExit(
                f"{measurements} is missing: run `python training/rates_data.py --cache "
                f"{measurements}` first (a few minutes)"
            )
        print(f"judging every answer held out from its source into {cache} ...", flush=True)
        build_judge_outputs(measurements, cache)
    with cache.open(encoding="utf-8") as fh:
        return [JudgeOutput(**json.loads(line)) for line in fh if line.strip()]


def domain_draw(outputs: Sequence[JudgeOutput], sources: Sequence[str]) -> Draw:
    """Answers of ``sources`` at a true rate ``p``: a hallucinated one with probability ``p``."""
    bad = [o.observation() for o in outputs if o.source in sources and o.hallucinated]
    good = [o.observation() for o in outputs if o.source in sources and not o.hallucinated]

    def draw(rng: random.Random, p: float) -> Observation:
        return rng.choice(bad) if rng.random() < p else rng.choice(good)

    return draw


def feed(
    det: DropDetector, draw: Draw, rng: random.Random, p: float, count: int
) -> list[tuple[int, str]]:
    """Feed ``count`` evaluations; returns (index, score) of each fired alert."""
    fired: list[tuple[int, str]] = []
    for i in range(count):
        for score, v in zip(SERIES, draw(rng, p), strict=True):
            if v is None or score not in det.scores:
                continue
            alert = det.observe(score, v)
            if alert is not None and alert.kind == "fired":
                fired.append((i, score))
    return fired


def false_alarms(
    make: Callable[..., DropDetector], draw: Draw, runs: int, length: int, seed: int
) -> tuple[dict[str, int], int]:
    """Alerts fired over warm-up and ``length`` evaluations at 5 %, per series (floors watch
    the warm-up too), and the runs with at least one."""
    counts: dict[str, int] = {s: 0 for s in SCORE_NAMES}
    alarmed = 0
    for r in range(runs):
        rng = random.Random(seed * 1_000_003 + r)
        det = make()
        fired = feed(det, draw, rng, 0.05, det.warmup + length)
        for _, score in fired:
            counts[score] += 1
        alarmed += bool(fired)
    return counts, alarmed


def delays(
    make: Callable[..., DropDetector],
    draw: Draw,
    runs: int,
    settle: int,
    seed: int,
    after: float,
    horizon: int,
) -> tuple[list[int], int, int]:
    """Evaluations from a step 5 % -> ``after`` until the rate alert fires; early, missed."""
    out: list[int] = []
    early = missed = 0
    for r in range(runs):
        rng = random.Random(seed * 7_000_001 + r)
        det = make(scores=("flag_share",))
        fired = feed(det, draw, rng, 0.05, det.warmup + settle)
        if any(score == "flag_share" for _, score in fired):
            early += 1
            continue
        for i in range(horizon):
            hit = [s for _, s in feed(det, draw, rng, after, 1) if s == "flag_share"]
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
        h, g, f = draw_perfect(rng, 0.05)
        label = "hallucinated" if h else "grounded"
        evs.append(Evaluation(label=label, groundedness=g, faithfulness=f))  # type: ignore[arg-type]
    start = time.perf_counter()
    for ev in evs:
        det.update(ev, route="faq")
    return (time.perf_counter() - start) / n * 1e6


def sweep(args: argparse.Namespace) -> None:
    """Perfect labels: false alarms and delay 5 % -> 20 % over the rate CUSUM's target_arl."""
    print(
        f"perfect labels, stable 5 %: {args.runs} runs x {args.length} evaluations after a "
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
    for target in (10_000.0, 20_000.0, 50_000.0, 100_000.0):

        def make(target: float = target, **kw: Any) -> DropDetector:
            return DropDetector(
                warmup=args.warmup, target_arl=target, floors=BEFORE_FLOORS, error_rates=None, **kw
            )

        fa, _ = false_alarms(make, draw_perfect, args.runs, args.length, args.seed)
        ds, early, missed = delays(
            make, draw_perfect, args.delay_runs, args.settle, args.seed, 0.20, args.horizon
        )
        det = make()
        d = RateDesign.build(0.05, max(0.05 * det.rate_rise, 0.05 + det.min_rate_rise), target)
        total = args.runs * args.length  # as the table in docs/alerts.md was measured
        n_all = sum(fa.values())
        print(
            f"| {target:,.0f} | {d.h / d.scale:.2f} | {10_000 / d.arl(0.05):.2f} "
            f"| {d.arl(0.20):.1f} | {10_000 * fa['hallucination_rate'] / total:.2f} "
            f"| {10_000 * (fa['groundedness'] + fa['faithfulness']) / total:.2f} "
            f"| {10_000 * n_all / total:.2f} ({10_000 * poisson_upper(n_all) / total:.2f}) "
            f"| {pct(ds, 0.5):.0f} | {pct(ds, 0.9):.0f} | {statistics.fmean(ds):.1f} "
            f"| {early} | {missed} |",
            flush=True,
        )


# The floors the detector had when it was designed for perfect labels.
BEFORE_FLOORS: Mapping[ScoreName, float] = {
    "flag_share": 0.30,
    "groundedness": 0.50,
    "faithfulness": 0.70,
}


def configurations(judge: bool, warmup: int) -> dict[str, Callable[..., DropDetector]]:
    """The detector as designed for perfect labels, the same without its rate ceiling, and
    ``DropDetector()`` as shipped, given the error rates its ``update`` looks up for the local
    judge's evaluations (``observe`` has no judge name to look them up by)."""
    rates: Any = judge_error_rates("local") if judge else None
    return {
        "before": lambda **kw: DropDetector(
            warmup=warmup, floors=BEFORE_FLOORS, error_rates=None, **kw
        ),
        "before, no rate ceiling": lambda **kw: DropDetector(
            warmup=warmup,
            floors={k: v for k, v in BEFORE_FLOORS.items() if k != "flag_share"},
            error_rates=None,
            **kw,
        ),
        "defaults": lambda **kw: DropDetector(warmup=warmup, error_rates=rates, **kw),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=40, help="false-alarm runs per cell")
    ap.add_argument("--length", type=int, default=10_000, help="evaluations per false-alarm run")
    ap.add_argument("--delay-runs", type=int, default=100, help="step runs per cell")
    ap.add_argument("--settle", type=int, default=300)
    ap.add_argument("--horizon", type=int, default=5_000, help="evaluations after a step")
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--measurements", type=Path, default=DEFAULT_MEASUREMENTS)
    ap.add_argument("--judge-cache", type=Path, default=DEFAULT_JUDGE_CACHE)
    ap.add_argument("--sweep", action="store_true", help="perfect labels over target_arl")
    args = ap.parse_args()
    if args.sweep:
        sweep(args)
        return

    began = time.monotonic()
    traffic: dict[str, Draw] = {"perfect labels (simulated)": draw_perfect}
    outputs = judge_outputs(args.measurements, args.judge_cache)
    for name, sources in DOMAINS.items():
        traffic[f"local judge: {name}"] = domain_draw(outputs, sources)
    print(
        f"stable 5 %: {args.runs} runs x {args.length:,} evaluations after a {args.warmup}-"
        f"evaluation warm-up; steps 5 % -> 10 % and 5 % -> 20 %: {args.delay_runs} runs each, "
        f"{args.horizon:,} evaluations at most (seed {args.seed})\n"
    )
    header = (
        "| traffic | detector | flag share at 5 % | false alarms / 10k: rate | means "
        "| runs with any | 5 % -> 10 %: median delay | missed | early "
        "| 5 % -> 20 %: median delay | missed | early |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, draw in traffic.items():
        rng = random.Random(args.seed)
        flags = [draw(rng, 0.05)[0] for _ in range(20_000)]
        judged = [x for x in flags if x is not None]
        share = sum(judged) / len(judged)
        judge = name != "perfect labels (simulated)"
        for config, make in configurations(judge, args.warmup).items():
            fa, alarmed = false_alarms(make, draw, args.runs, args.length, args.seed)
            total = args.runs * (args.warmup + args.length)
            cells = []
            for after in (0.10, 0.20):
                ds, early, missed = delays(
                    make, draw, args.delay_runs, args.settle, args.seed, after, args.horizon
                )
                cells.append(f"{pct(ds, 0.5):,.0f} | {missed} | {early}")
            print(
                f"| {name} | {config} | {share:.1%} "
                f"| {10_000 * fa['hallucination_rate'] / total:.2f} "
                f"| {10_000 * (fa['groundedness'] + fa['faithfulness']) / total:.2f} "
                f"| {alarmed}/{args.runs} | {' | '.join(cells)} |",
                flush=True,
            )
    print(f"\n({time.monotonic() - began:.0f} s)")
    print(f"DropDetector.update: {update_cost():.1f} us per evaluation (three series, one route)")


if __name__ == "__main__":
    main()
