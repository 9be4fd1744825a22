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

Both are plain floats under a lock, read by observable counters when the SDK collects. Which
counter carries which sum, in which order, is :data:`groundwatch.rates.SUMS` (the one place a
sum's field, counter and Prometheus record meet); what one answer adds is
:func:`groundwatch.rates._sums.increments`, as for :meth:`RateTotals.add
<groundwatch.rates.RateTotals.add>`.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..rates import _sums
from ..rates._sums import AUDIT_SUMS, RATE_SUMS, increments, usable_probability
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
    """The judge's prediction ``f`` of one answer for the counters: its probability, else its
    flag; a probability that is not a number in [0, 1] counts as unknown (the counters never
    raise on a custom judge's stray value). :func:`groundwatch.rates._sums.prediction` is the
    one rule."""
    return _sums.prediction(flagged, usable_probability(probability))


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
    """The ``groundwatch.audit.*`` sums of one monitor (or worker, or import), in the order of
    :data:`~groundwatch.rates._sums.AUDIT_SUMS`."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(len(AUDIT_SUMS))

    def add(self, key: RateKey, label: bool, flagged: bool, probability: float | None) -> None:
        """Count one labelled audited answer: the person's ``label`` (``True``:
        hallucinated), the judge's flag and probability (``None`` or a stray value: the flag
        stands in, as :meth:`RateTotals.add <groundwatch.rates.RateTotals.add>` does)."""
        f = prediction(flagged, probability)
        added = increments(flagged, f, label)
        self.merge({key: [added[s.field] for s in AUDIT_SUMS]})


RATE_WIDTH = len(RATE_SUMS)


class RateSource(Protocol):
    """What the counters read of a source (:class:`~._stats.Stats`); a protocol, so that this
    module, which ``_stats`` builds on, never imports it back."""

    rates: KeyedSums
    audit: AuditSums


class RateInstruments:
    """The observable counters of both families on one meter (registered once per meter
    provider, with :class:`~._emitter._Instruments`), one per :data:`~groundwatch.rates.SUMS`
    entry, reading every source's :attr:`Stats.rates <._stats.Stats.rates>` (the ``rate``
    family) or :attr:`Stats.audit <._stats.Stats.audit>` (the ``audit`` family)."""

    def __init__(self, meter: Meter, sources: Iterable[RateSource]) -> None:
        self.sources = sources
        for family, sums, read in (
            ("rate", RATE_SUMS, _read_rates),
            ("audit", AUDIT_SUMS, _read_audit),
        ):
            for index, declared in enumerate(sums):
                assert declared.family == family  # the table's order is the sums' order
                meter.create_observable_counter(
                    declared.counter,
                    callbacks=[functools.partial(self._observe, read, index)],
                    unit=declared.unit,
                    description=declared.description,
                )

    def _observe(
        self, read: Callable[[RateSource], KeyedSums], index: int, options: CallbackOptions
    ) -> Iterable[Observation]:
        total: dict[RateKey, float] = {}
        for stats in list(self.sources):
            for key, values in read(stats).snapshot().items():
                total[key] = total.get(key, 0.0) + values[index]
        for key, value in total.items():
            yield Observation(value, dict(key))


def _read_rates(stats: RateSource) -> KeyedSums:
    return stats.rates


def _read_audit(stats: RateSource) -> KeyedSums:
    return stats.audit


def count_scored(
    sums: dict[RateKey, list[float]], key: RateKey, flagged: bool, probability: float | None
) -> None:
    """Add one judged answer to a batch's sums (in :data:`~groundwatch.rates._sums.RATE_SUMS`'
    order); a probability that is not a number in [0, 1] counts as unknown (the flag)."""
    added = increments(flagged, prediction(flagged, probability), None)
    found = sums.get(key)
    if found is None:
        sums[key] = [added[s.field] for s in RATE_SUMS]
    else:
        for i, declared in enumerate(RATE_SUMS):
            found[i] += added[declared.field]


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
