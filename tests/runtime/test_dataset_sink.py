"""``DatasetSink``: flagged answers as the JSONL rows ``groundwatch check`` reads.

A real monitor (local judge, in-memory OpenTelemetry providers) feeds the sink; the rows are read
back with ``check``'s own reader. The slow disk is a named pipe whose reader does not read until
told: the writer thread blocks on it as on a stuck disk, while the worker goes on.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch import RatioSampler
from groundwatch._shared import guard
from groundwatch.check.rows import Row, read_rows
from groundwatch.testing import GroundwatchTelemetry

CONTEXT = "The Model X battery lasts 12 hours. Charging takes 90 minutes. Call alice@example.com."
GOOD = "The battery lasts 12 hours."
BAD = "The warranty covers it for ten years and it ships from Berlin."


def _redact(text: str) -> str:
    return text.replace("alice@example.com", "<email>")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_content_capture_off_is_refused_at_construction(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    sink = gw.DatasetSink(tmp_path / "flagged.jsonl")
    with pytest.raises(ValueError, match="capture_content=True"):
        capgw.monitor(on_result=sink, capture_content=False)
    monitor = capgw.monitor(capture_content=False)
    with pytest.raises(ValueError, match="GROUNDWATCH_CAPTURE_CONTENT"):
        monitor.add_result_callback(gw.DatasetSink(tmp_path / "other.jsonl"))
    assert not (tmp_path / "flagged.jsonl").exists()


def test_flagged_rows_are_check_rows_redacted_with_an_empty_label(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    path = tmp_path / "flagged.jsonl"
    sink = gw.DatasetSink(path)
    monitor = capgw.monitor(
        sampler=RatioSampler(1.0), capture_content=True, redact=_redact, on_result=sink
    )
    with capgw.tracer.start_as_current_span("request") as span:
        monitor.record(question="alice@example.com asks", contexts=[CONTEXT], answer=BAD)
        trace_id = span.get_span_context().trace_id
    monitor.record(question="Battery?", contexts=[CONTEXT], answer=GOOD, route="faq")
    monitor.record(question="Battery?", contexts=[CONTEXT], answer=BAD, route="faq")
    assert monitor.force_flush(10_000)

    rows = _rows(path)
    assert [r["judge_label"] for r in rows] == ["hallucinated", "hallucinated"]  # not grounded
    first = rows[0]
    assert first["id"] == format(trace_id, "032x")
    assert first["label"] == ""
    assert first["claims"] and {c["verdict"] for c in first["claims"]} <= {
        "supported",
        "inferred",
        "unsupported",
        "contradicted",
    }
    assert first["groundedness"] is not None
    assert rows[1]["route"] == "faq"
    text = path.read_text()
    assert "alice@example.com" not in text
    assert "<email> asks" in text and "Call <email>." in text

    # check's own reader takes every row as it is: a row to judge, no human label yet.
    read = list(read_rows(path))
    assert all(isinstance(r, Row) for r in read)
    assert [r.answer for r in read if isinstance(r, Row)] == [BAD, BAD]
    assert all(isinstance(r, Row) and r.expected is None for r in read)

    # A person fills the label: the same file is a golden set.
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({**r, "label": "hallucinated"}) + "\n" for r in rows))
    assert all(isinstance(r, Row) and r.expected == "hallucinated" for r in read_rows(labelled))


def test_when_chooses_the_rows(capgw: GroundwatchTelemetry, tmp_path: Path) -> None:
    labels = gw.DatasetSink(tmp_path / "grounded.jsonl", when={"grounded"})
    predicate = gw.DatasetSink(
        tmp_path / "faq.jsonl", when=lambda record, evaluation: record.route == "faq"
    )
    monitor = capgw.monitor(
        sampler=RatioSampler(1.0), capture_content=True, on_result=[labels, predicate]
    )
    monitor.record(question="q", contexts=[CONTEXT], answer=GOOD, route="faq")
    monitor.record(question="q", contexts=[CONTEXT], answer=BAD, route="other")
    assert monitor.force_flush(10_000)
    assert [r["judge_label"] for r in _rows(tmp_path / "grounded.jsonl")] == ["grounded"]
    assert [r["route"] for r in _rows(tmp_path / "faq.jsonl")] == ["faq"]


def test_the_file_rotates_by_size_into_files_check_reads(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    path = tmp_path / "flagged.jsonl"
    sink = gw.DatasetSink(path, max_bytes=4_000, backups=3)
    monitor = capgw.monitor(sampler=RatioSampler(1.0), capture_content=True, on_result=sink)
    for i in range(40):
        monitor.record(question=f"q{i}", contexts=[CONTEXT], answer=BAD)
    assert monitor.force_flush(10_000)
    files = sorted(tmp_path.glob("flagged*.jsonl"))
    assert [f.name for f in files] == [
        "flagged.1.jsonl",
        "flagged.2.jsonl",
        "flagged.3.jsonl",
        "flagged.jsonl",
    ]
    assert sink.rotations > 3  # the oldest were removed
    for f in files:
        assert f.stat().st_size <= 4_000
        assert all(isinstance(r, Row) for r in read_rows(f))
    # The newest rows are in the current file; the rotated ones hold older rows, in order.
    oldest_first = [*reversed(files[:3]), files[3]]
    questions = [r["question"] for f in oldest_first for r in _rows(f)]
    assert questions == sorted(questions, key=lambda q: int(q[1:]))
    assert questions[-1] == "q39"
    assert sink.written == 40 and sink.dropped == 0


class _SlowDisk:
    """A named pipe standing in for a disk that stops taking writes until ``release()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.lines: list[bytes] = []
        self._go = threading.Event()
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self.path.open("rb") as f:  # blocks until the writer opens its end
            self._opened.set()
            self._go.wait()
            self.lines = [line for line in f if line.strip()]

    def release(self) -> None:
        self._go.set()

    def join(self) -> None:
        self._thread.join(30)


