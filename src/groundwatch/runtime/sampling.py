"""Which records get scored: cost control on live traffic.

A sampler is any object with ``decide(record) -> Decision``. It runs on the host's request path,
so it must be cheap and must not block (the built-in ones cost well under a microsecond to a
few). Optionally it has ``rate_for(record) -> float | None``, the probability with which the
record was selected, which the evaluation span reports as ``groundwatch.sampling.rate``.

Built-in samplers compose::

    RateLimitSampler(600, RouteSampler({"checkout": RatioSampler(1.0)}, default=RatioSampler(0.05)))

``TokenBudgetSampler`` caps the judge's token spend (``over_budget``); samplers that want
to see results define ``observe(record, evaluation)``, which the monitor calls on the worker
for each finished evaluation (for every sampler composed inside, too).

Records given ``always_score=True`` (a thumbs-down, a support escalation) skip the sampler:
the :class:`~groundwatch.Monitor` scores them whatever it says (queue space permitting).
"""

from __future__ import annotations

import enum
import hashlib
import math
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: the integrations import this module at start-up
    from .._shared.config import RuntimeConfig
    from ..types import Evaluation, RagRecord

__all__ = [
    "Decision",
    "RateLimitSampler",
    "RatioSampler",
    "RouteSampler",
    "Sampler",
    "TokenBudgetSampler",
    "default_sampler",
    "inner_samplers",
    "sampling_rate",
]


class Decision(str, enum.Enum):
    """The fate of one record, as counted in ``groundwatch.records{groundwatch.decision}``.

    Samplers return ``SAMPLED``, ``NOT_SAMPLED``, ``THROTTLED`` (a rate limit said no) or
    ``OVER_BUDGET`` (a cost cap said no; for custom budget samplers). The monitor itself adds
    ``QUEUE_FULL`` (sampled, but the worker's queue had no room) and ``ERROR`` (the record could
    not be taken: bad input, a raising sampler, a monitor already shut down).
    """

    SAMPLED = "sampled"
    NOT_SAMPLED = "not_sampled"
    THROTTLED = "throttled"
    OVER_BUDGET = "over_budget"
    QUEUE_FULL = "queue_full"
    ERROR = "error"


@runtime_checkable
class Sampler(Protocol):
    """Decides whether one record is scored. Called on the host's request path: keep it cheap."""

    def decide(self, record: RagRecord) -> Decision: ...


_MASK64 = (1 << 64) - 1


def _key64(record: RagRecord) -> int:
    """The 64-bit sampling key of a record: the trace id's low 64 bits (as OpenTelemetry's
    ``TraceIdRatioBased`` uses, so equal rates pick the same traces), else a hash of the
    record id."""
    if record.trace_id:
        return record.trace_id & _MASK64
    digest = hashlib.blake2b(record.record_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class RatioSampler:
    """Scores a fixed share of records, deterministically on the trace id.

    The decision is ``low64(trace_id) < rate * 2**64``: every service (and every process) that
    samples the same trace at the same rate agrees, and a lower rate always selects a subset of
    a higher one. Without a trace the record id (random per record) is the key.

    Args:
        rate: the share in [0, 1].

    Raises:
        ValueError: ``rate`` is outside [0, 1].
    """

    def __init__(self, rate: float) -> None:
        rate = float(rate)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {rate!r}")
        self.rate = rate
        self._bound = round(rate * (1 << 64))

    def decide(self, record: RagRecord) -> Decision:
        if self._bound >= 1 << 64:
            return Decision.SAMPLED
        if self._bound == 0:
            return Decision.NOT_SAMPLED
        return Decision.SAMPLED if _key64(record) < self._bound else Decision.NOT_SAMPLED

    def rate_for(self, record: RagRecord) -> float | None:
        return self.rate

    def __repr__(self) -> str:
        return f"RatioSampler({self.rate})"


class _BucketSampler:
    """A token bucket behind an optional inner sampler: what both caps below share.

    The bucket holds up to ``capacity`` tokens and refills continuously at ``per_second``.
    :meth:`decide` asks the inner sampler, refills, and leaves the verdict on the bucket to
    ``_decide_refilled`` (called under ``_lock``).
    """

    def __init__(self, inner: Sampler | None, *, capacity: float, per_second: float) -> None:
        self.inner = inner
        self._capacity = capacity
        self._per_second = per_second
        self._tokens = capacity
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._per_second)
        self._last = now

    def decide(self, record: RagRecord) -> Decision:
        if self.inner is not None:
            decision = self.inner.decide(record)
            if decision is not Decision.SAMPLED:
                return decision
        with self._lock:
            self._refill()
            return self._decide_refilled()

    def _decide_refilled(self) -> Decision:
        raise NotImplementedError

    def rate_for(self, record: RagRecord) -> float | None:
        return sampling_rate(self.inner, record) if self.inner is not None else 1.0

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()


