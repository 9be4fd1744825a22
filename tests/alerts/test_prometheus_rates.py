"""The hallucination-rate recording rules against ``groundwatch.rates.estimate_rate``.

``examples/prometheus/groundwatch-alerts.yml`` computes, per route, the audited estimate of the
hallucination rate and its 90 % interval from the counters every replica exports. Here the real
``promtool test rules`` evaluates those rules on counter series (two replicas, one of them
restarting) whose sums are those of simulated audited streams, and each recorded value must be
the one ``estimate_rate`` gives for the same sums: PPI++ where it applies and is tighter, the
labels' Wilson interval elsewhere, nothing without a label.

The file is ``groundwatch rules``' output (:mod:`groundwatch.alerts.prometheus_rules`); a test
fails when the shipped file is stale (regenerate it with ``groundwatch rules --output
examples/prometheus/groundwatch-alerts.yml``), and the rules generated for another confidence and
window are checked against ``estimate_rate`` at that confidence too. The judge-drift rules embed
the judges' shipped sensitivity and specificity ranges from
``src/groundwatch/rates/_judge_error_rates.json``.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from groundwatch.alerts.prometheus_rules import render_rules, shipped_error_rates_block
from groundwatch.cli import main as cli_main
from groundwatch.rates import SUMS, RateTotals, estimate_rate

from .conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "prometheus" / "groundwatch-alerts.yml"
ERROR_RATES = ROOT / "src" / "groundwatch" / "rates" / "_judge_error_rates.json"

# Counter (as the Prometheus exporter names it) -> the RateTotals field it carries: the table.
COUNTERS = {s.exposed: s.field for s in SUMS}
ESTIMATE = "groundwatch_route:hallucination_rate_estimate:audit7d"
LOWER = "groundwatch_route:hallucination_rate_lower:audit7d"
UPPER = "groundwatch_route:hallucination_rate_upper:audit7d"
FLAG_SHARE = "groundwatch_route:hallucination_flag_share:ratio7d"
LABELS = "groundwatch_route:audit_labelled:increase7d"
HOURS = 168  # the rules' 7-day window, sampled hourly


def stream_totals(
    rng: random.Random, scored: int, rate: float, audit: float, signal: float
) -> RateTotals:
    """Sums of a stream of ``scored`` judged answers at a true ``rate``, an ``audit`` share of
    them labelled; the judge's probability moves towards the truth by ``signal`` (negative:
    away from it)."""
    totals = RateTotals()
    for _ in range(scored):
        hallucinated = rng.random() < rate
        f = min(1.0, max(0.0, 0.35 + signal * (0.4 if hallucinated else -0.1) + rng.gauss(0, 0.15)))
        flagged = f >= 0.4
        label = hallucinated if rng.random() < audit else None
        totals = totals.add(flagged, f, label)
    return totals


@dataclass
class Route:
    name: str
    totals: RateTotals
    method: str | None  # the method estimate_rate must pick (None: no estimate recorded)


def routes() -> list[Route]:
    rng = random.Random(39)
    return [
        # A judge that carries information and 100 labels of 2,000: PPI++ is the tighter.
        Route("ppi", stream_totals(rng, 2_000, 0.08, 0.05, 1.0), "ppi"),
        # The same at a high rate and a large audit.
        Route("ppi_high", stream_totals(rng, 1_500, 0.30, 0.25, 1.0), "ppi"),
        # Fewer than five hallucinated labels: the labels' own interval.
        Route("few", stream_totals(rng, 600, 0.02, 0.05, 1.0), "labels"),
        # A judge whose probability points the wrong way: lambda is clipped to 0, the labels.
        Route("inverted", stream_totals(rng, 1_000, 0.10, 0.1, -1.0), "labels"),
        # Every answer labelled (a census): the labels alone.
        Route("census", stream_totals(rng, 300, 0.10, 1.0, 1.0), "labels"),
        # No audit labels: no estimate (and so no alert on it).
        Route("unaudited", stream_totals(rng, 800, 0.10, 0.0, 1.0), None),
    ]


def _series_values(total: float, reset: bool) -> str:
    """promtool's expanding notation for a counter growing to ``total`` over the window,
    sampled hourly from hour 0 to 168; with ``reset``, the process restarts half way."""
    if not reset:
        return f"0+{total / HOURS!r}x{HOURS}"
    # 0..83 hours, then a restart at 0 and 84 more hours: increase() counts 83 + 84 steps.
    step = total / (HOURS - 1)
    return f"0+{step!r}x83 0+{step!r}x84"


def rule_test(
    rules: Path, cases: list[Route], confidence: float = 0.9, window: str = "7d"
) -> dict[str, Any]:
    """A promtool test whose expected values are ``estimate_rate``'s at ``confidence`` for
    each route's sums, read from the records of rules generated for ``window`` (the series
    span 168 hours, so a window of at least that sees all of them)."""
    names = [n.replace("7d", window) for n in (ESTIMATE, LOWER, UPPER, FLAG_SHARE, LABELS)]
    estimate_name, lower_name, upper_name, share_name, labels_name = names
    series: list[dict[str, str]] = []
    checks: list[dict[str, Any]] = []
    for route in cases:
        for metric, field in COUNTERS.items():
            total = float(getattr(route.totals, field))
            # Two replicas, a third and two thirds; the second one restarts.
            for instance, share, reset in (("a:9464", 1 / 3, False), ("b:9464", 2 / 3, True)):
                labels = (
                    f'groundwatch_route="{route.name}",groundwatch_judge="LocalJudge",'
                    f'instance="{instance}",job="app"'
                )
                series.append(
                    {
                        "series": f"{metric}{{{labels}}}",
                        "values": _series_values(total * share, reset),
                    }
                )
        selector = f'{{groundwatch_route="{route.name}",job="app"}}'
        if route.method is None:
            for name in (estimate_name, lower_name, upper_name):
                checks.append(
                    {"expr": name + selector, "eval_time": f"{HOURS}h", "exp_samples": []}
                )
            continue
        expected = estimate_rate(route.totals, confidence=confidence)
        assert expected.method == route.method, (route.name, expected)
        for name, value in (
            (estimate_name, expected.estimate),
            (lower_name, expected.lower),
            (upper_name, expected.upper),
            (share_name, expected.flag_share),
            (labels_name, float(expected.labelled)),
        ):
            checks.append(
                {
                    # promtool compares sample values exactly; the rules add and divide in
                    # another order than Python, so the check is on the difference.
                    "expr": f"abs({name}{selector} - {value!r}) < bool 1e-9",
                    "eval_time": f"{HOURS}h",
                    "exp_samples": [{"labels": selector, "value": 1}],
                }
            )
    groups = [group["name"] for group in yaml.safe_load(rules.read_text())["groups"]]
    return {
        "rule_files": [str(rules)],
        "evaluation_interval": "1h",
        # The file's order, so a group reads what an earlier one recorded at the same instant.
        "group_eval_order": groups,
        "tests": [{"interval": "1h", "input_series": series, "promql_expr_test": checks}],
    }


def promtool_test(test: dict[str, Any], path: Path) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` on ``test``, written to ``path`` (the rule files beside it)."""
    promtool = require_tool("promtool")
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run(
        [promtool, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=path.parent,
    )


def test_rules_compute_what_estimate_rate_computes(tmp_path: Path) -> None:
    out = promtool_test(rule_test(RULES, routes()), tmp_path / "rates.test.yml")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "SUCCESS" in out.stdout


def test_the_shipped_file_is_the_generated_one(tmp_path: Path, capsys: Any) -> None:
    """examples/prometheus/groundwatch-alerts.yml is `groundwatch rules`' output for the
    defaults: a change to the definitions without regenerating the file fails here."""
    assert cli_main(["rules"]) == 0
    printed = capsys.readouterr().out
    assert printed == RULES.read_text(), (
        "examples/prometheus/groundwatch-alerts.yml is stale; regenerate it with "
        "`groundwatch rules --output examples/prometheus/groundwatch-alerts.yml`"
    )
    written = tmp_path / "rules.yml"
    assert (
        cli_main(["rules", "--confidence", "0.9", "--window", "7d", "--output", str(written)]) == 0
    )
    assert written.read_text() == printed
    assert cli_main(["rules", "--window", "seven days"]) == 2
    assert cli_main(["rules", "--confidence", "1.5"]) == 2


def test_the_rules_follow_the_confidence_and_the_window(tmp_path: Path) -> None:
    """Generated for a 95 % interval over 8 days (192 h, which holds the 168 hourly samples),
    the rules record what estimate_rate gives at 95 %, under names that carry the window."""
    text = render_rules(0.95, "8d")
    assert "groundwatch_route:hallucination_rate_estimate:audit8d" in text
    assert "7d" not in text.replace("1.6448536269514715", "")
    rules = tmp_path / "rules95.yml"
    rules.write_text(text)
    out = promtool_test(rule_test(rules, routes(), 0.95, "8d"), tmp_path / "rates95.test.yml")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]


