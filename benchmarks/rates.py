"""How well each way of reading a hallucination rate finds the true rate (issue #39 item 7).

On ``../shared/data`` only. Every answer carries the judge's flag (``label == "hallucinated"``)
and ``hallucination_probability`` from models never fitted on its source
(``training/calibrate_rates.py``: each AttributionBench source left out in turn, UHGEval in
five folds, FaithBench never fitted on). A *stream* is 1,000 answers of one source, each
hallucinated with probability equal to the true rate (drawn with replacement from that source's
hallucinated and faithful answers); an *audit* labels a random subset of it. Every method's
interval is for the true rate of the process, at 90 %.

Methods: ``flag share`` (the judge's share, with its own sampling interval), ``labels`` (the
audit alone, Wilson), ``PPI`` (prediction-powered, weight 1), ``PPI++`` (power-tuned weight,
``groundwatch.rates``; the labels where it does not apply), ``estimate_rate`` (its own choice)
and, without labels, ``Rogan–Gladen`` with the judge's sensitivity and specificity measured
without the stream's source (the three other AttributionBench sources for one of them; all
four for FaithBench; UHGEval is the only Chinese source, so its rates are its own, five-fold).

Targets (issue #39): with 200 labels, coverage 0.87–0.95 at every rate and mean error
≤ 0.02; with no labels, coverage ≥ 0.85 on left-out sources at mean width ≤ 0.40.

Usage::

    python training/rates_data.py             # once: the judges' measurements, cached
    python benchmarks/rates.py [--streams 200] [--judge local|semantic] [--seed 39]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_rates import (  # noqa: E402
    DEFAULT_SEMANTIC_CACHE,
    EN_SOURCES,
    EVALUATION_SOURCE,
    ZH_SOURCE,
    Fits,
    HeldOut,
    error_rates_entry,
    held_out_outputs,
)
from rates_data import DEFAULT_CACHE, load_cache  # noqa: E402

from groundwatch.rates import (  # noqa: E402
    JudgeErrorRates,
    RateTotals,
    estimate_rate,
    wilson_interval,
)
from groundwatch.rates._estimate import ppi_interval, rogan_gladen_interval  # noqa: E402

RATES = (0.02, 0.05, 0.10, 0.20, 0.30, 0.50)
LABELS = (0, 50, 100, 200, 400)
STREAM = 1000
CONFIDENCE = 0.9
Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
SOURCES = (*EN_SOURCES, EVALUATION_SOURCE, ZH_SOURCE)
METHODS = ("flag share", "labels", "PPI", "PPI++", "estimate_rate", "Rogan–Gladen")


@dataclass
class Cell:
    """Errors, hits and widths of one method in one (rate, labels, source) cell."""

    errors: list[float]
    hits: list[bool]
    widths: list[float]

    def add(self, truth: float, estimate: float, lower: float, upper: float) -> None:
        self.errors.append(abs(estimate - truth))
        self.hits.append(lower <= truth <= upper)
        self.widths.append(upper - lower)


def new_cell() -> Cell:
    return Cell([], [], [])


def rates_of(entry: dict[str, object]) -> JudgeErrorRates:
    keys = (
        "sensitivity",
        "specificity",
        "sensitivity_low",
        "sensitivity_high",
        "specificity_low",
        "specificity_high",
    )
    values = {k: float(entry[k]) for k in keys}  # type: ignore[arg-type]
    return JudgeErrorRates(
        **values,
        labelled=int(entry["labelled"]),  # type: ignore[call-overload]
        sources=entry["sources"],  # type: ignore[arg-type]
    )


def left_out_error_rates(fits: Fits, rows: Sequence[HeldOut]) -> dict[str, JudgeErrorRates]:
    """For each source, the judge's error rates measured without it (see the module)."""
    out: dict[str, JudgeErrorRates] = {}
    for left in EN_SOURCES:
        others = [s for s in EN_SOURCES if s != left]
        judged = [fits.held_out(a, frozenset({left})) for a in fits.answers if a.source in others]
        outputs = [
            HeldOut(j.answer.source, "en", j.answer.hallucinated, j.flagged, 0.0) for j in judged
        ]
        out[left] = rates_of(error_rates_entry(outputs, others))
    out[EVALUATION_SOURCE] = rates_of(error_rates_entry(rows, EN_SOURCES))
    out[ZH_SOURCE] = rates_of(error_rates_entry(rows, (ZH_SOURCE,)))
    return out


