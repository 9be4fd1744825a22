"""The long-running commands' shared runner (``groundwatch.cli._long_running``): worker and serve
set up telemetry and run their main through it, so they behave alike."""

from __future__ import annotations

import argparse

import pytest
from opentelemetry import trace

from groundwatch.check.cli import UsageError
from groundwatch.cli import _long_running


def test_usage_error_is_exit_2_with_the_command_name_and_telemetry_is_flushed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flushed: list[bool] = []
    monkeypatch.setattr(_long_running, "otlp_providers", lambda: lambda: flushed.append(True))

    async def bad() -> int:
        raise UsageError("--model is required")

    assert _long_running.run_command("groundwatch serve", bad) == 2
    assert "groundwatch serve: error: --model is required" in capsys.readouterr().err
    assert flushed == [True]

    async def fine() -> int:
        return 0

    assert _long_running.run_command("groundwatch worker", fine) == 0
    assert flushed == [True, True]


def test_no_exporters_without_the_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    before = trace.get_tracer_provider()
    _long_running.otlp_providers()()
    assert trace.get_tracer_provider() is before


@pytest.mark.parametrize("command", ["groundwatch.serve.cli", "groundwatch.queue.cli"])
def test_worker_and_serve_run_through_the_shared_runner(
    monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    import importlib

    module = importlib.import_module(command)
    calls: list[str] = []

    def fake_run(name: str, main: object) -> int:
        calls.append(name)
        return 0

    monkeypatch.setattr(module, "run_command", fake_run)
    assert module.run(argparse.Namespace(redis=None)) == 0
    assert calls == [f"groundwatch {'serve' if 'serve' in command else 'worker'}"]
