"""Environment configuration: values taken, bad values warned about and replaced."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from groundwatch import RateLimitSampler, RatioSampler
from groundwatch._shared import config as _config
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
        "GROUNDWATCH_AUDIT_RATE",
        "OTEL_SDK_DISABLED",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    ):
        monkeypatch.delenv(name, raising=False)
    assert _config.from_env() == _config.RuntimeConfig(
        sample_rate=1.0,
        rate_limit_per_minute=None,
        audit_rate=0.0,
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
    monkeypatch.setenv("GROUNDWATCH_AUDIT_RATE", "2%")
    config = _config.from_env()
    assert config.export_from_worker is True
    assert config.audit_rate == 0.02
    assert (config.sample_rate, config.rate_limit_per_minute, config.max_queue_size) == (
        0.25,
        120.0,
        7,
    )
    assert config.capture_content is True and config.executor == "process"


def _serve_default(dest: str) -> Callable[[], Any]:
    def read() -> Any:
        from groundwatch.cli import build_parser

        return getattr(build_parser().parse_args(["serve"]), dest)

    return read


def _judge_default(attribute: str) -> Callable[[], Any]:
    def read() -> Any:
        pytest.importorskip("openai")
        from groundwatch import OpenAIJudge

        judge = OpenAIJudge(model="m", base_url="http://127.0.0.1:9/v1")
        try:
            return getattr(judge, attribute)
        finally:
            close = getattr(judge, "close", None)
            if close is not None:
                close()

    return read


def _runtime(field: str) -> Callable[[], Any]:
    return lambda: getattr(_config.from_env(), field)


def _cap(index: int) -> Callable[[], Any]:
    return lambda: _config.input_caps()[index]


# Every variable docs/configuration.md lists, with a value that cannot be read, how groundwatch
# reads it, and what it falls back to.
BAD_VALUES: list[tuple[str, str, Callable[[], Any], Any]] = [
    ("GROUNDWATCH_SAMPLE_RATE", "1.5", _runtime("sample_rate"), 1.0),
    ("GROUNDWATCH_SAMPLE_RATE", "half", _runtime("sample_rate"), 1.0),
    ("GROUNDWATCH_SAMPLE_RATE", "150%", _runtime("sample_rate"), 1.0),
    ("GROUNDWATCH_SAMPLE_RATE", "nan", _runtime("sample_rate"), 1.0),
    ("GROUNDWATCH_AUDIT_RATE", "2", _runtime("audit_rate"), 0.0),
    ("GROUNDWATCH_AUDIT_RATE", "some", _runtime("audit_rate"), 0.0),
    ("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "0", _runtime("rate_limit_per_minute"), None),
    ("GROUNDWATCH_RATE_LIMIT_PER_MINUTE", "inf", _runtime("rate_limit_per_minute"), None),
    ("GROUNDWATCH_MAX_QUEUE_SIZE", "-3", _runtime("max_queue_size"), 1024),
    ("GROUNDWATCH_MAX_QUEUE_SIZE", "1.5", _runtime("max_queue_size"), 1024),
    ("GROUNDWATCH_MAX_CONCURRENCY", "lots", _runtime("max_concurrency"), 8),
    ("GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS", "60s", _runtime("evaluation_timeout_millis"), 60_000),
    ("GROUNDWATCH_CAPTURE_CONTENT", "maybe", _runtime("capture_content"), False),
    (
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "sometimes",
        _runtime("capture_content"),
        False,
    ),
    ("GROUNDWATCH_CONTENT_MAX_CHARS", "0", _runtime("content_max_chars"), 2048),
    ("GROUNDWATCH_EXECUTOR", "gpu", _runtime("executor"), "auto"),
    ("GROUNDWATCH_EXPORT_FROM_WORKER", "otlp", _runtime("export_from_worker"), False),
    ("GROUNDWATCH_DISABLED", "disabled", _runtime("disabled"), False),
    ("OTEL_SDK_DISABLED", "yes please", _runtime("disabled"), False),
    ("GROUNDWATCH_MAX_ANSWER_CHARS", "20k", _cap(0), 20_000),
    ("GROUNDWATCH_MAX_PASSAGE_CHARS", "-1", _cap(1), 50_000),
    ("GROUNDWATCH_MAX_PASSAGES", "many", _cap(2), 64),
    ("GROUNDWATCH_JUDGE_CONCURRENCY", "0", _judge_default("concurrency"), 16),
    ("GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS", "3k", _judge_default("max_context_tokens"), 3000),
    (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "carrier-pigeon",
        lambda: _config.otlp_protocol("TRACES"),
        "http/protobuf",
    ),
    (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "http/json",
        lambda: _config.otlp_protocol("LOGS"),
        "http/protobuf",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "udp",
        lambda: _config.otlp_protocol("TRACES"),
        "http/protobuf",
    ),
    ("OTEL_TRACES_EXPORTER", "nonsense", lambda: _config.otel_signal_enabled("TRACES"), True),
    ("OTEL_METRICS_EXPORTER", "otlp,bogus", lambda: _config.otel_signal_enabled("METRICS"), True),
    ("GROUNDWATCH_RAISE_INTERNAL_ERRORS", "maybe", _config.raise_internal_errors, False),
    ("GROUNDWATCH_SERVE_HOST", "http://0.0.0.0:4328", _serve_default("host"), None),
    ("GROUNDWATCH_SERVE_HOST", "local host", _serve_default("host"), None),
    ("GROUNDWATCH_SERVE_PORT", "http", _serve_default("port"), 4328),
    ("GROUNDWATCH_SERVE_PORT", "70000", _serve_default("port"), 4328),
    ("GROUNDWATCH_SERVE_GRPC_PORT", "none", _serve_default("grpc_port"), 4327),
    ("GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS", "10s", _serve_default("quiet_period_ms"), 10_000),
    ("GROUNDWATCH_SERVE_ORPHAN_TIMEOUT_MILLIS", "0", _serve_default("orphan_timeout_ms"), 60_000),
    ("GROUNDWATCH_SERVE_MAX_PENDING_TRACES", "-1", _serve_default("max_pending_traces"), 10_000),
    ("GROUNDWATCH_SERVE_MAX_SPANS_PER_TRACE", "x", _serve_default("max_spans_per_trace"), 512),
    ("GROUNDWATCH_SERVE_MAX_BODY_BYTES", "8MB", _serve_default("max_body_bytes"), 8 * 1024 * 1024),
    ("GROUNDWATCH_SERVE_INTERACTIONS", "span", _serve_default("interactions"), "trace"),
    ("GROUNDWATCH_SERVE_ROUTE_ATTRIBUTE", "route name", _serve_default("route_attribute"), None),
]
"""``None`` as the fallback of the serve host: the default itself (another part decides it)."""


@pytest.mark.parametrize(
    ("name", "value", "read", "default"),
    BAD_VALUES,
    ids=[f"{name}={value}" for name, value, _, _ in BAD_VALUES],
)
def test_a_bad_value_is_a_visible_warning_and_the_default(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    value: str,
    read: Callable[[], Any],
    default: Any,
) -> None:
    """With no logging configured, the warning still reaches a person: it is a Python warning
    (printed on stderr by default), not a log record the library's NullHandler would swallow."""
    for other in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.delenv(name, raising=False)
    expected = read()
    if default is not None:
        assert expected == default
    monkeypatch.setenv(name, value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = read()
    assert got == expected
    ours = [w for w in caught if issubclass(w.category, _config.ConfigWarning)]
    assert ours, [str(w.message) for w in caught]
    message = str(ours[0].message)
    assert message.startswith(f"groundwatch: ignoring {name}={value!r} (expected "), message
    shown = "otlp" if name.endswith("_EXPORTER") else expected  # the exporter, not a bool
    assert message.endswith(f"; using {shown!r}"), message


def test_a_bad_value_warns_once_per_variable_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Python's default warning filter a monitor built a hundred times says it once."""
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "lots")
    monkeypatch.setenv("GROUNDWATCH_MAX_QUEUE_SIZE", "big")
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in range(100):
            _config.from_env()
    messages = [str(w.message) for w in caught if issubclass(w.category, _config.ConfigWarning)]
    assert len(messages) == 2, messages
    assert "GROUNDWATCH_SAMPLE_RATE" in messages[0] and "GROUNDWATCH_MAX_QUEUE_SIZE" in messages[1]


