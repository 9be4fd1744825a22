"""Order statistics the benchmarks share."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    """The value at quantile ``q`` (0..1) of ``values``, nearest rank, no interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def p99(values: list[float]) -> float:
    return percentile(values, 0.99)


def spread(ratios: list[float]) -> str:
    """Per-round ratios as their median with the lowest and highest: how far one round's
    figure lands from another's on this machine."""
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
