"""The counters behind the hallucination-rate estimate (docs/rates.md): sums that add up.

Prometheus adds counters across replicas, and the estimate (prediction-powered inference, the
labels alone, Rogan–Gladen) needs only sums (:class:`groundwatch.rates.RateTotals`), so each
sum is one counter, by ``groundwatch.route`` and ``groundwatch.judge``:

- ``groundwatch.rate.*``, over every judged answer: counted on the worker beside the other
  metric points of an evaluation (:class:`~._emitter.MetricBatch` collects a batch's sums and
  adds them to the monitor's :class:`KeyedSums` under one lock);
- ``groundwatch.audit.*``, over the audited answers a person labelled: counted when the label
  comes back (``Monitor.feedback(source="audit")`` on the caller's thread, ``groundwatch
  feedback import``) into :class:`AuditSums`.

Both are plain floats under a lock, read by observable counters when the SDK collects.

A judged answer whose judge gave no probability counts its flag (1 or 0) as the prediction,
as :meth:`RateTotals.add <groundwatch.rates.RateTotals.add>` does.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from . import semconv as sc

RateKey = tuple[tuple[str, str], ...]
"""A counter's attributes as a hashable key: ``groundwatch.route`` (when there is one) and
``groundwatch.judge``."""


def rate_key(route: str | None, judge: str) -> RateKey:
    if route is None:
        return ((sc.GROUNDWATCH_JUDGE, judge),)
    return ((sc.GROUNDWATCH_ROUTE, route), (sc.GROUNDWATCH_JUDGE, judge))


def audit_key(trace_id: int, record_id: str) -> int:
    """What the audit's hash is taken of: the trace id, or, for a record without a trace, a
    128-bit digest of its record id (as the sampler keys such a record by its id)."""
    if trace_id:
        return trace_id
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=16).digest(), "big")


def prediction(flagged: bool, probability: float | None) -> float:
    """The judge's prediction ``f`` of one answer: its probability, else its flag."""
    return float(flagged) if probability is None else float(probability)


# (instrument, unit, description) of the audit sums, in AuditSums' order.
_AUDIT: tuple[tuple[str, str, str], ...] = (
    (sc.METRIC_AUDIT_LABELLED, "{label}", "Audited answers a person labelled"),
    (sc.METRIC_AUDIT_LABEL_SUM, "{label}", "Audited answers a person labelled hallucinated"),
    (sc.METRIC_AUDIT_FLAGGED, "{label}", "Labelled audited answers the judge flagged"),
    (
        sc.METRIC_AUDIT_LABEL_FLAG,
        "{label}",
        "Labelled audited answers both labelled hallucinated and flagged by the judge",
    ),
    (
        sc.METRIC_AUDIT_PROBABILITY,
        "1",
        "Sum of the judge's hallucination probability over labelled audited answers",
    ),
    (
        sc.METRIC_AUDIT_PROBABILITY_SQUARES,
        "1",
        "Sum of the squared probability over labelled audited answers",
    ),
    (
        sc.METRIC_AUDIT_LABEL_PROBABILITY,
        "1",
        "Sum of label times probability over labelled audited answers",
    ),
)


