"""The README's OTLP setup is complete: run as written, it delivers all three signals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..alerts.test_demo import otlp_server  # noqa: F401  (a local OTLP/HTTP sink)

ROOT = Path(__file__).resolve().parents[2]


def _readme_otlp_snippet() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    blocks = text.split("```python\n")[1:]
    (snippet,) = [b.split("\n```", 1)[0] for b in blocks if "OTLPSpanExporter" in b]
    return snippet


def test_readme_otlp_setup_delivers_traces_logs_and_metrics(
    otlp_server: tuple[str, list[str]],  # noqa: F811
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    endpoint, paths = otlp_server
    app = _readme_otlp_snippet() + (
        "\nmonitor.record(question='Height?', contexts=['The tower is 330 metres tall.'],"
        " answer='The tower is 330 metres tall.')\n"
        "assert monitor.force_flush(timeout_millis=30_000)\n"
        "monitor.shutdown()\n"
        "tracer_provider.shutdown(); logger_provider.shutdown()\n"
        "metrics.get_meter_provider().shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, GROUNDWATCH_EXECUTOR="thread")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", app], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert {"/v1/traces", "/v1/logs", "/v1/metrics"} <= set(paths), paths
