"""The drop detector: pure statistics over scored answers, per (score, route).

:class:`DropDetector` watches three series per route:

* ``flag_share`` -- the share of judged answers (every label but ``error``) the judge labels
  ``hallucinated``: its flag share, not the hallucination rate (docs/rates.md); alerts on a
  rise. (``hallucination_rate``, its former name, is still read in ``scores``, ``floors`` and
  :meth:`DropDetector.design`, with a ``FutureWarning``.)
* ``groundedness`` and ``faithfulness`` -- per-answer scores; alerts on a drop of the mean.

Each series has two triggers:

1. **A one-sided CUSUM against a learned baseline.** The first ``warmup`` evaluations of a series
   are its baseline. For the rate it is a Bernoulli CUSUM (Reynolds & Stoumbos, 1999): every answer
   adds the log-likelihood ratio of "rate ``p1``" against "rate ``p0``" (``ln(p1/p0)`` for a
   hallucination, ``ln((1-p1)/(1-p0))`` otherwise) and the sum, floored at zero, alarms when it
   reaches ``h``. For a mean it is the classic lower CUSUM (Page, 1954) on the standardised score,
   ``S = max(0, S + (mu0 - x) / sigma0 - k)``, with reference value ``k`` = half the shift to
   detect. Both sums move in integer steps (the increments are rounded to a grid), so the
   statistic is a finite Markov chain and its average run length (ARL) is computed exactly by
   solving the chain (Brook & Evans, 1972) -- no tables, no asymptotics. The threshold ``h`` is the
   smallest one whose in-control ARL reaches ``target_arl`` evaluations for the rate (default
   20,000) and ``mean_target_arl`` for each mean (default 50,000). The rate CUSUM watches the
   judge's flags and is tuned for the flag rate ``p1`` they show after a rise of the true rate:
   with the judge's shipped sensitivity and specificity (:func:`flag_rate_after_rise`), ``p1 =
   p0 + (sensitivity + specificity - 1) * 0.10``; for flags that are the truth (a judge without
   measured error rates), ``p1 = max(3 p0, p0 + 0.05)``. The in-control law is the baseline:
   the rate at the upper end of its one-standard-error interval (an unlucky, low warm-up would
   otherwise turn into false alarms; cf. Gandy & Kvaloy, 2013, on guaranteed conditional
   performance), the scores as the bootstrap (empirical) law of the warm-up shifted down one
   standard error, plus 0.4 % mass at score 0 because a warm-up of a few hundred answers
   under-samples the rare very bad answer that the run length is most sensitive to.
2. **An absolute floor** (a ceiling for the rate) on the mean of the last ``floor_window``
   evaluations, so that an application that is bad from the start -- and so learns a bad baseline
   -- or that degrades slowly still alerts. By default only faithfulness has one: the flag share
   and groundedness are in the judge's units, far from the truth and different per domain.

Hysteresis: a series fires once per episode and resolves once. While firing, the CUSUM is capped
at ``2h``; the episode resolves when it has drained back to zero (evidence has swung back to the
baseline by twice the alarm threshold), the windowed mean is back inside its floor by
``floor_margin``, *and* the mean of the last ``floor_window`` evaluations has stayed on the
baseline's side of the CUSUM's indifference level (``mu0 - k sigma0`` for a mean, the rate at
which the rate CUSUM does not move on average) for ``floor_window`` evaluations in a row. The last
condition holds an alert through a drop that shows in few answers (one in eight contradicts its
context): the runs of good answers inside such a drift drain the statistic, but the recent mean
stays past the indifference level. With the defaults an episode resolves about 170 evaluations
after a rate returns to its baseline (median; 110 for a mean).

The baseline is frozen after warm-up by default. With ``adapt_halflife`` set, it keeps learning
slowly (an exponentially weighted mean with that half-life, in evaluations) from every evaluation
seen while the series is not firing, and the design is recomputed when the baseline has moved by
more than 10 %. Keep the half-life well above the detection delay (thousands of evaluations), or
a step is learned before it is detected. Adapting follows seasonal drift, but a slow enough decay
is learned as normal: only the floors catch that.

The false-alarm / detection-delay trade-off, measured by ``python benchmarks/alerts.py``
(warm-up estimation included), is tabulated in docs/alerts.md: with perfect labels, about half a
false alarm per 10,000 evaluations over all three series and a median delay of 52 evaluations
after a step from 5 % to 20 % hallucinated; with the local judge's held-out outputs on
``../shared/data``, 0.2-0.3 false alarms of the rate per 10,000 and a median of 747-1,378
evaluations for the same step, the judge's flags moving by only a fraction of the true rate's.

:meth:`DropDetector.update` is pure computation: thread-safe, no I/O, no telemetry. Where its
alerts go is :mod:`groundwatch.alerts.sinks`; the integer CUSUMs and their run lengths are in
:mod:`groundwatch.alerts._cusum`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ._cusum import _MEAN_GRID, MeanDesign, RateDesign

if TYPE_CHECKING:
    from ..rates import JudgeErrorRates
    from ..types import Evaluation

_logger = logging.getLogger(__name__)


ScoreName = Literal["faithfulness", "groundedness", "flag_share"]
SCORE_NAMES: tuple[ScoreName, ...] = ("flag_share", "groundedness", "faithfulness")
FORMER_NAMES = {"hallucination_rate": "flag_share"}
"""Series names read for compatibility: the flag share was called ``hallucination_rate``."""

# The flag share counts every judged answer (every label but ``error``, as the rate estimate's
# population): ``no_claims`` and ``insufficient_context`` count as not flagged.
# Below this sensitivity + specificity - 1 the judge's flag barely moves with the true rate: the
# rate CUSUM is then designed as if the flags were the truth.
_MIN_YOUDEN = 0.05

DEFAULT_WARMUP = 500
DEFAULT_TARGET_ARL = 20_000.0
DEFAULT_MEAN_TARGET_ARL = 50_000.0
DEFAULT_RATE_RISE = 3.0
DEFAULT_MIN_RATE_RISE = 0.05
# With the judge's error rates: the rise of the true rate the rate CUSUM is tuned for. On the
# judge traffic of benchmarks/alerts.py (a run with 60 step runs per cell), ten points detected
# 5 % -> 20 % sooner than five on every domain (747-1,442 evaluations against 963-1,632) and
# 5 % -> 10 % about as soon, at under half a false alarm per 10,000 evaluations.
DEFAULT_JUDGE_RATE_RISE = 0.10
DEFAULT_MEAN_SHIFT_SIGMAS = 1.0
DEFAULT_FLOOR_WINDOW = 50
DEFAULT_FLOOR_MARGIN = 0.05
DEFAULT_MAX_ROUTES = 256
# No ceiling on the flag share and no floor on groundedness by default: both are in the
# judge's own units, and a judge with the local one's error rates puts a healthy service (5 %
# hallucinated) at a flag share of 31-65 % and a mean groundedness of 0.36-0.83 depending on the
# domain (benchmarks/alerts.py on ../shared/data), so a fixed line fires on healthy services.
# The absolute ceiling belongs to the audited estimate's lower bound (the Prometheus rule
# GroundwatchHallucinationRateHigh); ``floors=`` sets lines here for scores that are the truth
# (people's labels, or a judge measured to be nearly exact). Faithfulness (contradictions) stays
# near 1 on every healthy domain measured, so its floor stays.
DEFAULT_FLOORS: Mapping[ScoreName, float] = {"faithfulness": 0.70}

# An episode resolves when the evidence has swung back by this many thresholds: at the baseline
# that takes about twice the in-control drift time from h, and it keeps a rate that hovers near
# the detector's indifference point from flapping.
_RESOLVE_FACTOR = 2


class Alert(BaseModel):
    """One alert event: a series started (``fired``) or stopped (``resolved``) being degraded.

    Attributes:
        kind: ``fired`` or ``resolved``.
        score: ``flag_share``, ``groundedness`` or ``faithfulness``.
        route: the route the series belongs to (``None``: records without a route).
        baseline: the learned baseline (the floor, for a floor alert before warm-up ended).
        current: the series' value now: for a CUSUM firing, the mean since the statistic last
            left zero (the change-point estimate); otherwise the mean of the last evaluations.
        evaluations: how many evaluations ``current`` is computed over.
        method: ``cusum`` (drop against the baseline) or ``floor`` (absolute floor crossed).
        threshold: the CUSUM decision threshold ``h`` in LLR / sigma units, or the floor.
        time: Unix time in seconds.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["fired", "resolved"]
    score: ScoreName
    route: str | None
    baseline: float | None
    current: float
    evaluations: int
    method: Literal["cusum", "floor"]
    threshold: float
    time: float

    @property
    def message(self) -> str:
        """One line for humans, e.g. for a log line or a chat message."""
        where = f"route {self.route!r}" if self.route is not None else "all traffic"
        base = "n/a" if self.baseline is None else f"{self.baseline:.3f}"
        verb = "rose" if self.score == "flag_share" else "dropped"
        if self.kind == "resolved":
            return (
                f"groundwatch alert resolved: {self.score} on {where} back at "
                f"{self.current:.3f} (baseline {base}, last {self.evaluations} evaluations)"
            )
        return (
            f"groundwatch alert: {self.score} on {where} {verb} from {base} to "
            f"{self.current:.3f} over {self.evaluations} evaluations ({self.method})"
        )