class KeyedSums:
    """Running sums by :data:`RateKey`, plain floats under a lock: the request or worker
    thread adds in a fraction of a microsecond, where a synchronous OpenTelemetry counter
    costs about 10 us per ``add``; observable counters read them when the SDK collects."""

    __slots__ = ("_lock", "sums", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self._lock = threading.Lock()
        self.sums: dict[RateKey, list[float]] = {}

    def expect(self, key: RateKey) -> None:
        """Publish ``key``'s sums at 0 from now on: an increase that comes later is then one
        Prometheus sees (``increase()`` misses a series' first sample)."""
        if key not in self.sums:
            with self._lock:
                self.sums.setdefault(key, [0.0] * self.width)

    def merge(self, batch: Mapping[RateKey, list[float]]) -> None:
        """Add a batch's sums (one lock for the whole batch)."""
        with self._lock:
            for key, values in batch.items():
                sums = self.sums.setdefault(key, [0.0] * self.width)
                for i, value in enumerate(values):
                    sums[i] += value

    def snapshot(self) -> dict[RateKey, tuple[float, ...]]:
        with self._lock:
            return {key: tuple(values) for key, values in self.sums.items()}

    def reinit_after_fork(self) -> None:
        self._lock = threading.Lock()


class AuditSums(KeyedSums):
    """The ``groundwatch.audit.*`` sums of one monitor (or worker, or import):
    ``[labelled, label_sum, flagged, label_flag, f, f², y·f]``."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(len(_AUDIT))

    def add(self, key: RateKey, label: bool, flagged: bool, probability: float) -> None:
        """Count one labelled audited answer: the person's ``label`` (``True``:
        hallucinated), the judge's flag and prediction."""
        y = float(label)
        f = probability
        self.merge({key: [1.0, y, float(flagged), y * flagged, f, f * f, y * f]})


# (instrument, unit, description) of the sums over judged answers, in count_scored's order.
_RATE: tuple[tuple[str, str, str], ...] = (
    (
        sc.METRIC_RATE_SCORED,
        "{evaluation}",
        "Judged answers (label not error), the population of the rate estimate",
    ),
    (sc.METRIC_RATE_FLAGGED, "{evaluation}", "Judged answers the judge labelled hallucinated"),
    (
        sc.METRIC_RATE_PROBABILITY,
        "1",
        "Sum of the judge's hallucination probability over judged answers",
    ),
    (
        sc.METRIC_RATE_PROBABILITY_SQUARES,
        "1",
        "Sum of the squared hallucination probability over judged answers",
    ),
)
RATE_WIDTH = len(_RATE)


class RateSource(Protocol):
    """What the counters read of a source (:class:`~._stats.Stats`); a protocol, so that this
    module, which ``_stats`` builds on, never imports it back."""

    rates: KeyedSums
    audit: AuditSums


class RateInstruments:
    """The observable counters of both families on one meter (registered once per meter
    provider, with :class:`~._emitter._Instruments`), reading every source's
    :attr:`Stats.rates <._stats.Stats.rates>` and :attr:`Stats.audit <._stats.Stats.audit>`."""

    def __init__(self, meter: Meter, sources: Iterable[RateSource]) -> None:
        self.sources = sources
        for family, instruments in (("rates", _RATE), ("audit", _AUDIT)):
            for index, (name, unit, description) in enumerate(instruments):
                meter.create_observable_counter(
                    name,
                    callbacks=[functools.partial(self._observe, family, index)],
                    unit=unit,
                    description=description,
                )

    def _observe(self, family: str, index: int, options: CallbackOptions) -> Iterable[Observation]:
        total: dict[RateKey, float] = {}
        for stats in list(self.sources):
            sums: KeyedSums = getattr(stats, family)
            for key, values in sums.snapshot().items():
                total[key] = total.get(key, 0.0) + values[index]
        for key, value in total.items():
            yield Observation(value, dict(key))


def count_scored(
    sums: dict[RateKey, list[float]], key: RateKey, flagged: bool, probability: float | None
) -> None:
    """Add one judged answer to a batch's ``[scored, flagged, f, f²]`` sums."""
    f = prediction(flagged, probability)
    found = sums.get(key)
    if found is None:
        sums[key] = [1.0, float(flagged), f, f * f]
    else:
        found[0] += 1
        found[1] += flagged
        found[2] += f
        found[3] += f * f


__all__: list[str] = [
    "RATE_WIDTH",
    "AuditSums",
    "KeyedSums",
    "RateInstruments",
    "RateKey",
    "audit_key",
    "count_scored",
    "prediction",
    "rate_key",
]
