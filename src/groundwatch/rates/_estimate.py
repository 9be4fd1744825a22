"""The hallucination rate with an interval, from :class:`RateTotals`.

Methods, tried in this order (``docs/rates.md`` gives the formulas and the citations):

``ppi``
    Prediction-powered inference with a power-tuned weight (PPI++: Angelopoulos, Duchi and
    Zrnic 2023, arXiv:2311.01453; PPI: Angelopoulos et al., *Science* 2023). The judge's
    probability ``f`` on the unlabelled answers, corrected by the mean ``y - λ·f`` on the audit:
    ``θ = λ·mean_U(f) + mean_L(y - λ·f)``, unbiased for any ``λ`` and any judge; ``λ`` is the
    variance-minimising weight. Computed from the sums alone, exactly as the authors'
    ``ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, lam=None)`` computes it with ``Yhat_unlabeled``
    the predictions on the answers left unlabelled (tests/rates/test_ppi_reference.py).
``labels``
    The audit labels alone, where their interval is at least as tight (a judge that carries no
    information about the labels gives ``λ = 0`` and nothing to gain), where the audit has too
    few labels of either kind for PPI's normal approximation, or where every scored answer was
    labelled (a census).
``no_audit``
    No audit labels: the rate is unknown, and no interval is given for it (``estimate``,
    ``lower`` and ``upper`` are ``None``); ``flag_share`` is what the judge says. The judge's
    error rates differ from domain to domain (a sensitivity of 0.42-1.00 and a specificity of
    0.36-0.97 across public sources), so nothing computed from them alone is the rate of an app
    they were not measured on. :func:`extrapolate_rate` gives the Rogan-Gladen correction with
    them, named as the extrapolation it is.

Every interval is for the rate of the process the answers come from (the answers are a sample of
it), so a census of a file still has the labels' own interval rather than a zero-width one; a
reader who wants the share in the file itself reads the estimate. Everything is clipped to
[0, 1]. Degenerate input never raises: no answers give ``no_audit`` with a ``flag_share`` of 0;
zero variances fall through to the next method.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Literal

from ._error_rates import JudgeErrorRates, shipped_error_rates
from ._totals import RateTotals

__all__ = [
    "RateEstimate",
    "RateExtrapolation",
    "RateMethod",
    "estimate_rate",
    "extrapolate_rate",
]

RateMethod = Literal["ppi", "labels", "no_audit"]

# The normal approximation behind the PPI interval needs both kinds of label in the audit; the
# textbook rule for a binomial proportion asks for at least five of each (n·p ≥ 5 and
# n·(1 - p) ≥ 5). Below that the labels' own (Wilson) interval is used, which covers there.
MIN_LABELS_EACH_KIND = 5


@dataclasses.dataclass(frozen=True)
class RateEstimate:
    """A hallucination rate with its interval, and how it was obtained.

    Without audit labels the rate is unknown: ``method`` is ``no_audit`` and ``estimate``,
    ``lower`` and ``upper`` are ``None``.

    Attributes:
        flag_share: the share of judged answers the judge flagged (what the judge says, not
            the rate).
        estimate: the estimated hallucination rate, in [0, 1]; ``None`` without audit labels.
        lower, upper: its interval at ``confidence``, within [0, 1]; ``None`` without labels.
        confidence: the interval's nominal coverage (0.9 = a 90 % interval).
        method: ``ppi``, ``labels`` or ``no_audit`` (see the module).
        scored: judged answers (``label != "error"``).
        labelled: of those, answers with an audit label.
    """

    flag_share: float
    estimate: float | None
    lower: float | None
    upper: float | None
    confidence: float
    method: RateMethod
    scored: int
    labelled: int

    @property
    def known(self) -> bool:
        """Whether there is a rate: audit labels gave an estimate and its interval."""
        return self.estimate is not None

    def as_dict(self) -> dict[str, float | int | str | None]:
        """The fields as a JSON-ready mapping, in declaration order."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class RateExtrapolation:
    """The flag share corrected with a judge's error rates measured on *other* data
    (Rogan-Gladen): an extrapolation to an app those rates were not measured on, never the
    hallucination rate. It holds only where the app's traffic resembles the measured sources;
    an audit says whether it does.

    Attributes:
        flag_share: the share of judged answers the judge flagged.
        extrapolated: the corrected share, in [0, 1].
        lower, upper: its range over the flag share's interval and the sources' error rates.
        confidence: the flag share interval's coverage.
        scored: judged answers.
        error_rates: the judge's measured error rates used.
    """

    flag_share: float
    extrapolated: float
    lower: float
    upper: float
    confidence: float
    scored: int
    error_rates: JudgeErrorRates


