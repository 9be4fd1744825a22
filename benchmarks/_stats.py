"""Order statistics and counter totals the benchmarks share."""

from __future__ import annotations

import statistics

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


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


def counter_totals(reader: InMemoryMetricReader, name: str, key: str) -> dict[str, int]:
    """A counter's totals by one attribute, read from a monitor's own metric reader (how the
    benchmarks count what was scored without an ``on_result`` callback, which would make every
    evaluation a full pydantic object on the host)."""
    totals: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:  # type: ignore[union-attr]
                    label = str(point.attributes.get(key)) if point.attributes else "?"
                    totals[label] = totals.get(label, 0) + int(point.value)  # type: ignore[union-attr]
    return totals
