"""The rate's sums declared once: each RateTotals field, its counter and its record."""

from __future__ import annotations

import dataclasses
import random

import pytest

from groundwatch.rates import SUMS, RateTotals
from groundwatch.telemetry import semconv as sc
from groundwatch.telemetry._rate_counters import AuditSums, count_scored, rate_key


def test_the_table_is_the_totals_fields_in_order_with_one_name_each() -> None:
    assert [s.field for s in SUMS] == [f.name for f in dataclasses.fields(RateTotals)]
    for attribute in ("field", "counter", "record"):
        names = [getattr(s, attribute) for s in SUMS]
        assert len(set(names)) == len(names), attribute
    # semconv's names are the table's (one declaration).
    declared = {v for k, v in vars(sc).items() if k.startswith(("METRIC_RATE_", "METRIC_AUDIT_"))}
    assert declared == {s.counter for s in SUMS}
    # A family's counters share its prefix, its records theirs.
    for s in SUMS:
        assert s.counter.startswith(f"groundwatch.{s.family}.")
        assert s.record.startswith(f"{s.family}_")


def test_the_counters_add_what_rate_totals_adds() -> None:
    """The counters' per-answer sums (one batch, the audit sums as labels come back) are the
    RateTotals of the same answers, field by field through the table."""
    rng = random.Random(5)
    totals = RateTotals()
    batch: dict[tuple[tuple[str, str], ...], list[float]] = {}
    audit = AuditSums()
    key = rate_key("r", "local")
    for _ in range(300):
        flagged = rng.random() < 0.4
        probability = None if rng.random() < 0.2 else round(rng.random(), 3)
        label = (rng.random() < 0.3) if rng.random() < 0.3 else None
        totals = totals.add(flagged, probability, label)
        count_scored(batch, key, flagged, probability)
        if label is not None:
            audit.add(key, label, flagged, probability)
    counted = dict(zip([s.field for s in SUMS if s.family == "rate"], batch[key], strict=True))
    counted.update(
        zip([s.field for s in SUMS if s.family == "audit"], audit.snapshot()[key], strict=True)
    )
    for s in SUMS:
        assert counted[s.field] == pytest.approx(getattr(totals, s.field)), s.field


@pytest.mark.parametrize("stray", [1.5, -0.1, float("nan")])
def test_a_stray_probability_is_refused_by_totals_and_counted_as_the_flag_by_counters(
    stray: float,
) -> None:
    with pytest.raises(ValueError, match="probability"):
        RateTotals().add(True, stray)
    batch: dict[tuple[tuple[str, str], ...], list[float]] = {}
    key = rate_key(None, "j")
    count_scored(batch, key, True, stray)
    assert batch[key] == [1.0, 1.0, 1.0, 1.0]
    audit = AuditSums()
    audit.add(key, False, True, stray)
    assert audit.snapshot()[key] == (1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0)