class RateLimitSampler(_BucketSampler):
    """Caps the records scored per minute (a token bucket), on top of another sampler.

    Under a traffic spike the judge's cost stays bounded; what the cap refuses is counted as
    ``throttled``. The bucket holds up to ``burst`` tokens (a minute's worth by default) and
    refills continuously.

    Args:
        per_minute: records per minute allowed through.
        inner: the sampler asked first (everything, when ``None``).
        burst: bucket size; ``per_minute`` by default.
    """

    def __init__(
        self, per_minute: float, inner: Sampler | None = None, *, burst: float | None = None
    ) -> None:
        # ``not x > 0`` also refuses NaN, which would otherwise throttle every record silently.
        if not 0 < per_minute < math.inf:
            raise ValueError(f"per_minute must be a finite number > 0, got {per_minute!r}")
        if burst is not None and not 1 <= burst < math.inf:
            raise ValueError(f"burst must be a finite number >= 1, got {burst!r}")
        self.per_minute = float(per_minute)
        self.burst = float(burst) if burst is not None else max(1.0, self.per_minute)
        super().__init__(inner, capacity=self.burst, per_second=self.per_minute / 60.0)

    def _decide_refilled(self) -> Decision:
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return Decision.SAMPLED
        return Decision.THROTTLED

    def __repr__(self) -> str:
        return f"RateLimitSampler({self.per_minute}, inner={self.inner!r})"


class TokenBudgetSampler(_BucketSampler):
    """Caps the judge's token spend: ``over_budget`` once the budget is used up.

    A bucket of ``tokens_per_hour`` tokens refills continuously; each scored record's
    ``Evaluation.usage`` (input + output tokens) is taken out of it when its result arrives
    (the monitor calls :meth:`observe`). While the bucket is empty, records are refused with
    ``over_budget``. Evaluations already in flight when it empties still finish, so the spend
    can overshoot by up to ``max_concurrency`` evaluations. Judges that report no usage (the
    local judge) cost nothing here.

    Args:
        tokens_per_hour: the budget.
        inner: the sampler asked first (everything, when ``None``).
    """

    def __init__(self, tokens_per_hour: float, inner: Sampler | None = None) -> None:
        if not 0 < tokens_per_hour < math.inf:
            raise ValueError(
                f"tokens_per_hour must be a finite number > 0, got {tokens_per_hour!r}"
            )
        self.tokens_per_hour = float(tokens_per_hour)
        super().__init__(
            inner, capacity=self.tokens_per_hour, per_second=self.tokens_per_hour / 3600.0
        )

    def _decide_refilled(self) -> Decision:
        return Decision.SAMPLED if self._tokens > 0 else Decision.OVER_BUDGET

    def observe(self, record: RagRecord, evaluation: Evaluation) -> None:
        """Take a finished evaluation's tokens out of the budget (called on the worker)."""
        usage = evaluation.usage
        if usage is None:
            return
        with self._lock:
            self._refill()
            self._tokens -= usage.input_tokens + usage.output_tokens

    def __repr__(self) -> str:
        return f"TokenBudgetSampler({self.tokens_per_hour}, inner={self.inner!r})"


class RouteSampler:
    """Picks a sampler by the record's route (``Monitor.record(route=...)``).

    Args:
        routes: route name -> sampler.
        default: for records of any other route, or none.
    """

    def __init__(self, routes: Mapping[str, Sampler], default: Sampler | None = None) -> None:
        self.routes = dict(routes)
        self.default: Sampler = default if default is not None else RatioSampler(1.0)

    def _pick(self, record: RagRecord) -> Sampler:
        if record.route is None:
            return self.default
        return self.routes.get(record.route, self.default)

    def decide(self, record: RagRecord) -> Decision:
        return self._pick(record).decide(record)

    def rate_for(self, record: RagRecord) -> float | None:
        return sampling_rate(self._pick(record), record)

    def __repr__(self) -> str:
        return f"RouteSampler({self.routes!r}, default={self.default!r})"


def default_sampler(config: RuntimeConfig) -> Sampler:
    """The sampler the environment asks for: a ratio, with a rate limit on top if set."""
    sampler: Sampler = RatioSampler(config.sample_rate)
    if config.rate_limit_per_minute is not None:
        sampler = RateLimitSampler(config.rate_limit_per_minute, sampler)
    return sampler


def sampling_rate(sampler: object, record: RagRecord) -> float | None:
    """The probability with which ``sampler`` selects ``record``, where the sampler knows."""
    rate_for = getattr(sampler, "rate_for", None)
    if rate_for is None:
        return None
    value = rate_for(record)
    return None if value is None else float(value)


def record_sampling_rate(sampler: object, record: RagRecord) -> float | None:
    """The rate a record's span carries: 1.0 for ``always_score``, else :func:`sampling_rate`."""
    return 1.0 if record.always_score else sampling_rate(sampler, record)


def inner_samplers(sampler: object, depth: int = 0) -> list[object]:
    """``sampler`` and every sampler composed inside it (``inner``, ``default``, ``routes``)."""
    if sampler is None or depth > 8:
        return []
    found = [sampler]
    found += inner_samplers(getattr(sampler, "inner", None), depth + 1)
    found += inner_samplers(getattr(sampler, "default", None), depth + 1)
    for inner in (getattr(sampler, "routes", None) or {}).values():
        found += inner_samplers(inner, depth + 1)
    return found