def test_rule_test_fails_on_a_wrong_expected_value(tmp_path: Path) -> None:
    """The comparison above can fail: one expected estimate off by 0.001 is caught."""
    test = rule_test(RULES, routes()[:1])
    checks = test["tests"][0]["promql_expr_test"]
    first = checks[0]["expr"]
    value = float(re.search(r" - ([0-9.e-]+)\) < bool", first).group(1))  # type: ignore[union-attr]
    checks[0]["expr"] = first.replace(repr(value), repr(value + 0.001))
    out = promtool_test(test, tmp_path / "wrong.test.yml")
    assert out.returncode != 0
    assert ESTIMATE in out.stdout + out.stderr


def test_the_estimate_is_not_the_flag_share() -> None:
    """What the rules are for: at a true 8 % with a judge flagging far more, the flag share is
    far off and the audited interval holds the true rate."""
    route = routes()[0]
    expected = estimate_rate(route.totals)
    assert expected.flag_share > 0.2
    assert expected.lower <= 0.08 <= expected.upper
    assert expected.upper - expected.lower < 0.1


# --------------------------------------------------------------------------------------------
# The judges' shipped error rates, embedded in the judge-drift rules

_BEGIN = "      # BEGIN shipped judge error rates\n"
_END = "      # END shipped judge error rates\n"
_BOUNDS = ("sensitivity_low", "sensitivity_high", "specificity_low", "specificity_high")
shipped_block = shipped_error_rates_block