def test_a_bad_value_never_raises_even_when_warnings_are_errors(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "lots")
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="groundwatch"):
        warnings.simplefilter("error")
        assert _config.from_env().sample_rate == 1.0
    assert ["GROUNDWATCH_SAMPLE_RATE" in r.getMessage() for r in caplog.records] == [True]


@pytest.mark.parametrize(
    ("value", "rate"),
    [("5%", 0.05), ("0.05", 0.05), (" 12.5 % ", 0.125), ("100%", 1.0), ("0%", 0.0), ("1", 1.0)],
)
def test_the_sample_rate_takes_a_fraction_or_a_percentage(
    monkeypatch: pytest.MonkeyPatch, value: str, rate: float
) -> None:
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", value)
    with warnings.catch_warnings():
        warnings.simplefilter("error", _config.ConfigWarning)
        assert _config.from_env().sample_rate == pytest.approx(rate)
        assert _serve_default("sample_rate")() == pytest.approx(rate)


@pytest.mark.parametrize(
    ("name", "value", "read", "expected"),
    [
        ("GROUNDWATCH_MAX_QUEUE_SIZE", "1_000", _runtime("max_queue_size"), 1000),
        (
            "GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS",
            "6e4",
            _runtime("evaluation_timeout_millis"),
            60_000,
        ),
        ("GROUNDWATCH_MAX_ANSWER_CHARS", "30000.0", _cap(0), 30_000),
        ("GROUNDWATCH_CAPTURE_CONTENT", " On ", _runtime("capture_content"), True),
        (
            "OTEL_TRACES_EXPORTER",
            "otlp,console",
            lambda: _config.otel_signal_enabled("TRACES"),
            True,
        ),
        ("OTEL_TRACES_EXPORTER", "NONE", lambda: _config.otel_signal_enabled("TRACES"), False),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "GRPC", lambda: _config.otlp_protocol("TRACES"), "grpc"),
        ("GROUNDWATCH_SERVE_HOST", "::1", _serve_default("host"), "::1"),
        (
            "GROUNDWATCH_SERVE_HOST",
            "collector.internal",
            _serve_default("host"),
            "collector.internal",
        ),
        (
            "GROUNDWATCH_SERVE_ROUTE_ATTRIBUTE",
            "http.route",
            _serve_default("route_attribute"),
            "http.route",
        ),
    ],
)
def test_the_obvious_forms_are_read(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: Callable[[], Any], expected: Any
) -> None:
    monkeypatch.setenv(name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error", _config.ConfigWarning)
        assert read() == expected


def test_every_documented_variable_has_a_bad_value_test() -> None:
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"`((?:GROUNDWATCH|OTEL)_[A-Z_]+)`", doc))
    # Read by the libraries groundwatch uses, not by groundwatch (the doc's last table).
    documented -= {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"}
    documented -= {"OTEL_LOGS_EXPORTER", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"}  # same code as
    documented -= {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"}  # their TRACES / METRICS siblings
    # Files and a URL: never a fallback, the command checks them at start and exits 2 naming
    # the option (tests/serve/test_security.py, tests/distributed/test_redis_tls.py).
    documented -= {
        "GROUNDWATCH_SERVE_TLS_CERT",
        "GROUNDWATCH_SERVE_TLS_KEY",
        "GROUNDWATCH_SERVE_TLS_CLIENT_CA",
        "GROUNDWATCH_SERVE_AUTH_TOKEN_FILE",
        "GROUNDWATCH_REDIS_URL",
    }
    tested = {name for name, _, _, _ in BAD_VALUES}
    assert documented - tested == set()


def test_the_cli_prints_a_bad_value_on_stderr(tmp_path: Any) -> None:
    """No logging configured, nothing but the command: the person running it sees it once."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDWATCH_", "OTEL_"))}
    env.update(GROUNDWATCH_SAMPLE_RATE="lots", GROUNDWATCH_MAX_PASSAGES="many")
    for command in (["check", "--help"], ["serve", "--help"], ["demo", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "groundwatch", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        for name, value in (
            ("GROUNDWATCH_SAMPLE_RATE", "lots"),
            ("GROUNDWATCH_MAX_PASSAGES", "many"),
        ):
            said = done.stderr.count(f"groundwatch: ignoring {name}={value!r}")
            assert said == 1, (command, done.stderr)


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


def test_input_caps_are_read_here_and_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_MAX_ANSWER_CHARS", "500")
    monkeypatch.setenv("GROUNDWATCH_MAX_PASSAGES", "many")
    with pytest.warns(_config.ConfigWarning) as caught:
        assert _config.input_caps() == (500, 50_000, 64)
    assert [str(w.message) for w in caught] == [
        "groundwatch: ignoring GROUNDWATCH_MAX_PASSAGES='many' (expected a whole number >= 1); "
        "using 64"
    ]


def test_every_variable_is_read_in_config_and_listed_in_the_docs() -> None:
    """No GROUNDWATCH_* or OTEL_* name is read outside _shared/config.py (the LLM judge's two
    defaults excepted while it reads them itself), and docs/configuration.md lists every one."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    config_text = (root / "src" / "groundwatch" / "_shared/config.py").read_text()
    names = set(re.findall(r'"((?:GROUNDWATCH|OTEL)_[A-Z_]+)"', config_text))
    assert {"OTEL_SDK_DISABLED", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} <= names
    for path in [*(root / "src").rglob("*.py"), *(root / "integrations").rglob("*.py")]:
        if path.relative_to(root).as_posix() == "src/groundwatch/_shared/config.py":
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


def test_a_misspelled_variable_warns_once_naming_the_nearest_known_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_config, "_WARNED", {})
    monkeypatch.setenv("GROUNDWATCH_SAMPLING_RATE", "0.0")
    monkeypatch.setenv("GROUNDWATCH_QUITE_UNLIKE_ANYTHING", "sk-secret-value")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        config = _config.from_env()
        _config.from_env()  # a second monitor: not said again
    messages = [
        str(w.message)
        for w in caught
        if issubclass(w.category, _config.ConfigWarning)
        and ("SAMPLING" in str(w.message) or "QUITE" in str(w.message))
    ]
    assert config.sample_rate == 1.0  # the misspelled name is not read
    assert messages == [
        "groundwatch: ignoring GROUNDWATCH_QUITE_UNLIKE_ANYTHING, which is not a groundwatch "
        "variable; docs/configuration.md lists them",
        "groundwatch: ignoring GROUNDWATCH_SAMPLING_RATE, which is not a groundwatch variable; "
        "did you mean GROUNDWATCH_SAMPLE_RATE?",
    ]


def test_every_documented_variable_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each variable in the module's table is one the unknown-name check accepts.
    documented = set(re.findall(r"``(GROUNDWATCH_[A-Z_]+)``", _config.__doc__ or ""))
    assert documented and documented <= _config.known_variables()
