"""The long-running commands' shared runner (``groundwatch.runtime.long_running``): worker and
serve set up telemetry and run their main through it, so they behave alike; what they raise
reaches the command line on top, which says it in one line with its exit code."""

from __future__ import annotations

import argparse

import pytest
from opentelemetry import trace

from groundwatch._shared.errors import UsageError
from groundwatch.cli import main
from groundwatch.runtime import long_running


def test_usage_error_reaches_the_command_line_and_telemetry_is_flushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flushed: list[bool] = []
    monkeypatch.setattr(long_running, "otlp_providers", lambda: lambda: flushed.append(True))

    async def bad() -> int:
        raise UsageError("--model is required")

    with pytest.raises(UsageError, match="--model is required"):
        long_running.run_command(bad)
    assert flushed == [True]

    async def fine() -> int:
        return 0

    assert long_running.run_command(fine) == 0
    assert flushed == [True, True]


@pytest.mark.parametrize(
    ("command", "argv", "code"),
    [
        ("groundwatch.serve.cli", ["serve"], 2),
        ("groundwatch.queue.cli", ["worker", "--group", "g"], 2),
        ("groundwatch.serve.cli", ["serve"], 1),
    ],
)
def test_what_a_command_raises_is_one_line_and_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    argv: list[str],
    code: int,
) -> None:
    import importlib

    module = importlib.import_module(command)

    def fake_run(make: object) -> int:
        if code == 2:
            raise UsageError("--model is required")
        raise OSError("disk full")

    monkeypatch.setattr(module, "run_command", fake_run)
    monkeypatch.setattr(module, "_importable", lambda name: True, raising=False)
    assert main(argv) == code
    err = capsys.readouterr().err
    name = f"groundwatch {argv[0]}"
    expected = "--model is required" if code == 2 else "OSError: disk full"
    assert f"{name}: error: {expected}" in err


def test_no_exporters_without_the_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    before = trace.get_tracer_provider()
    long_running.otlp_providers()()
    assert trace.get_tracer_provider() is before


@pytest.mark.parametrize("command", ["groundwatch.serve.cli", "groundwatch.queue.cli"])
def test_worker_and_serve_run_through_the_shared_runner(
    monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    import importlib

    module = importlib.import_module(command)
    calls: list[str] = []

    def fake_run(main: object) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(module, "run_command", fake_run)
    assert module.run(argparse.Namespace(redis=None)) == 0
    assert calls == [command]


def test_every_subcommand_is_found_through_the_one_table() -> None:
    import importlib

    from groundwatch import cli

    names = [name for name, _ in cli._SUBCOMMANDS]
    assert names == ["check", "demo", "worker", "serve", "feedback", "rules", "export-onnx"]
    for _, module_name in cli._SUBCOMMANDS:
        module = importlib.import_module(module_name)
        assert callable(module.add_parser) and callable(module.run), module_name
    sub = cli.build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    assert sorted(sub.choices) == sorted(names)


def test_leaving_after_pytorch_runs_the_exit_hooks_and_keeps_the_code() -> None:
    # With PyTorch loaded the command ends without the interpreter's finalization (where its
    # native threads can abort the process after the result): the exit hooks still run and
    # the exit code is the command's.
    import subprocess
    import sys

    script = (
        "import atexit, sys, types\n"
        "from groundwatch.cli import leave\n"
        "{torch}"
        "atexit.register(lambda: print('exit hook ran', flush=True))\n"
        "print('result', flush=True)\n"
        "leave(3)\n"
    )
    for torch in ("sys.modules['torch'] = types.ModuleType('torch')\n", ""):
        done = subprocess.run(
            [sys.executable, "-c", script.format(torch=torch)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout.split()) == (3, ["result", "exit", "hook", "ran"])