def embedded_block(text: str) -> str:
    start = text.index(_BEGIN) + len(_BEGIN)
    return text[start : text.index(_END)]


def test_drift_rules_hold_the_shipped_error_rates() -> None:
    assert ERROR_RATES.exists(), f"{ERROR_RATES} is missing"
    shipped = json.loads(ERROR_RATES.read_text())
    expected = shipped_block(shipped)
    assert expected, "no judge has English error rates"
    assert embedded_block(RULES.read_text()) == expected, (
        "the judge-drift rules and _judge_error_rates.json disagree; regenerate with "
        "`groundwatch rules --output examples/prometheus/groundwatch-alerts.yml`"
    )
    # And the rules parse into one constant per judge and bound.
    doc = yaml.safe_load(RULES.read_text())
    constants = {
        (rule["record"], rule["labels"]["groundwatch_judge"]): rule["expr"]
        for group in doc["groups"]
        for rule in group["rules"]
        if str(rule.get("record", "")).endswith(":shipped")
    }
    for judge, by_language in shipped["judges"].items():
        if "en" in by_language:
            for bound in _BOUNDS:
                key = (f"groundwatch_judge:judge_{bound}:shipped", judge)
                assert constants[key] == f"vector({float(by_language['en'][bound])!r})"


def test_shipped_block_changes_with_the_json() -> None:
    """The consistency check can fail: a moved bound gives another block."""
    rates = {"sensitivity_low": 0.5, "sensitivity_high": 0.8}
    rates |= {"specificity_low": 0.4, "specificity_high": 0.7}
    doc: dict[str, Any] = {"judges": {"LocalJudge": {"en": dict(rates)}}}
    before = shipped_block(doc)
    doc["judges"]["LocalJudge"]["en"]["specificity_low"] = 0.41
    assert shipped_block(doc) != before
    assert "vector(0.41)" in shipped_block(doc)
