"""``groundwatch rules``: the Prometheus rules file, generated from the Python definitions.

``examples/prometheus/groundwatch-alerts.yml`` is this command's output for ``--confidence 0.9
--window 7d`` (tests/alerts/test_prometheus_rates.py fails when it is stale). What it takes
from the code: each sum's counter and record name from :data:`groundwatch.rates.SUMS` (the one
place a :class:`~groundwatch.rates.RateTotals` field, its counter and its record meet), the
normal quantile of the interval from the confidence, the window, and the judges' shipped error
rates (``rates/_judge_error_rates.json``) for the drift rules. The PromQL of the estimate is
the formula of :func:`groundwatch.rates.estimate_rate` (PPI++ where it is tighter, else the
labels' Wilson interval); the tests evaluate both on the same sums with the real ``promtool``
and Prometheus.

Usage::

    groundwatch rules [--confidence 0.9] [--window 7d] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

from ..rates._sums import BY_FIELD

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_WINDOW", "add_parser", "render_rules", "run"]

DEFAULT_CONFIDENCE = 0.9
"""The rate interval's coverage in the shipped rules (as ``groundwatch check``'s)."""
DEFAULT_WINDOW = "7d"
"""The shipped rules' audit window: a week of labels, and the weekly cycle of traffic."""

_WINDOW = re.compile(r"^[1-9][0-9]*[mhdw]$")
_ERROR_RATES = Path(__file__).resolve().parents[1] / "rates" / "_judge_error_rates.json"
_TEMPLATE = Path(__file__).with_name("_rules_template.yml")
"""The rules with placeholders: ``@R:field@`` / ``@C:field@`` a sum's record / exposed counter
(from :data:`~groundwatch.rates.SUMS`), ``@WINDOW@``, ``@Z@`` and its powers, ``@PCT@``,
``@CONFIDENCE@``, ``@ONE_SIDED@``, ``@SHIPPED@`` (the judges' error rates)."""
_BOUNDS = ("sensitivity_low", "sensitivity_high", "specificity_low", "specificity_high")


def shipped_error_rates_block(error_rates: dict[str, Any], language: str = "en") -> str:
    """The recording rules holding each judge's shipped ranges in ``language`` (the counters
    carry no language; the shipped default is English)."""
    lines = []
    for judge, by_language in sorted(error_rates.get("judges", {}).items()):
        rates = by_language.get(language)
        if rates is None:
            continue
        for bound in _BOUNDS:
            lines += [
                f"      - record: groundwatch_judge:judge_{bound}:shipped",
                f"        expr: vector({float(rates[bound])!r})",
                "        labels:",
                f"          groundwatch_judge: {json.dumps(judge)}",
            ]
    return "".join(line + "\n" for line in lines)


def render_rules(
    confidence: float = DEFAULT_CONFIDENCE,
    window: str = DEFAULT_WINDOW,
    error_rates: dict[str, Any] | None = None,
) -> str:
    """The rules file for an interval of ``confidence`` over an audit ``window``.

    Args:
        confidence: the coverage of the rate's and the drift rules' intervals, in (0, 1).
        window: a Prometheus duration (``7d``, ``24h``, ``2w``): the audit window, which the
            record names carry.
        error_rates: the judges' error rates in the shipped JSON's shape (default: the
            shipped file).

    Raises:
        ValueError: ``confidence`` outside (0, 1) or ``window`` not a duration.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence!r}")
    if not _WINDOW.match(window):
        raise ValueError(f"window must be a Prometheus duration such as 7d or 24h, got {window!r}")
    if error_rates is None:
        error_rates = json.loads(_ERROR_RATES.read_text("utf-8"))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    values = {
        "@CONFIDENCE@": f"{confidence:g}",
        "@PCT@": f"{100 * confidence:g}",
        "@ONE_SIDED@": f"{100 * (1 + confidence) / 2:g}",
        "@WINDOW@": window,
        "@Z2_HALF@": repr(z * z / 2),
        "@Z2_QUARTER@": repr(z * z / 4),
        "@Z2@": repr(z * z),
        "@Z@": repr(z),
        "@SHIPPED@": shipped_error_rates_block(error_rates),
    }
    template = _TEMPLATE.read_text("utf-8")
    text = re.sub(r"@R:([a-z_]+)@", lambda m: BY_FIELD[m.group(1)].record, template)
    text = re.sub(r"@C:([a-z_]+)@", lambda m: BY_FIELD[m.group(1)].exposed, text)
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def add_parser(subparsers: Any) -> None:
    """Register ``rules`` on the ``groundwatch`` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "rules",
        help="write the Prometheus recording and alerting rules (the audited rate's estimate)",
        description=(
            "Print (or write) the Prometheus rules file: the judge's flag share, the audited "
            "hallucination rate's estimate and interval per route, the judge-drift rules and "
            "the alerts (docs/alerts.md). examples/prometheus/groundwatch-alerts.yml is the "
            "output for the defaults."
        ),
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=DEFAULT_CONFIDENCE,
        help="coverage of the rate's interval (%(default)s)",
    )
    p.add_argument(
        "--window",
        default=DEFAULT_WINDOW,
        help="the audit window, a Prometheus duration (%(default)s)",
    )
    p.add_argument("--output", type=Path, metavar="FILE", help="write here instead of stdout")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``groundwatch rules``; exit 2 on a bad option."""
    try:
        text = render_rules(args.confidence, args.window)
    except ValueError as exc:
        print(f"groundwatch rules: error: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, "utf-8")
    return 0