def classic_ppi(t: RateTotals) -> tuple[float, float, float] | None:
    """PPI for a mean with weight 1 (Angelopoulos et al. 2023): the judge's mean on the
    unlabelled answers plus the labelled mean of ``y - f``."""
    n, m = t.labelled, t.scored - t.labelled
    if n < 2 or m < 2:
        return None
    f_u = (t.probability_sum - t.labelled_probability_sum) / m
    ff_u = (t.probability_square_sum - t.labelled_probability_square_sum) / m
    r = (t.label_sum - t.labelled_probability_sum) / n
    rr = (
        t.label_sum - 2 * t.label_probability_sum + t.labelled_probability_square_sum
    ) / n  # mean of (y - f)^2 with y^2 = y
    var_u = max(ff_u - f_u * f_u, 0.0) * m / (m - 1)
    var_r = max(rr - r * r, 0.0) * n / (n - 1)
    est = f_u + r
    half = Z * math.sqrt(var_u / m + var_r / n)
    return est, est - half, est + half


def totals_of(stream: Sequence[HeldOut], labelled: int) -> RateTotals:
    """The sums of a stream whose first ``labelled`` answers (a random subset) were audited."""
    f = [r.probability for r in stream]
    audit = stream[:labelled]
    fl = f[:labelled]
    return RateTotals(
        scored=len(stream),
        flagged=sum(r.flagged for r in stream),
        probability_sum=sum(f),
        probability_square_sum=sum(x * x for x in f),
        labelled=labelled,
        label_sum=float(sum(r.hallucinated for r in audit)),
        labelled_flagged=sum(r.flagged for r in audit),
        label_flag_sum=float(sum(r.flagged and r.hallucinated for r in audit)),
        labelled_probability_sum=sum(fl),
        labelled_probability_square_sum=sum(x * x for x in fl),
        label_probability_sum=sum(x for x, r in zip(fl, audit, strict=True) if r.hallucinated),
    )


def run(
    rows: Sequence[HeldOut], error_rates: dict[str, JudgeErrorRates], streams: int, seed: int
) -> tuple[dict[tuple[str, float, int, str], Cell], dict[tuple[str, float], list[float]]]:
    rng = random.Random(seed)
    cells: dict[tuple[str, float, int, str], Cell] = defaultdict(new_cell)
    flag_shares: dict[tuple[str, float], list[float]] = defaultdict(list)
    for source in SOURCES:
        pos = [r for r in rows if r.source == source and r.hallucinated]
        neg = [r for r in rows if r.source == source and not r.hallucinated]
        rates = error_rates[source]
        for truth in RATES:
            for _ in range(streams):
                # The stream is in random order, so its first n answers are a random audit.
                stream = [rng.choice(pos if rng.random() < truth else neg) for _ in range(STREAM)]
                for n in LABELS:
                    t = totals_of(stream, n)
                    q = t.flagged / t.scored
                    if n == 0:
                        flag_shares[(source, truth)].append(q)
                        cells[(source, truth, 0, "flag share")].add(
                            truth, q, *wilson_interval(t.flagged, t.scored, Z)
                        )
                        rg = rogan_gladen_interval(t.flagged, t.scored, rates, Z)
                        if rg is not None:
                            # Clipped to [0, 1], as estimate_rate reports it.
                            est, lower, upper = (min(max(x, 0.0), 1.0) for x in rg)
                            cells[(source, truth, 0, "Rogan–Gladen")].add(truth, est, lower, upper)
                        # estimate_rate gives no rate without labels (no_audit): no cell.
                        continue
                    lo, hi = wilson_interval(t.label_sum, n, Z)
                    cells[(source, truth, n, "labels")].add(truth, t.label_sum / n, lo, hi)
                    ppi = classic_ppi(t)
                    if ppi is not None:
                        cells[(source, truth, n, "PPI")].add(truth, *ppi)
                    tuned = ppi_interval(t, Z)
                    cells[(source, truth, n, "PPI++")].add(
                        truth, *(tuned if tuned is not None else (t.label_sum / n, lo, hi))
                    )
                    e = estimate_rate(t, confidence=CONFIDENCE)
                    assert e.estimate is not None and e.lower is not None and e.upper is not None
                    cells[(source, truth, n, "estimate_rate")].add(
                        truth, e.estimate, e.lower, e.upper
                    )
    return cells, flag_shares


