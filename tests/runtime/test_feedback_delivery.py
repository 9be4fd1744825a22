"""``groundwatch feedback import`` delivers, checked (issue #45 item 3): to an endpoint nothing
listens on it exits 1 naming what was not delivered; run again once a real OTLP receiver
listens there, it sends everything once; a third run sends nothing; a failure halfway (the
events refused, the counts taken) sends only the events the next time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundwatch.cli import main
from groundwatch.telemetry import semconv as sc

from .otlp_receiver import OtlpReceiver, otlp_receiver  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
RATE = "1"  # every answer audited: the rows below are all audit labels


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"{i + 1:032x}",
            "label": "hallucinated" if i % 2 else "grounded",
            "audit": True,
            "judge": "local",
            "judge_label": "hallucinated" if i % 3 else "grounded",
            "hallucination_probability": i / 10,
            "route": "faq",
        }
        for i in range(n)
    ]


def _free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _import(path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> int:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # seconds, per export
    return main(["feedback", "import", "--audit-rate", RATE, str(path)])


def _labelled(receiver: OtlpReceiver) -> float:
    """The audit labels the receiver holds: the last export's cumulative count."""
    totals = [
        sum(p.value for p in points if p.name == sc.METRIC_AUDIT_LABELLED)
        for points in receiver.metric_exports
    ]
    return totals[-1] if totals else 0


def test_an_unreachable_endpoint_fails_and_a_rerun_delivers_once(
    tmp_path: Path,
    otlp_receiver: OtlpReceiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "labels.jsonl"
    rows = _rows(6)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    journal = tmp_path / "labels.jsonl.imported"

    assert _import(path, f"http://127.0.0.1:{_free_port()}", monkeypatch) == 1
    captured = capsys.readouterr()
    assert "not delivered: the counts of 6 labels" in captured.err
    assert "Run the same command again" in captured.err
    assert "the counts of 0 labels, the events of 0" in captured.out
    assert not journal.exists() or journal.read_text() == ""

    assert _import(path, otlp_receiver.endpoint, monkeypatch) == 0
    assert "the counts of 6 labels, the events of 6" in capsys.readouterr().out
    assert _labelled(otlp_receiver) == 6
    sums = {
        p.name: p.value
        for p in otlp_receiver.metric_exports[-1]
        if p.name.startswith("groundwatch.audit")
    }
    assert sums[sc.METRIC_AUDIT_LABEL_SUM] == 3 and sums[sc.METRIC_AUDIT_FLAGGED] == 4
    assert sorted(f"{r.trace_id:032x}" for r in otlp_receiver.logs) == [r["trace_id"] for r in rows]
    assert all(r.attributes[sc.GROUNDWATCH_AUDIT] is True for r in otlp_receiver.logs)
    assert len(journal.read_text().splitlines()) == 12  # counts and event of each label

    exports = len(otlp_receiver.metric_exports)
    assert _import(path, otlp_receiver.endpoint, monkeypatch) == 0
    assert "nothing to send" in capsys.readouterr().out
    assert len(otlp_receiver.metric_exports) == exports and len(otlp_receiver.logs) == 6


def test_events_refused_after_the_counts_are_sent_alone_the_next_time(
    tmp_path: Path,
    otlp_receiver: OtlpReceiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(4)))
    otlp_receiver.refuse = {"/v1/logs"}
    assert _import(path, otlp_receiver.endpoint, monkeypatch) == 1
    captured = capsys.readouterr()
    assert "not delivered: the events of 4 labels (the logs export failed)" in captured.err
    assert "the counts of 4 labels, the events of 0" in captured.out
    assert _labelled(otlp_receiver) == 4 and otlp_receiver.logs == []

    otlp_receiver.refuse = set()
    exports = len(otlp_receiver.metric_exports)
    assert _import(path, otlp_receiver.endpoint, monkeypatch) == 0
    assert "the counts of 0 labels, the events of 4" in capsys.readouterr().out
    assert len(otlp_receiver.metric_exports) == exports  # no count sent twice
    assert len(otlp_receiver.logs) == 4
    # A label changed after it was sent is refused, naming the journal.
    changed = _rows(4)
    changed[0]["label"] = "hallucinated"
    path.write_text("".join(json.dumps(r) + "\n" for r in changed))
    assert _import(path, otlp_receiver.endpoint, monkeypatch) == 1
    assert "was imported as grounded" in capsys.readouterr().err


def test_without_the_otlp_extra_it_prints_the_install_line(tmp_path: Path) -> None:
    """The exporter package made unimportable in a real process, as in an install without
    ``groundwatch[otlp]``: one line naming the install, exit 2, no traceback."""
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(2)))
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('opentelemetry.exporter.otlp'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from groundwatch.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GROUNDWATCH_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{_free_port()}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code, "feedback", "import", "--audit-rate", RATE, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'groundwatch[otlp]'" in done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
