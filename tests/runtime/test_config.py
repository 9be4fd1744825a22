"""Environment configuration: values taken, bad values warned about and replaced."""

from __future__ import annotations

import logging

import pytest

from groundwatch import RateLimitSampler, RatioSampler, _config
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GROUNDWATCH_SAMPLE_RATE",
        "GROUNDWATCH_RATE_LIMIT_PER_MINUTE",
        "GROUNDWATCH_MAX_QUEUE_SIZE",
        "GROUNDWATCH_MAX_CONCURRENCY",
        "GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS",
        "GROUNDWATCH_CAPTURE_CONTENT",
        "GROUNDWATCH_CONTENT_MAX_CHARS",
        "GROUNDWATCH_EXECUTOR",
        "GROUNDWATCH_DISABLED",
        "GROUNDWATCH_EXPORT_FROM_WORKER",
        "OTEL_SDK_DISABLED",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    ):
        monkeypatch.delenv(name, raising=False)
    assert _config.from_env() == _config.RuntimeConfig(
        sample_rate=1.0,
        rate_limit_per_minute=None,
        max_queue_size=1024,
        max_concurrency=8,
        evaluation_timeout_millis=60_000,
        capture_content=False,
        content_max_chars=2048,
        executor="auto",
        disabled=False,
        export_from_worker=False,
    )


def test_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "120")
    monkeypatch.setenv("GROUNDWATCH_MAX_QUEUE_SIZE", "7")
    monkeypatch.setenv("GROUNDWATCH_CAPTURE_CONTENT", "TRUE")
    monkeypatch.setenv("GROUNDWATCH_EXECUTOR", "Process")
    monkeypatch.setenv("GROUNDWATCH_EXPORT_FROM_WORKER", "yes")
    config = _config.from_env()
    assert config.export_from_worker is True
    assert (config.sample_rate, config.rate_limit_per_minute, config.max_queue_size) == (
        0.25,
        120.0,
        7,
    )
    assert config.capture_content is True and config.executor == "process"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GROUNDWATCH_SAMPLE_RATE", "1.5"),
        ("GROUNDWATCH_SAMPLE_RATE", "half"),
        ("GROUNDWATCH_MAX_QUEUE_SIZE", "-3"),
        ("GROUNDWATCH_CAPTURE_CONTENT", "maybe"),
        ("GROUNDWATCH_EXECUTOR", "gpu"),
        ("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "0"),
    ],
)
def test_bad_values_warn_and_fall_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="groundwatch._config"):
        config = _config.from_env()
    monkeypatch.delenv(name)
    assert config == _config.from_env()
    assert [r.getMessage() for r in caplog.records] == [
        f"ignoring {name}={value!r}: invalid value; using "
        + repr(getattr(_config, "DEFAULT_" + name.removeprefix("GROUNDWATCH_")))
    ]