def _pool(
    cells: dict[tuple[str, float, int, str], Cell],
    sources: Sequence[str],
    truth: float,
    n: int,
    method: str,
) -> Cell | None:
    pooled = new_cell()
    for s in sources:
        c = cells.get((s, truth, n, method))
        if c is not None:
            pooled.errors += c.errors
            pooled.hits += c.hits
            pooled.widths += c.widths
    return pooled if pooled.hits else None


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--semantic-cache", type=Path, default=DEFAULT_SEMANTIC_CACHE)
    parser.add_argument("--judge", choices=("local", "semantic"), default="local")
    parser.add_argument("--streams", type=int, default=200, help="streams per cell and source")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args(argv)
    began = time.monotonic()
    cache = args.semantic_cache if args.judge == "semantic" else args.cache
    fits = Fits(load_cache(cache), semantic=args.judge == "semantic")
    rows, _ = held_out_outputs(fits)
    error_rates = left_out_error_rates(fits, rows)
    print(f"held-out judge outputs and error rates: {time.monotonic() - began:.0f} s", flush=True)
    cells, flag_shares = run(rows, error_rates, args.streams, args.seed)
    print(
        f"\n### {args.judge} judge: {args.streams} streams of {STREAM} answers per source and "
        f"rate, 90 % intervals (seed {args.seed}, {time.monotonic() - began:.0f} s)\n"
    )
    print("#### The flag share against the true rate (mean over streams)\n")
    print("| true rate | " + " | ".join(SOURCES) + " |")
    print("|---|" + "---|" * len(SOURCES))
    for truth in RATES:
        print(
            f"| {truth:.0%} | "
            + " | ".join(f"{_mean(flag_shares[(s, truth)]):.1%}" for s in SOURCES)
            + " |"
        )
    print("\n#### With audit labels, all sources pooled: mean abs. error / coverage / mean width\n")
    labelled_methods = ("labels", "PPI", "PPI++", "estimate_rate")
    print("| labels | true rate | " + " | ".join(labelled_methods) + " |")
    print("|---|---|" + "---|" * len(labelled_methods))
    for n in LABELS[1:]:
        for truth in RATES:
            parts = []
            for method in labelled_methods:
                c = _pool(cells, SOURCES, truth, n, method)
                parts.append(
                    "–"
                    if c is None
                    else f"{_mean(c.errors):.3f} / {_mean(c.hits):.2f} / {_mean(c.widths):.3f}"
                )
            print(f"| {n} | {truth:.0%} | " + " | ".join(parts) + " |")
    print(
        "\n#### Targets with 200 labels (estimate_rate), per rate: coverage, worst source, error\n"
    )
    for truth in RATES:
        c = _pool(cells, SOURCES, truth, 200, "estimate_rate")
        assert c is not None
        worst = min(_mean(cells[(s, truth, 200, "estimate_rate")].hits) for s in SOURCES)
        ok = 0.87 <= _mean(c.hits) <= 0.95 and _mean(c.errors) <= 0.02
        print(
            f"- {truth:.0%}: coverage {_mean(c.hits):.3f} (worst source {worst:.2f}), "
            f"mean error {_mean(c.errors):.4f}, width {_mean(c.widths):.3f} "
            f"{'meets' if ok else 'MISSES'} the target"
        )
    print(
        "\n#### Without labels, each source left out: Rogan–Gladen coverage / mean width / "
        "mean abs. error (flag share's error)\n"
    )
    print("| source | " + " | ".join(f"{t:.0%}" for t in RATES) + " | all rates |")
    print("|---|" + "---|" * (len(RATES) + 1))
    for source in SOURCES:
        parts = []
        for truth in RATES:
            c = cells.get((source, truth, 0, "Rogan–Gladen"))
            f = cells[(source, truth, 0, "flag share")]
            parts.append(
                "n/a"
                if c is None
                else f"{_mean(c.hits):.2f} / {_mean(c.widths):.2f} / {_mean(c.errors):.3f} "
                f"({_mean(f.errors):.3f})"
            )
        hits = [
            h for t in RATES for h in cells.get((source, t, 0, "Rogan–Gladen"), new_cell()).hits
        ]
        widths = [
            w for t in RATES for w in cells.get((source, t, 0, "Rogan–Gladen"), new_cell()).widths
        ]
        summary = f"{_mean(hits):.2f} / {_mean(widths):.2f}" if hits else "n/a"
        note = "" if source != ZH_SOURCE else " (its own rates, five-fold: not left out)"
        print(f"| {source}{note} | " + " | ".join(parts) + f" | {summary} |")
    print("\n#### Interval width against the number of labels (estimate_rate, all sources)\n")
    print("| labels | " + " | ".join(f"{t:.0%}" for t in RATES) + " |")
    print("|---|" + "---|" * len(RATES))
    for n in LABELS[1:]:
        widths = []
        for truth in RATES:
            c = _pool(cells, SOURCES, truth, n, "estimate_rate")
            assert c is not None
            widths.append(f"±{_mean(c.widths) / 2:.3f}")
        print(f"| {n} | " + " | ".join(widths) + " |")
    print(f"\n{time.monotonic() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