def estimate_rate(
    totals: RateTotals,
    *,
    judge: str | None = None,
    language: str = "en",
    confidence: float = 0.9,
) -> RateEstimate:
    """The hallucination rate of the answers behind ``totals``, with an interval, from the
    audit labels among them; without audit labels, ``no_audit``: the rate is unknown.

    Args:
        totals: the sums over judged answers (:class:`RateTotals`).
        judge: the judge's name, as ``Evaluation.judge`` gives it.
        language: the answers' language.
        confidence: the interval's coverage, in (0, 1).

    Returns:
        The estimate; see the module for which method applies when.

    Raises:
        ValueError: ``confidence`` is not within (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence!r}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    flag_share = totals.flagged / totals.scored if totals.scored > 0 else 0.0

    def result(method: RateMethod, estimate: float, lower: float, upper: float) -> RateEstimate:
        estimate = _clip(estimate)
        return RateEstimate(
            flag_share=flag_share,
            estimate=estimate,
            lower=min(_clip(lower), estimate),
            upper=max(_clip(upper), estimate),
            confidence=confidence,
            method=method,
            scored=totals.scored,
            labelled=totals.labelled,
        )

    if totals.labelled <= 0:
        return RateEstimate(
            flag_share=flag_share,
            estimate=None,
            lower=None,
            upper=None,
            confidence=confidence,
            method="no_audit",
            scored=totals.scored,
            labelled=0,
        )
    n = totals.labelled
    rate = totals.label_sum / n
    lower, upper = wilson_interval(totals.label_sum, n, z)
    ppi = ppi_interval(totals, z)
    if ppi is not None and ppi[2] - ppi[1] < upper - lower:
        return result("ppi", *ppi)
    return result("labels", rate, lower, upper)


def extrapolate_rate(
    totals: RateTotals,
    *,
    judge: str | None = None,
    language: str = "en",
    confidence: float = 0.9,
    error_rates: JudgeErrorRates | None = None,
) -> RateExtrapolation | None:
    """The flag share corrected with the judge's error rates measured on public sources.

    Not the hallucination rate: those error rates differ by domain, and on an app unlike the
    sources the corrected share can be far from the truth with an interval that misses it.
    Use it to read a judge's flags before an audit exists, as an extrapolation; only
    :func:`estimate_rate` with audit labels gives a rate.

    Args:
        totals: the sums over judged answers; their labels are ignored.
        judge: the judge's name, to look up its shipped error rates.
        language: the answers' language, for that look-up.
        confidence: the coverage of the flag share's interval.
        error_rates: the judge's error rates to use instead of the shipped ones.

    Returns:
        The extrapolation, or ``None`` without a judge or error rates, without judged answers,
        or for a judge no better than chance.

    Raises:
        ValueError: ``confidence`` is not within (0, 1), or no error rates were measured for
            ``judge`` in ``language`` (the message names those that were).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence!r}")
    if error_rates is None and judge is not None:
        error_rates = shipped_error_rates(judge, language)
    if error_rates is None or totals.scored <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    corrected = rogan_gladen_interval(totals.flagged, totals.scored, error_rates, z)
    if corrected is None:
        return None
    estimate, lower, upper = (_clip(x) for x in corrected)
    return RateExtrapolation(
        flag_share=totals.flagged / totals.scored,
        extrapolated=estimate,
        lower=min(lower, estimate),
        upper=max(upper, estimate),
        confidence=confidence,
        scored=totals.scored,
        error_rates=error_rates,
    )


