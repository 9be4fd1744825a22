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
    )


def test_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "120")
    monkeypatch.setenv("GROUNDWATCH_MAX_QUEUE_SIZE", "7")
    monkeypatch.setenv("GROUNDWATCH_CAPTURE_CONTENT", "TRUE")
    monkeypatch.setenv("GROUNDWATCH_EXECUTOR", "Process")
    config = _config.from_env()
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
