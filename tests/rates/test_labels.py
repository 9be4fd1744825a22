"""Which labels count and how a method is worded: once, in groundwatch.rates."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from groundwatch.rates import METHOD_WORDS, RateMethod, RateTotals, rate_labels
from groundwatch.rates._labels import LABEL_PRECISION

ROOT = Path(__file__).resolve().parents[2]


def test_every_method_is_worded() -> None:
    """A new method without words fails here, not as a KeyError in the demo or check."""
    assert set(METHOD_WORDS) == set(typing.get_args(RateMethod))


def test_the_precision_said_without_an_audit_is_the_docs_table() -> None:
    """The label counts and half-widths the no-audit line quotes are docs/rates.md's."""
    text = (ROOT / "docs" / "rates.md").read_text("utf-8")
    rows = {
        int(m.group(1)): (round(float(m.group(2)) / 100, 4), round(float(m.group(3)) / 100, 4))
        for m in re.finditer(
            r"^\| (\d+) \| ±[\d.]+ \| ±([\d.]+) \| (?:±[\d.]+ \| ){3}±([\d.]+) \|$", text, re.M
        )
    }
    for n, at_5, at_50 in LABEL_PRECISION:
        assert rows[n] == (at_5, at_50), n


def test_which_labels_count() -> None:
    everything = RateTotals().add(True, 0.9, True).add(False, 0.1, None).add(True, 0.8, False)
    audit = RateTotals().add(True, 0.9, True).add(False, 0.1, None).add(True, 0.8, None)
    assert rate_labels(RateTotals().add(True), RateTotals().add(True))[0] == "none"
    census = RateTotals().add(True, 0.9, True)
    assert rate_labels(census, census)[0] == "census"
    assert rate_labels(everything, audit) == ("audit", audit)
    assert rate_labels(everything, audit, labels_are_random=True) == ("declared", everything)
    basis, kept = rate_labels(everything, RateTotals().add(True).add(False).add(True))
    assert (basis, kept.labelled, kept.scored) == ("not_random", 0, 3)