def wilson_interval(successes: float, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion (``(0, 1)`` when ``n`` is 0).

    Chosen over the normal (Wald) interval because it keeps its coverage at small ``n`` and at
    rates near 0 or 1, where hallucination rates live: 0 hallucinations in 50 labels gives
    [0, 0.05] at 90 %, where Wald gives the empty [0, 0].
    """
    if n <= 0:
        return 0.0, 1.0
    p = min(max(successes / n, 0.0), 1.0)
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return centre - half, centre + half


def ppi_interval(totals: RateTotals, z: float) -> tuple[float, float, float] | None:
    """PPI++ for a mean: ``(estimate, lower, upper)``, or ``None`` where it does not apply.

    It does not apply to a census (no unlabelled answer left), to fewer than
    :data:`MIN_LABELS_EACH_KIND` labels of either kind, or where the judge's predictions do not
    vary (``λ`` is then 0 and PPI is the labels alone). Labels are 0/1, so ``Σy² = Σy``.
    """
    n = totals.labelled
    m = totals.scored - n  # the unlabelled answers
    positives = totals.label_sum
    if m <= 0 or min(positives, n - positives) < MIN_LABELS_EACH_KIND:
        return None
    total = totals.scored
    # λ as ppi_py._calc_lam_glm computes it for a mean (clip=True): the labelled covariance of
    # y and f (divided by n) over (1 + n/m) times the variance of f over every answer (n - 1).
    mean_f_all = totals.probability_sum / total
    var_f_all = (totals.probability_square_sum - total * mean_f_all**2) / (total - 1)
    mean_y = positives / n
    mean_f_labelled = totals.labelled_probability_sum / n
    cov_yf = totals.label_probability_sum / n - mean_y * mean_f_labelled
    if var_f_all <= 0.0:
        return None
    lam = min(max(cov_yf / ((1.0 + n / m) * var_f_all), 0.0), 1.0)
    if lam == 0.0:
        return None
    sum_f_unlabelled = totals.probability_sum - totals.labelled_probability_sum
    sum_ff_unlabelled = totals.probability_square_sum - totals.labelled_probability_square_sum
    mean_f_unlabelled = sum_f_unlabelled / m
    var_f_unlabelled = max(sum_ff_unlabelled / m - mean_f_unlabelled**2, 0.0)
    mean_rectifier = mean_y - lam * mean_f_labelled
    mean_rectifier_sq = (
        positives
        - 2 * lam * totals.label_probability_sum
        + lam * lam * totals.labelled_probability_square_sum
    ) / n
    var_rectifier = max(mean_rectifier_sq - mean_rectifier**2, 0.0)
    estimate = lam * mean_f_unlabelled + mean_rectifier
    half = z * math.sqrt(lam * lam * var_f_unlabelled / m + var_rectifier / n)
    return estimate, estimate - half, estimate + half


def rogan_gladen_interval(
    flagged: int, scored: int, rates: JudgeErrorRates, z: float
) -> tuple[float, float, float] | None:
    """The Rogan–Gladen corrected rate ``(estimate, lower, upper)``, or ``None`` where the
    judge is no better than chance (``sensitivity + specificity <= 1``).

    The interval is the corrected rate's range over the flag share's Wilson interval and over
    the error rates the judge has on different sources (:func:`error_rate_pairs`): the
    correction is monotone in the flag share, so its range is reached at the share's bounds. A
    pair where the judge would be no better than chance leaves both sides open (0 and 1); a
    flag share no measured pair can explain falls back to the bound that needs only the
    sensitivity (or only the specificity).
    """
    youden = rates.sensitivity + rates.specificity - 1.0
    if scored <= 0 or youden <= 0.0:
        return None
    share = flagged / scored
    estimate = (share + rates.specificity - 1.0) / youden
    low_share, high_share = wilson_interval(flagged, scored, z)
    pairs = error_rate_pairs(rates)
    lower, upper = 1.0, 0.0
    for se, sp in pairs:
        j = se + sp - 1.0
        if j <= 0.0:
            return estimate, 0.0, 1.0
        for q in (low_share, high_share):
            corrected = (q + sp - 1.0) / j
            lower, upper = min(lower, corrected), max(upper, corrected)
    # The judge flags ``q = se·θ + (1 - sp)·(1 - θ)``, so ``θ <= q / se`` whatever the
    # specificity (and ``θ >= 1 - (1 - q) / sp`` whatever the sensitivity). A flag share below
    # every measured false-alarm rate (every pair's correction under 0) says those
    # specificities do not fit this traffic: the bound that needs none stands instead of a
    # collapsed [0, 0]; likewise above every pair's reach.
    if upper <= 0.0:
        upper = high_share / min(se for se, _ in pairs)
    if lower >= 1.0:
        lower = 1.0 - (1.0 - low_share) / min(sp for _, sp in pairs)
    return estimate, lower, upper


def error_rate_pairs(rates: JudgeErrorRates) -> list[tuple[float, float]]:
    """The (sensitivity, specificity) pairs the no-label interval spans: the pooled pair and
    each source's, where at least two sources were measured; else the corners of the box of
    the lows and highs.

    A source's two rates move together (a judge that flags more on a source has a higher
    sensitivity and a lower specificity there), so the worst sensitivity of one source beside
    the worst specificity of another is a judge that exists nowhere; on the local judge's
    English sources that corner is no better than chance, and the box would say only [0, 1].
    """
    pairs = [(rates.sensitivity, rates.specificity)]
    for measured in rates.sources.values():
        se, sp = measured.get("sensitivity"), measured.get("specificity")
        if isinstance(se, (int, float)) and isinstance(sp, (int, float)):
            pairs.append((float(se), float(sp)))
    if len(pairs) >= 3:
        return pairs
    return [
        (se, sp)
        for se in (rates.sensitivity_low, rates.sensitivity_high)
        for sp in (rates.specificity_low, rates.specificity_high)
    ]


def _clip(value: float) -> float:
    return 0.0 if not value > 0.0 else min(value, 1.0)
