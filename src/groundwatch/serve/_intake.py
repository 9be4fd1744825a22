"""The ratio part of the monitor's sampler, decided when a trace's first span arrives.

A trace that will not be scored should cost nothing while it assembles: so the sampling ratio
is decided on the trace id before any span of the trace is stored. The decision is the in-app
:class:`~groundwatch.RatioSampler`'s own ``decide`` on the trace id (the same trace gets the
same answer here, in the app, and in OpenTelemetry's ``TraceIdRatioBased`` at the same rate).

The monitor's sampler decides again when the interaction is recorded: on the same trace id a
``RatioSampler`` gives the same answer, so the ratio takes effect once, and what is not a
ratio (a rate limit, a token budget, a custom sampler) applies there only, at scoring time.

Per-route rules (:class:`~groundwatch.RouteSampler`) need the trace's route, which the first
span does not always carry: the route is the root's (its ``--route-attribute``, or its
``service.name`` when no attribute is configured), else another span's. When the first span is
the root and its route is known, that route's rate decides. Otherwise the intake keeps the
trace at the highest rate any route has, and the route's own rate applies when the interaction
is recorded. A lower rate selects a subset of a higher one on the same key, so the traces
scored are exactly those the route's ``RatioSampler`` picks; only their memory, while they
assemble, is that of the highest rate.
"""

from __future__ import annotations

from ..runtime.sampling import (
    Decision,
    RateLimitSampler,
    RatioSampler,
    RouteSampler,
    TokenBudgetSampler,
)
from ..types import RagRecord
from ._otlp import LogEvent, SpanData

_ANY_ROUTE = object()
"""The route is not known yet: any of the sampler's routes may turn out to be the one."""


def ratio_of(sampler: object, route: object = _ANY_ROUTE, depth: int = 0) -> float | None:
    """The share of traces ``sampler`` can pick by trace id for ``route``; ``None`` when it is
    not a composition of the built-in samplers (it then decides at scoring time only)."""
    if depth > 8:
        return None
    if isinstance(sampler, RatioSampler):
        return sampler.rate
    if isinstance(sampler, (RateLimitSampler, TokenBudgetSampler)):
        # The cap itself is no ratio: it applies when the interaction is recorded.
        return 1.0 if sampler.inner is None else ratio_of(sampler.inner, route, depth + 1)
    if isinstance(sampler, RouteSampler):
        if route is not _ANY_ROUTE:
            picked = sampler.routes.get(route, sampler.default) if isinstance(route, str) else None
            return ratio_of(picked if picked is not None else sampler.default, route, depth + 1)
        rates = [ratio_of(s, route, depth + 1) for s in (sampler.default, *sampler.routes.values())]
        return None if any(r is None for r in rates) else max(r for r in rates if r is not None)
    return None


class IntakeSampler:
    """Decides, on a trace's first span, whether the trace can be scored at all.

    Args:
        sampler: the monitor's sampler.
        route_attribute: serve's ``--route-attribute`` (``None``: the route is the root's
            ``service.name``).
    """

    def __init__(self, sampler: object, *, route_attribute: str | None) -> None:
        self.sampler = sampler
        self.route_attribute = route_attribute
        self._by_rate: dict[float, RatioSampler] = {}
        self.any_route_rate = ratio_of(sampler)

    def _route(self, span: SpanData | LogEvent) -> object:
        if span.parent_id:
            return _ANY_ROUTE  # the root, yet to come, decides the route
        if span.route is not None:
            return span.route
        return span.service if self.route_attribute is None else _ANY_ROUTE

    def sampled(self, span: SpanData | LogEvent) -> bool:
        """Whether the trace of ``span``, its first span (or GenAI log event) received, may
        be scored."""
        route = self._route(span)
        rate = self.any_route_rate if route is _ANY_ROUTE else ratio_of(self.sampler, route)
        if rate is None:
            return True
        ratio = self._by_rate.get(rate)
        if ratio is None:
            ratio = self._by_rate[rate] = RatioSampler(rate)
        record = RagRecord(trace_id=int.from_bytes(span.trace_id, "big"))
        return ratio.decide(record) is Decision.SAMPLED