def test_monitor_reads_the_environment(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "0.5")
    monkeypatch.setenv("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "60")
    monkeypatch.setenv("GROUNDWATCH_MAX_QUEUE_SIZE", "2")
    monkeypatch.setenv("GROUNDWATCH_CAPTURE_CONTENT", "1")
    monitor = capgw.monitor(judge=EchoJudge(delay_s=0.05))
    assert isinstance(monitor.sampler, RateLimitSampler)
    assert isinstance(monitor.sampler.inner, RatioSampler) and monitor.sampler.inner.rate == 0.5
    assert monitor._worker is not None and monitor._worker.max_queue_size == 2
    for _ in range(10):
        monitor.record(question="q", contexts=["x"], answer="y", always_score=True)
    decided = {a[sc.GROUNDWATCH_DECISION]: v for a, v in capgw.metric_points(sc.METRIC_RECORDS)}
    assert decided["queue_full"] >= 6
    assert all(sc.GROUNDWATCH_CONTENT_ANSWER in (s.attributes or {}) for s in capgw.spans())
    # An argument beats the environment.
    assert capgw.monitor(judge=EchoJudge(), max_queue_size=9)._worker.max_queue_size == 9  # type: ignore[union-attr]


def test_disabled_counts_not_sampled(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_DISABLED", "1")
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=["x"], answer="y", always_score=True)
    assert capgw.metric_points(sc.METRIC_RECORDS) == [({sc.GROUNDWATCH_DECISION: "not_sampled"}, 1)]
    assert capgw.spans() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_queue_size": 0},
        {"max_concurrency": -1},
        {"evaluation_timeout_millis": 0},
        {"executor": "gpu"},
    ],
)
def test_bad_monitor_arguments_raise_at_construction(
    capgw: GroundwatchTelemetry, kwargs: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        capgw.monitor(judge=EchoJudge(), **kwargs)


@pytest.mark.parametrize(
    ("genai", "ours", "captured"),
    [
        ("true", None, True),
        ("SPAN_AND_EVENT", None, True),
        ("span_only", None, True),
        ("event_only", None, False),
        ("no_content", None, False),
        ("true", "false", False),  # ours wins when set
        ("false", "1", True),
        (None, None, False),
    ],
)
def test_genai_content_capture_switch(
    monkeypatch: pytest.MonkeyPatch, genai: str | None, ours: str | None, captured: bool
) -> None:
    for name, value in (
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", genai),
        ("GROUNDWATCH_CAPTURE_CONTENT", ours),
    ):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert _config.from_env().capture_content is captured


def test_genai_content_switch_puts_content_on_the_span(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GROUNDWATCH_CAPTURE_CONTENT", raising=False)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    capgw.monitor(judge=EchoJudge()).record(question="q", contexts=["x"], answer="y")
    (span,) = capgw.spans()
    assert (span.attributes or {})[sc.GROUNDWATCH_CONTENT_ANSWER] == "y"


def test_otel_sdk_disabled_scores_nothing(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GROUNDWATCH_DISABLED", raising=False)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert _config.from_env().disabled
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=["x"], answer="y", always_score=True)
    assert capgw.metric_points(sc.METRIC_RECORDS) == [({sc.GROUNDWATCH_DECISION: "not_sampled"}, 1)]
    assert capgw.results() == []


def test_input_caps_are_read_here_and_warn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GROUNDWATCH_MAX_ANSWER_CHARS", "500")
    monkeypatch.setenv("GROUNDWATCH_MAX_PASSAGES", "many")
    with caplog.at_level(logging.WARNING, logger="groundwatch._config"):
        assert _config.input_caps() == (500, 50_000, 64)
    assert [r.getMessage() for r in caplog.records] == [
        "ignoring GROUNDWATCH_MAX_PASSAGES='many': invalid value; using 64"
    ]


def test_every_variable_is_read_in_config_and_listed_in_the_docs() -> None:
    """No GROUNDWATCH_* or OTEL_* name is read outside _config.py (the LLM judge's two defaults
    excepted while it reads them itself), and docs/configuration.md lists every one."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    config_text = (root / "src" / "groundwatch" / "_config.py").read_text()
    names = set(re.findall(r'"((?:GROUNDWATCH|OTEL)_[A-Z_]+)"', config_text))
    assert {"OTEL_SDK_DISABLED", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} <= names
    for path in [*(root / "src").rglob("*.py"), *(root / "integrations").rglob("*.py")]:
        if path.name == "_config.py":
            continue
        for read in re.findall(r'environ(?:\.get)?[\[(]\s*"([A-Z_]+)"', path.read_text()):
            assert not read.startswith("GROUNDWATCH_"), f"{path} reads {read}"
    table = (root / "docs" / "configuration.md").read_text()
    missing = {n for n in names if f"`{n}`" not in table}
    assert not missing, missing


def test_the_otlp_exporters_groundwatch_builds_follow_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from groundwatch.telemetry.worker_export import otlp_exporter

    for name in ("PROTOCOL", "TRACES_PROTOCOL", "LOGS_PROTOCOL", "METRICS_PROTOCOL"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
    monkeypatch.delenv("OTEL_METRICS_EXPORTER", raising=False)
    assert _config.otlp_protocol("TRACES") == "http/protobuf"
    assert _config.otel_signal_enabled("METRICS")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/protobuf")  # per signal wins
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", " None ")
    assert type(otlp_exporter("METRICS")).__module__.startswith(
        "opentelemetry.exporter.otlp.proto.grpc"
    )
    assert type(otlp_exporter("LOGS")).__module__.startswith(
        "opentelemetry.exporter.otlp.proto.http"
    )
    assert not _config.otel_signal_enabled("METRICS")