def score_name(name: str) -> ScoreName:
    """A series' name, its former name read with a ``FutureWarning``
    (``hallucination_rate`` is the ``flag_share``: the judge's verdicts, not the rate)."""
    new = FORMER_NAMES.get(name)
    if new is None:
        return name  # type: ignore[return-value]  # checked against SCORE_NAMES by the caller
    warnings.warn(
        f"the drop detector's series {name!r} is now {new!r} (the judge's flag share, not the "
        "hallucination rate: docs/rates.md)",
        FutureWarning,
        stacklevel=3,
    )
    return new  # type: ignore[return-value]


def flag_rate_after_rise(
    p0: float,
    error_rates: JudgeErrorRates | None,
    *,
    rate_rise: float = DEFAULT_RATE_RISE,
    min_rate_rise: float = DEFAULT_MIN_RATE_RISE,
    judge_rate_rise: float = DEFAULT_JUDGE_RATE_RISE,
) -> float:
    """The judge's flag rate the rate CUSUM is tuned to detect, from its baseline flag rate
    ``p0``.

    A judge flags a share ``p = sensitivity * r + (1 - specificity) * (1 - r)`` of the answers
    at a true rate ``r``, so a rise of the true rate by ``d`` moves its flags by ``youden * d``
    (``youden = sensitivity + specificity - 1``): with error rates, the design is for the flags
    after a rise of ``judge_rate_rise`` in the true rate, ``p0 + youden * judge_rate_rise``. The
    baseline true rate is not inferred from ``p0`` (a relative ``rate_rise`` would need it): the
    judge's specificity differs so much from source to source that the corrected baseline is
    off by tens of points (docs/rates.md). With no error rates (or a judge no better than
    chance) the flags are taken as the truth: ``max(p0 * rate_rise, p0 + min_rate_rise)``.
    """
    if error_rates is not None:
        youden = error_rates.sensitivity + error_rates.specificity - 1.0
        if youden >= _MIN_YOUDEN:
            return min(p0 + youden * judge_rate_rise, 0.99)
    return min(max(p0 * rate_rise, p0 + min_rate_rise), 0.99)