def test_under_load_a_stuck_disk_never_holds_up_the_worker(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    disk = _SlowDisk(tmp_path / "flagged.jsonl")
    errors_before = guard.errors[("dataset", "buffer_full")]
    sink = gw.DatasetSink(disk.path, max_bytes=0, max_buffered=500)
    n = 10_000
    after = _Count(n)  # the callback after the sink: the worker got past it
    monitor = capgw.monitor(
        sampler=RatioSampler(1.0),
        capture_content=True,
        on_result=[sink, after],
        max_queue_size=n,
    )
    for i in range(n):
        monitor.record(question=f"q{i}", contexts=[CONTEXT], answer=BAD)
    # The worker scores all 10k and runs every callback while the disk takes nothing past the
    # pipe's buffer: the writer thread is stuck, the worker is not.
    assert after.done.wait(120), after.calls
    assert not sink.flush(0.2)  # the writer is still stuck on the disk
    assert sink.dropped > 0  # the bounded buffer overflowed: counted, not waited for
    assert 0 < sink.buffered <= 500
    # ... and in groundwatch.errors{groundwatch.component="dataset", error.type="buffer_full"}.
    assert guard.errors[("dataset", "buffer_full")] - errors_before == sink.dropped
    assert monitor.stats.snapshot()[0].get(("sampled", None)) == n
    disk.release()
    assert sink.flush(60)
    assert monitor.shutdown(10_000)
    disk.join()
    assert sink.written + sink.dropped == n
    assert len(disk.lines) == sink.written
    assert all(json.loads(line)["judge_label"] == "hallucinated" for line in disk.lines)


class _Count:
    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0
        self.done = threading.Event()

    def __call__(self, record: Any, evaluation: Any) -> None:
        self.calls += 1
        if self.calls >= self.n:
            self.done.set()


def test_a_forked_child_writes_a_file_of_its_own(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    path = tmp_path / "flagged.jsonl"
    sink = gw.DatasetSink(path)
    monitor = capgw.monitor(sampler=RatioSampler(1.0), capture_content=True, on_result=sink)
    monitor.record(question="parent", contexts=[CONTEXT], answer=BAD)
    assert monitor.force_flush(10_000)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: record, flush, feedback, report, leave at once
        try:
            monitor.record(question="child", contexts=[CONTEXT], answer=BAD)
            flushed = monitor.force_flush(10_000)
            monitor.feedback(label="hallucinated", trace_id=1)
            report = {"flushed": flushed and monitor.force_flush(5_000), "path": str(sink.path)}
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = json.loads(pipe.read().decode() or "{}")
    os.waitpid(pid, 0)
    child_path = tmp_path / f"flagged.{pid}.jsonl"
    assert report == {"flushed": True, "path": str(child_path)}
    assert [r["question"] for r in _rows(child_path)] == ["child"]
    monitor.record(question="parent again", contexts=[CONTEXT], answer=BAD)
    assert monitor.force_flush(10_000)
    assert [r["question"] for r in _rows(path)] == ["parent", "parent again"]


def test_a_tool_passage_keeps_its_name_through_check(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    import subprocess
    import sys

    path = tmp_path / "flagged.jsonl"
    monitor = capgw.monitor(
        sampler=RatioSampler(1.0), capture_content=True, on_result=gw.DatasetSink(path)
    )
    policy = gw.Passage(
        text="Refund policy: refunds are accepted within 30 days of purchase with a receipt.",
        kind="tool",
        tool="lookup_policy",
    )
    changed = "Refunds are accepted within 45 days of purchase with a receipt."
    monitor.record(question="Refund?", contexts=[policy], answer=changed)
    assert monitor.force_flush(10_000)
    (row,) = _rows(path)
    assert row["contexts"] == [{"text": policy.text, "kind": "tool", "tool": "lookup_policy"}]
    done = subprocess.run(
        [sys.executable, "-m", "groundwatch", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the flagged answer fails the gate
    # check names the passage after its tool, as the app's telemetry does.
    assert '(tool lookup_policy: "Refund policy' in done.stdout, done.stdout
