"""groundwatch with its core dependencies only (pydantic, opentelemetry-api): what must work.

Run as a plain script: in CI's core-only venv (the lowest allowed pydantic and API, no SDK, no
extras), and by ``test_core_only.py`` with the optional packages blocked.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

GOLDEN_SET = Path(__file__).resolve().parents[2] / "examples" / "golden_set.jsonl"
OPTIONAL = ("opentelemetry.sdk", "openai", "langchain_core", "llama_index", "numpy")


def main() -> None:
    import groundwatch as gw

    ev = gw.evaluate(
        "The Eiffel Tower is 330 metres tall and was finished in 1889.",
        ["The Eiffel Tower, completed in 1889, stands 330 metres (1,083 ft) tall."],
    )
    assert ev.label == "grounded", ev

    # The monitor on the API's no-op providers (no SDK installed: the app chose none).
    results: list[str] = []
    monitor = gw.Monitor(on_result=lambda record, e: results.append(e.label))
    context = ["The Eiffel Tower is 330 metres tall."]
    monitor.record(
        question="Height?", contexts=context, answer="The Eiffel Tower is 90 metres tall."
    )
    assert monitor.force_flush(timeout_millis=30_000)
    assert monitor.shutdown(timeout_millis=10_000)
    assert results == ["hallucinated"], results

    from groundwatch.cli import main as cli

    out = io.StringIO()
    with redirect_stdout(out):
        code = cli(["check", str(GOLDEN_SET), "--max-flag-share", "1"])
    assert code == 0 and "result: PASS, exit 0" in out.getvalue(), out.getvalue()

    # feedback import needs the SDK and the OTLP exporter ([otlp]): without them, the install
    # line, exit 2, no traceback (issue #45).
    with tempfile.TemporaryDirectory() as tmp:
        labels = Path(tmp) / "labels.jsonl"
        labels.write_text(json.dumps({"trace_id": "1" * 32, "label": "grounded"}) + "\n")
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
        err = io.StringIO()
        try:
            with redirect_stderr(err):
                code = cli(["feedback", "import", str(labels)])
        finally:
            del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert code == 2 and "pip install 'groundwatch[otlp]'" in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue()

    from groundwatch.testing import GroundwatchTelemetry, assert_grounded

    assert_grounded("The tower is 330 m tall.", ["The tower is 330 m tall."])
    try:
        GroundwatchTelemetry()
    except ImportError as exc:
        assert 'pip install -e ".[testing]"' in str(exc), exc
    else:
        raise AssertionError("the telemetry fixture built without the SDK")

    loaded = [m for m in OPTIONAL if m in sys.modules]
    assert not loaded, f"imported optional packages: {loaded}"
    print("core-only: ok")


if __name__ == "__main__":
    main()