# --------------------------------------------------------------------------------------------
# The detector


@dataclass
class _Series:
    score: ScoreName
    route: str | None
    warmup_values: list[float] = field(default_factory=list)
    design: RateDesign | MeanDesign | None = None
    baseline: float | None = None
    stat: int = 0
    run_sum: float = 0.0  # values since the statistic last left zero
    run_n: int = 0
    recovery_sum: float = 0.0  # values since the capped statistic last sat at the threshold
    recovery_n: int = 0
    window: deque[float] = field(default_factory=deque)
    window_sum: float = 0.0
    firing: bool = False
    fired_method: Literal["cusum", "floor"] = "cusum"
    cusum_hot: bool = False
    floor_hot: bool = False
    settled_n: int = 0  # evaluations in a row that a firing series has looked recovered
    seen: int = 0
    adapt_value: float | None = None
    design_value: float | None = None
    judge: str | None = None  # the judge of the series' first evaluation (its error rates)


class DropDetector:
    """Detects a rise of the judge's flag share and drops of mean groundedness / faithfulness.

    One independent series per (score, route); see the module docstring for the method.

    Args:
        warmup: evaluations per series that form its baseline before the CUSUM runs; also the
            minimum sample size. Floors apply once ``floor_window`` evaluations are in.
        target_arl: in-control average run length of the hallucination-rate CUSUM, in
            evaluations (default 20,000). Larger: fewer false alarms, longer detection delays
            (see the README's trade-off table).
        mean_target_arl: the same for each of the two mean CUSUMs (default 50,000).
        rate_rise: without the judge's error rates (the flags taken as the truth), the rate
            CUSUM is tuned for a rise from the baseline ``p0`` to ``max(p0 * rate_rise, p0 +
            min_rate_rise)``; larger rises are detected faster, smaller ones later.
        min_rate_rise: see ``rate_rise``.
        judge_rate_rise: with the judge's error rates, the rise of the true rate the CUSUM is
            tuned for (default 0.10), which moves the flags by ``(sensitivity + specificity -
            1) * judge_rate_rise`` (:func:`flag_rate_after_rise`).
        mean_shift_sigmas: the mean CUSUMs are tuned for a drop of this many baseline standard
            deviations (reference value ``k`` = half of it).
        floors: absolute floors per score (a ceiling for ``flag_share``); ``None`` or a
            missing key turns that floor off. Default: faithfulness 0.70 only (the judge's flag
            share and groundedness sit far from the truth, domain by domain; the audited
            estimate's Prometheus rule is the rate's ceiling, docs/alerts.md).
        floor_window: the floors compare the mean of this many most recent evaluations.
        floor_margin: a floor alert resolves once the windowed mean is this far back inside.
        adapt_halflife: if set, the baseline keeps adapting with this half-life (evaluations)
            from quiet periods; ``None`` (default) freezes it after warm-up.
        scores: which series to watch; default all three.
        max_routes: routes watched at most (memory stays bounded); evaluations of further routes
            are skipped and counted in :attr:`routes_dropped`.
        clock: returns the alert time (seconds); ``time.time`` by default.
        error_rates: the judge's sensitivity and specificity for the rate CUSUM's design:
            ``"shipped"`` (default) looks up the ones shipped for the judge that scored the
            series' first evaluation (:func:`groundwatch.rates.judge_error_rates`; none for a
            judge without a measurement, or for values fed through :meth:`observe`); a
            :class:`~groundwatch.rates.JudgeErrorRates` for every series; ``None``: the flags
            are the truth.
        language: the answers' language, for the shipped error rates.
    """

    def __init__(
        self,
        *,
        warmup: int = DEFAULT_WARMUP,
        target_arl: float = DEFAULT_TARGET_ARL,
        mean_target_arl: float = DEFAULT_MEAN_TARGET_ARL,
        rate_rise: float = DEFAULT_RATE_RISE,
        min_rate_rise: float = DEFAULT_MIN_RATE_RISE,
        judge_rate_rise: float = DEFAULT_JUDGE_RATE_RISE,
        mean_shift_sigmas: float = DEFAULT_MEAN_SHIFT_SIGMAS,
        floors: Mapping[ScoreName, float | None] | None = DEFAULT_FLOORS,
        floor_window: int = DEFAULT_FLOOR_WINDOW,
        floor_margin: float = DEFAULT_FLOOR_MARGIN,
        adapt_halflife: float | None = None,
        scores: Iterable[ScoreName] = SCORE_NAMES,
        max_routes: int = DEFAULT_MAX_ROUTES,
        clock: Callable[[], float] = time.time,
        error_rates: JudgeErrorRates | Literal["shipped"] | None = "shipped",
        language: str = "en",
    ) -> None:
        if warmup < 2:
            raise ValueError("warmup must be at least 2 evaluations")
        if target_arl <= 1 or mean_target_arl <= 1:
            raise ValueError("target_arl and mean_target_arl must be greater than 1")
        if rate_rise <= 1 and min_rate_rise <= 0:
            raise ValueError("rate_rise must be > 1 or min_rate_rise > 0")
        if floor_window < 1:
            raise ValueError("floor_window must be at least 1")
        self.warmup = int(warmup)
        self.target_arl = float(target_arl)
        self.mean_target_arl = float(mean_target_arl)
        self.rate_rise = float(rate_rise)
        self.min_rate_rise = float(min_rate_rise)
        self.judge_rate_rise = float(judge_rate_rise)
        self.mean_shift_sigmas = float(mean_shift_sigmas)
        self.floors: dict[ScoreName, float] = {
            score_name(k): float(v) for k, v in (floors or {}).items() if v is not None
        }
        self.floor_window = int(floor_window)
        self.floor_margin = float(floor_margin)
        self.adapt_halflife = adapt_halflife
        self.scores: tuple[ScoreName, ...] = tuple(score_name(s) for s in scores)
        for s in self.scores:
            if s not in SCORE_NAMES:
                raise ValueError(f"unknown score {s!r}; expected one of {SCORE_NAMES}")
        self.max_routes = int(max_routes)
        self.error_rates = error_rates
        self.language = language
        self.routes_dropped = 0
        """Evaluations not watched because ``max_routes`` routes were already watched."""
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[tuple[ScoreName, str | None], _Series] = {}
        self._routes: set[str | None] = set()

    # -- public ------------------------------------------------------------------------------

    def update(self, evaluation: Evaluation, route: str | None = None) -> list[Alert]:
        """Feed one scored answer; returns the alerts it caused (usually none).

        Evaluations without a verdict on the answer (``error``, ``no_claims``) are ignored.
        """
        values = self._values(evaluation)
        if not values:
            return []
        alerts: list[Alert] = []
        with self._lock:
            now: float | None = None
            for score, value in values:
                series = self._get_series(score, route)
                if series is not None and series.judge is None:
                    series.judge = evaluation.judge
                if series is None:
                    continue
                alert = self._observe(series, value)
                if alert is not None:
                    if now is None:
                        now = self._clock()
                    alerts.append(alert(now))
        return alerts

    def observe(self, score: ScoreName, value: float, route: str | None = None) -> Alert | None:
        """Feed one raw value of one series (1.0/0.0 for the rate); for simulations and tests."""
        score = score_name(score)
        with self._lock:
            series = self._get_series(score, route)
            if series is None:
                return None
            alert = self._observe(series, float(value))
            return None if alert is None else alert(self._clock())

    def state(self) -> list[dict[str, Any]]:
        """A snapshot of every series (baseline, design, statistic, firing), for dashboards."""
        with self._lock:
            out = []
            for s in self._series.values():
                out.append(
                    {
                        "score": s.score,
                        "route": s.route,
                        "evaluations": s.seen,
                        "baseline": s.baseline,
                        "firing": s.firing,
                        "statistic": s.stat,
                        "threshold": None if s.design is None else s.design.h,
                        "window_mean": (s.window_sum / len(s.window)) if s.window else None,
                    }
                )
            return out

    def design(self, score: ScoreName, route: str | None = None) -> RateDesign | MeanDesign | None:
        """The CUSUM design of a series once its warm-up is over, else ``None``."""
        score = score_name(score)
        with self._lock:
            series = self._series.get((score, route))
            return None if series is None else series.design

    # -- internals ---------------------------------------------------------------------------

    def _get_series(self, score: ScoreName, route: str | None) -> _Series | None:
        series = self._series.get((score, route))
        if series is None:
            if route not in self._routes and len(self._routes) >= self.max_routes:
                # Bounded memory: a high-cardinality route (a user id by mistake) must not grow
                # the detector without limit. Count and skip.
                self.routes_dropped += 1
                if self.routes_dropped == 1:
                    _logger.warning(
                        "groundwatch drop detector: more than %d routes; new routes are not "
                        "watched (DropDetector(max_routes=...))",
                        self.max_routes,
                    )
                return None
            self._routes.add(route)
            series = _Series(score=score, route=route)
            self._series[(score, route)] = series
        return series

    def _values(self, ev: Evaluation) -> list[tuple[ScoreName, float]]:
        out: list[tuple[ScoreName, float]] = []
        for score in self.scores:
            if score == "flag_share":
                if ev.label != "error":
                    out.append((score, 1.0 if ev.label == "hallucinated" else 0.0))
            else:
                v = ev.faithfulness if score == "faithfulness" else ev.groundedness
                if v is not None and math.isfinite(v):
                    out.append((score, min(1.0, max(0.0, float(v)))))
        return out

    def _judge_error_rates(self, judge: str | None) -> JudgeErrorRates | None:
        if self.error_rates != "shipped":
            return self.error_rates
        if not judge:
            return None
        from ..rates import judge_error_rates

        return judge_error_rates(judge, self.language)

    def _build_design(
        self, score: ScoreName, sample: Sequence[float], judge: str | None = None
    ) -> RateDesign | MeanDesign:
        if score == "flag_share":
            n = len(sample)
            hits = sum(1 for x in sample if x >= 0.5)
            # Upper end of a one-standard-error Wilson interval, smoothed away from 0 and 1.
            p_hat = (hits + 0.5) / (n + 1.0)
            z = 1.0
            centre = (p_hat + z * z / (2 * n)) / (1 + z * z / n)
            half = z * math.sqrt(p_hat * (1 - p_hat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
            p0 = min(max(centre + half, 0.002), 0.9)
            p1 = flag_rate_after_rise(
                p0,
                self._judge_error_rates(judge),
                rate_rise=self.rate_rise,
                min_rate_rise=self.min_rate_rise,
                judge_rate_rise=self.judge_rate_rise,
            )
            return RateDesign.build(p0, p1, self.target_arl)
        return MeanDesign.build(sample, self.mean_shift_sigmas, self.mean_target_arl)

    def _observe(self, s: _Series, x: float) -> Callable[[float], Alert] | None:
        s.seen += 1
        s.window.append(x)
        s.window_sum += x
        if len(s.window) > self.floor_window:
            s.window_sum -= s.window.popleft()
        if s.seen % 65_536 == 0:
            s.window_sum = math.fsum(s.window)  # no drift of the running sum on long runs
        if s.design is None:
            s.warmup_values.append(x)
            if len(s.warmup_values) >= self.warmup:
                s.design = self._build_design(s.score, s.warmup_values, s.judge)
                s.baseline = sum(s.warmup_values) / len(s.warmup_values)
                s.adapt_value = s.baseline
                s.design_value = s.baseline
                s.warmup_values = []
        else:
            self._cusum_step(s, x)
        self._floor_check(s)
        return self._transition(s)

    def _cusum_step(self, s: _Series, x: float) -> None:
        design = s.design
        assert design is not None
        was_zero = s.stat == 0
        s.stat = max(0, s.stat + design.step(x))
        if s.stat == 0:
            s.run_sum, s.run_n = 0.0, 0
        else:
            if was_zero:
                s.run_sum, s.run_n = 0.0, 0
            s.run_sum += x
            s.run_n += 1
        if s.stat >= design.h:
            s.cusum_hot = True
        if s.firing:
            # Cap while firing so that recovery takes a bounded time, whatever the episode's length;
            # draining from the cap to zero is a reverse CUSUM (evidence for p0 over p1) with
            # threshold ``_RESOLVE_FACTOR * h``.
            cap = _RESOLVE_FACTOR * design.h
            s.stat = min(s.stat, cap)
            if s.stat == cap:
                s.recovery_sum, s.recovery_n = 0.0, 0
            else:
                s.recovery_sum += x
                s.recovery_n += 1
        if s.cusum_hot and s.stat == 0:
            s.cusum_hot = False
        if self.adapt_halflife and not s.firing:
            self._adapt(s, x)

    def _adapt(self, s: _Series, x: float) -> None:
        assert self.adapt_halflife is not None and s.adapt_value is not None
        alpha = 1.0 - 0.5 ** (1.0 / self.adapt_halflife)
        s.adapt_value += alpha * (x - s.adapt_value)
        ref = s.design_value or 0.0
        if abs(s.adapt_value - ref) > 0.1 * max(abs(ref), 0.01):
            # Rebuild the design around the adapted baseline, with the same sample size and spread.
            design = s.design
            if isinstance(design, RateDesign):
                n = self.warmup
                hits = round(s.adapt_value * n)
                sample = [1.0] * hits + [0.0] * (n - hits)
                new = self._build_design(s.score, sample, s.judge)
                assert isinstance(new, RateDesign)
                # Keep the evidence gathered so far, in the new design's units.
                s.stat = min(new.h - 1, round(s.stat * new.scale / design.scale))
                s.design = new
            elif isinstance(design, MeanDesign):
                shift = s.adapt_value - design.mu0
                s.design = MeanDesign(
                    mu0=design.mu0 + shift, sigma0=design.sigma0, k=design.k, h=design.h
                )
            s.baseline = s.adapt_value
            s.design_value = s.adapt_value

    def _floor_check(self, s: _Series) -> None:
        floor = self.floors.get(s.score)
        if floor is None or len(s.window) < self.floor_window:
            s.floor_hot = False if floor is None else s.floor_hot
            return
        mean = s.window_sum / len(s.window)
        if s.score == "flag_share":
            if mean > floor:
                s.floor_hot = True
            elif mean <= floor - self.floor_margin:
                s.floor_hot = False
        else:
            if mean < floor:
                s.floor_hot = True
            elif mean >= floor + self.floor_margin:
                s.floor_hot = False

    def _transition(self, s: _Series) -> Callable[[float], Alert] | None:
        hot = s.cusum_hot or s.floor_hot
        if hot:
            s.settled_n = 0
        if hot and not s.firing:
            s.firing = True
            method: Literal["cusum", "floor"] = "cusum" if s.cusum_hot else "floor"
            s.fired_method = method
            if method == "cusum" and s.run_n > 0:
                current, n = s.run_sum / s.run_n, s.run_n
            else:
                n = len(s.window)
                current = s.window_sum / n
            s.recovery_sum, s.recovery_n = 0.0, 0
            s.settled_n = 0
            return self._make(s, "fired", method, current, n)
        if s.firing and not hot and self._settled(s):
            s.firing = False
            if s.fired_method == "cusum" and s.recovery_n > 0:
                # The evaluations that drained the statistic: how the series looks now.
                current, n = s.recovery_sum / s.recovery_n, s.recovery_n
            else:
                n = len(s.window)
                current = s.window_sum / n
            return self._make(s, "resolved", s.fired_method, current, n)
        return None

    def _settled(self, s: _Series) -> bool:
        """Whether a firing series whose statistic has drained (and floor cleared) resolves
        now: the mean of its last ``floor_window`` evaluations has been on the baseline's side
        of the CUSUM's indifference level for ``floor_window`` evaluations in a row.

        The drained statistic alone is not enough: a drop that shows in few answers (one in
        eight contradicts its context) leaves runs of good ones in the middle of the drift,
        and each such run drains the statistic; the recent mean stays past the indifference
        level while the drift lasts, all but for a short lucky stretch, which the run of
        ``floor_window`` rules out. Without a baseline yet (a floor alert during warm-up) the
        floor's own margin is the hysteresis."""
        design = s.design
        if design is None or not s.window:
            return True
        if design.in_control(s.window_sum / len(s.window)):
            s.settled_n += 1
        else:
            s.settled_n = 0
        return s.settled_n >= self.floor_window

    def _make(
        self,
        s: _Series,
        kind: Literal["fired", "resolved"],
        method: Literal["cusum", "floor"],
        current: float,
        n: int,
    ) -> Callable[[float], Alert]:
        if method == "cusum" and s.design is not None:
            d = s.design
            threshold = d.h / d.scale if isinstance(d, RateDesign) else d.h * _MEAN_GRID
        else:
            threshold = self.floors.get(s.score, float("nan"))
        baseline = s.baseline
        score, route = s.score, s.route

        def build(now: float) -> Alert:
            return Alert(
                kind=kind,
                score=score,
                route=route,
                baseline=baseline,
                current=current,
                evaluations=n,
                method=method,
                threshold=threshold,
                time=now,
            )

        return build
