"""The Prometheus rules, the Grafana dashboard and the Collector config against real renderings.

Every metric and label name the rules and the dashboard use must exist in the text exposition
that ``opentelemetry-exporter-prometheus`` produces from what a real ``Monitor`` emits, and the
rules must pass the real ``promtool check rules`` / ``promtool test rules``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml
from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import NoOpTracerProvider, SpanContext, TraceFlags
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import groundwatch as gw
from groundwatch import Judgement, LocalJudge, Passage, Usage
from groundwatch.alerts import AlertingHook, DropDetector, OTelAlertEmitter

from .conftest import prometheus_reader, require_tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "prometheus" / "groundwatch-alerts.yml"
RULE_TESTS = ROOT / "examples" / "prometheus" / "groundwatch-alerts.test.yml"
RATE_RULE_TESTS = ROOT / "examples" / "prometheus" / "groundwatch-rates.test.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "groundwatch-dashboard.json"
COLLECTOR = ROOT / "examples" / "otel-collector.yaml"

# Labels Prometheus adds to every scraped series (not in the exporter's exposition).
TARGET_LABELS = {"job", "instance"}

# PromQL words that are not metric names.
_PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "rate", "increase", "irate", "histogram_quantile",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "topk", "bottomk", "label_values", "clamp_min", "clamp_max",
    "max_over_time", "min_over_time",
}  # fmt: skip


class _FailingCallback:
    """An on_result callback that raises, so that ``groundwatch.errors`` is exposed."""

    def __call__(self, record: object, evaluation: object) -> None:
        raise RuntimeError("a user callback failed")


class _SlowJudge:
    name = "SlowJudge"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        import time

        time.sleep(0.2)
        return LocalJudge().judge(answer, contexts, question)  # type: ignore[return-value]


class _TokenJudge:
    """The local judge, plus token usage as an LLM judge reports it (so token metrics appear)."""

    name = "TokenJudge"

    def __init__(self) -> None:
        self._inner = LocalJudge()

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        result = self._inner.judge(answer, contexts, question)
        assert isinstance(result, Judgement)
        return result.model_copy(update={"usage": Usage(input_tokens=120, output_tokens=30)})


@pytest.fixture(scope="module")
def exposition() -> Iterator[dict[str, set[str]]]:
    """Sample name -> label names, in the real Prometheus exporter's text exposition of what a
    real Monitor emits (with the drop detector's counter from the real emitter)."""
    registry = CollectorRegistry()
    reader = prometheus_reader(registry)
    provider = MeterProvider(metric_readers=[reader])
    hook = AlertingHook(
        DropDetector(warmup=5, floors=None, target_arl=50, mean_target_arl=50),
        on_alert=[OTelAlertEmitter(meter_provider=provider, logger_provider=NoOpLoggerProvider())],
    )
    monitor = gw.Monitor(
        judge=_TokenJudge(),
        sampler=gw.RatioSampler(1.0),
        audit_rate=1.0,  # every judged answer in the audit: groundwatch.audit.* on feedback
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        on_result=hook,
        shutdown_on_exit=False,
    )
    context = "The Model X battery lasts 12 hours. Charging takes 90 minutes."
    answers = ["The battery lasts 12 hours."] * 10 + [
        "The warranty covers it for ten years and it ships from Berlin."
    ] * 10
    for answer in answers:
        monitor.record(question="Battery?", contexts=[context], answer=answer, route="faq")
    monitor.record(question="Battery?", contexts=[], answer="I don't know.", route="faq")
    assert monitor.force_flush(timeout_millis=20_000)
    assert any(a.kind == "fired" for a in hook.alerts)
    # Feedback on two answers of a trace (the judge's verdict remembered, so the series carry
    # the route) and on one the monitor never scored: groundwatch.feedback.
    for trace_id, answer in ((0xA1, answers[0]), (0xA2, answers[-1])):
        ctx = SpanContext(trace_id, 0xB1, is_remote=True, trace_flags=TraceFlags(1))
        monitor.record(
            question="Battery?", contexts=[context], answer=answer, route="faq", span_context=ctx
        )
    assert monitor.force_flush(timeout_millis=20_000)
    monitor.feedback(label="hallucinated", trace_id=0xA1)
    monitor.feedback(label="hallucinated", trace_id=0xA2)
    monitor.feedback(label="grounded", trace_id=0xA3)
    # Audit labels of the two audited traces: groundwatch.audit.*, the estimate's sums.
    monitor.feedback(label="hallucinated", trace_id=0xA1, source="audit")
    monitor.feedback(label="grounded", trace_id=0xA2, source="audit")
    # A second monitor on the same provider exposes the failure counters: a callback that
    # raises (groundwatch.errors) and records left queued at a short shutdown deadline
    # (groundwatch.evaluations.dropped).
    failing = gw.Monitor(
        judge=_SlowJudge(),
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        on_result=_FailingCallback(),
        executor="thread",
        shutdown_on_exit=False,
    )
    for _ in range(5):
        failing.record(question="Battery?", contexts=[context], answer=answers[0], route="faq")
    failing.shutdown(timeout_millis=300)
    text = generate_latest(registry).decode()
    samples: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    yield samples
    monitor.shutdown(timeout_millis=5_000)
    provider.shutdown()


def test_exposition_names(exposition: dict[str, set[str]]) -> None:
    # The renderings the rules rely on: `_total` on counters, `_seconds` for `s`, nothing for
    # `1` and `{annotation}` units, `_bucket/_sum/_count` on histograms.
    expected = {
        "groundwatch_evaluation_score_bucket",
        "groundwatch_evaluation_score_sum",
        "groundwatch_evaluation_score_count",
        "groundwatch_evaluations_total",
        "groundwatch_claims_total",
        "groundwatch_records_total",
        "groundwatch_judge_duration_seconds_bucket",
        "groundwatch_judge_duration_seconds_sum",
        "groundwatch_judge_duration_seconds_count",
        "groundwatch_judge_tokens_total",
        "groundwatch_queue_size",
        "groundwatch_alerts_total",
        "groundwatch_evaluations_dropped_total",
        "groundwatch_errors_total",
        "groundwatch_feedback_total",
        # The sums behind the audited hallucination-rate estimate (docs/rates.md).
        "groundwatch_rate_scored_total",
        "groundwatch_rate_flagged_total",
        "groundwatch_rate_probability_total",
        "groundwatch_rate_probability_squares_total",
        "groundwatch_audit_labelled_total",
        "groundwatch_audit_label_sum_total",
        "groundwatch_audit_flagged_total",
        "groundwatch_audit_label_flag_total",
        "groundwatch_audit_probability_total",
        "groundwatch_audit_probability_squares_total",
        "groundwatch_audit_label_probability_total",
    }
    assert expected <= set(exposition), expected - set(exposition)
    for name in expected:
        if name.startswith(("groundwatch_rate_", "groundwatch_audit_")):
            assert {"groundwatch_route", "groundwatch_judge"} <= exposition[name], name
    assert {
        "groundwatch_label",
        "groundwatch_feedback_label",
        "groundwatch_route",
    } <= exposition["groundwatch_feedback_total"]
    assert {"groundwatch_label", "groundwatch_route"} <= exposition["groundwatch_evaluations_total"]
    assert "le" in exposition["groundwatch_evaluation_score_bucket"]


def promql_names(expr: str) -> tuple[set[str], dict[str, set[str]], set[str]]:
    """(metric names, selector labels per metric, grouping labels) used by a PromQL expression."""
    selectors: dict[str, set[str]] = {}
    for name, body in re.findall(r"([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}", expr):
        labels = set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", body))
        selectors.setdefault(name, set()).update(labels)
    grouping: set[str] = set()
    for body in re.findall(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr
    ):
        grouping.update(x.strip() for x in body.split(",") if x.strip())
    stripped = re.sub(r'"[^"]*"', "", expr)
    stripped = re.sub(r"\{[^}]*\}", " ", stripped)
    stripped = re.sub(r"\[[^\]]*\]", " ", stripped)
    stripped = re.sub(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", stripped
    )
    stripped = re.sub(r"\$\w+", " ", stripped)
    names = {
        tok
        for tok, call in re.findall(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", stripped)
        if not call and tok not in _PROMQL_WORDS and not re.fullmatch(r"e\d*|inf|nan", tok, re.I)
    }
    return names, selectors, grouping


def _rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def recorded_labels() -> dict[str, set[str]]:
    """Record name -> the labels its series carry: the expression's grouping labels, the
    rule's own ``labels:``, and those of the recorded series it is computed from."""
    recorded: dict[str, set[str]] = {}
    for rule in _rules():
        if "record" not in rule:
            continue
        names, _, grouping = promql_names(str(rule["expr"]))
        inherited = set().union(*(recorded[n] for n in names if n in recorded))
        rule_labels = set(dict(rule.get("labels") or {}))  # type: ignore[call-overload]
        name = str(rule["record"])
        recorded[name] = recorded.get(name, set()) | grouping | rule_labels | inherited
    return recorded


def check_expr(
    expr: str, exposition: dict[str, set[str]], recorded: dict[str, set[str]], where: str
) -> set[str]:
    names, selectors, grouping = promql_names(expr)
    assert names, f"{where}: no metric in {expr!r}"
    known = {
        **{name: labels | TARGET_LABELS for name, labels in exposition.items()},
        **recorded,
        "ALERTS": {"alertname", "alertstate", "groundwatch_route"},
    }
    all_labels = set().union(*known.values())
    for name in names | set(selectors):
        assert name in known, f"{where}: {name} is not in the exposition"
    for name, labels in selectors.items():
        missing = labels - known[name]
        assert not missing, f"{where}: {name} has no label {missing}"
    assert grouping <= all_labels, f"{where}: unknown grouping labels {grouping - all_labels}"
    return names


def test_rules_use_real_names(exposition: dict[str, set[str]]) -> None:
    recorded: dict[str, set[str]] = {}
    used: set[str] = set()
    for rule in _rules():
        expr = str(rule["expr"])
        name = str(rule.get("record") or rule.get("alert"))
        rule_labels = set(dict(rule.get("labels") or {}))  # type: ignore[call-overload]
        if re.fullmatch(r"vector\([0-9.e-]+\)\s*", expr):
            # A constant (the judges' shipped error rates), told apart by its rule's labels.
            assert "record" in rule and rule_labels <= set().union(*exposition.values()), name
            recorded[name] = recorded.get(name, set()) | rule_labels
            continue
        used |= check_expr(expr, exposition, recorded, name)
        if "record" in rule:
            _, _, grouping = promql_names(expr)
            recorded[str(rule["record"])] = grouping | rule_labels
        # Labels the expression itself adds (label_replace) exist in what it returns.
        # label_replace(v, "dst", "replacement", "src", "regex"): the destination label.
        added = set(re.findall(r'"(\w+)",\s*"[^"]*",\s*"[^"]*",\s*"[^"]*"\s*\)', expr))
        for text in dict(rule.get("annotations") or {}).values():  # type: ignore[call-overload]
            for label in re.findall(r"\$labels\.(\w+)", str(text)):
                assert label in set().union(*exposition.values()) | added, f"{name}: {label}"
        if "alert" in rule:
            assert rule.get("for") or "groundwatch_alerts_total" in expr, f"{name}: no for:"
    assert {
        "groundwatch_evaluations_total",
        "groundwatch_evaluation_score_sum",
        "groundwatch_evaluation_score_count",
        "groundwatch_alerts_total",
        "groundwatch_feedback_total",
        "groundwatch_rate_scored_total",
        "groundwatch_audit_labelled_total",
        "groundwatch_audit_label_flag_total",
    } <= used


def test_dashboard_uses_real_names(exposition: dict[str, set[str]]) -> None:
    recorded = recorded_labels()
    dash = json.loads(DASHBOARD.read_text())
    used: set[str] = set()
    titles = []
    for panel in dash["panels"]:
        titles.append(panel["title"])
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used |= check_expr(target["expr"], exposition, recorded, panel["title"])
            for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
                assert label in set().union(*exposition.values(), {"alertname"}), label
    variables = {var["name"]: var for var in dash["templating"]["list"]}
    for var in variables.values():
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((\w+)(?:\{[^}]*\})?,\s*(\w+)\)", var["definition"])
            assert m and m.group(2) in exposition[m.group(1)] | TARGET_LABELS
    # One dashboard for many services: every groundwatch series is scoped by the job variable.
    assert {"job", "route"} <= set(variables)
    for panel in dash["panels"]:
        for target in panel["targets"]:
            for name, body in re.findall(r"(groundwatch_\w+)\{([^}]*)\}", target["expr"]):
                assert 'job=~"$job"' in body, (panel["title"], name)
            names, selectors, _ = promql_names(target["expr"])
            bare = (names - set(selectors)) & set(exposition)
            assert not bare, (panel["title"], "no job selector", bare)
    # Each distribution panel plots the score it is named after, and only that one.
    for panel in dash["panels"]:
        for score in ("groundedness", "faithfulness"):
            if panel["title"].lower().startswith(f"{score} distribution"):
                for target in panel["targets"]:
                    assert f'gen_ai_evaluation_name="{score}"' in target["expr"], panel["title"]
    # Everything the issue asks the dashboard to show is there.
    for metric in (
        "groundwatch_evaluation_score_sum",  # scores over time
        "groundwatch_evaluations_total",  # hallucination rate by route
        "groundwatch_claims_total",  # verdict mix
        "groundwatch_records_total",  # sampling decisions
        "groundwatch_judge_duration_seconds_bucket",  # judge latency
        "groundwatch_judge_tokens_total",  # tokens
        "groundwatch_queue_size",  # queue size
        "groundwatch_alerts_total",  # alerts
        "groundwatch_evaluations_dropped_total",  # dropped evaluations
        "groundwatch_errors_total",  # internal errors
        "groundwatch_feedback_total",  # judge-human agreement
    ):
        assert metric in used, metric
    assert len(set(p["id"] for p in dash["panels"])) == len(titles)


def test_dashboard_shows_the_audited_estimate_beside_the_flag_share() -> None:
    """The estimate's band (lower / upper), the judge's flag share and the number of audit
    labels behind them are on the dashboard, each from a series the rules record."""
    recorded = recorded_labels()
    dash = json.loads(DASHBOARD.read_text())
    queries = {
        panel["id"]: [target["expr"] for target in panel["targets"]] for panel in dash["panels"]
    }

    def panels_with(record: str) -> set[int]:
        return {pid for pid, exprs in queries.items() if any(record in e for e in exprs)}

    estimate = "groundwatch_route:hallucination_rate_estimate:audit7d"
    band = panels_with(estimate)
    assert band, "no panel shows the audited estimate"
    for record in (
        "groundwatch_route:hallucination_rate_lower:audit7d",
        "groundwatch_route:hallucination_rate_upper:audit7d",
        "groundwatch_route:hallucination_flag_share:ratio7d",
    ):
        assert band <= panels_with(record), f"{record} is not beside the estimate"
    assert panels_with("groundwatch_route:audit_labelled:increase7d"), "no audit-label count"
    assert panels_with("groundwatch_route_judge:judge_specificity:audit7d"), "no judge panel"
    # Every recorded series a panel names is one the rules record, with the labels it selects.
    used = set()
    for exprs in queries.values():
        for expr in exprs:
            names, selectors, _ = promql_names(expr)
            for name in names | set(selectors):
                if ":" in name:
                    used.add(name)
                    assert name in recorded, f"{name} is not recorded by the rules"
                    missing = selectors.get(name, set()) - recorded[name]
                    assert not missing, f"{name} has no label {missing}"
    assert estimate in used
    # The band is drawn: the upper line fills down to the lower one, per route.
    (panel,) = [p for p in dash["panels"] if p["id"] in band]
    assert panel.get("repeat") == "route"
    fills = {
        o["matcher"]["options"]: prop["value"]
        for o in panel["fieldConfig"]["overrides"]
        for prop in o["properties"]
        if prop["id"] == "custom.fillBelowTo"
    }
    legends = {t["refId"]: t["legendFormat"] for t in panel["targets"]}
    assert set(fills.items()) <= {(a, b) for a in legends.values() for b in legends.values()}
    assert any("upper" in a and "lower" in b for a, b in fills.items())


def test_promql_name_extraction() -> None:
    names, selectors, grouping = promql_names(
        'sum by (le, groundwatch_route) (rate(foo_bucket{a="x",b=~"y|z"}[$__rate_interval]))'
        " / on (groundwatch_route) bar:baz:rate5m > 2 * max(qux) and 1e3 > 0"
    )
    assert names == {"foo_bucket", "bar:baz:rate5m", "qux"}
    assert selectors == {"foo_bucket": {"a", "b"}}
    assert grouping == {"le", "groundwatch_route"}


def _promtool() -> str:
    return require_tool("promtool")


def test_promtool_check_rules() -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in out.stdout


@pytest.mark.parametrize("tests", [RULE_TESTS, RATE_RULE_TESTS], ids=lambda p: p.stem)
def test_promtool_rule_unit_tests(tests: Path) -> None:
    out = subprocess.run(
        [_promtool(), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tests.parent,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_collector_config_is_consistent() -> None:
    cfg = yaml.safe_load(COLLECTOR.read_text())
    pipelines = cfg["service"]["pipelines"]
    assert {"traces", "metrics", "logs"} <= set(pipelines)
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in cfg[kind], f"{name}: {kind} {component} is not defined"
    assert "otlp" in pipelines["traces"]["receivers"]
    assert "prometheus" in pipelines["metrics"]["exporters"]
    assert any(e.split("/")[0] in {"otlp", "otlphttp"} for e in pipelines["traces"]["exporters"])
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert {"grpc", "http"} <= set(protocols)


def test_direct_exporter_example_runs() -> None:
    import socket
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "prometheus_direct.py"),
            "--port",
            str(port),
            "--answers",
            "200",
            "--serve-seconds",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "flag_share on route 'support' rose from" in out.stdout
    assert f"http://127.0.0.1:{port}/metrics" in out.stdout
