"""Adding a record field is its declaration, and nothing else of the boundaries.

A copy of the package gets one field, ``tenant``, declared on ``RagRecord`` and on
``RecordFields`` (one line each) and put on the span by the emitter (one line: which attribute
carries it is telemetry's choice). Then, in a fresh interpreter on that copy, a value set on the
host reaches the evaluation span on each path: the thread executor (no boundary); the worker
process's (the pipe's tuple, then the span ``ChildExport`` builds in the child from it, as
``export_from_worker`` does); and the Redis queue's (the stream's JSON, then the span the worker
builds from the record it decodes). The codecs of every boundary are written from the two
declarations at import, so none of them is edited here; the real child process, Redis server
and OTLP export are what tests/runtime/test_worker_export.py and tests/distributed run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import groundwatch

SCRIPT = r"""
import json, pickle

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw
from groundwatch._fields import RecordFields
from groundwatch.queue import stream_json
from groundwatch.runtime.pipeline import prepare_record
from groundwatch.telemetry import Stats, Telemetry
from groundwatch.telemetry.worker_export import ChildExport

def provider():
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter

def tenants(exporter):
    return [s.attributes.get("test.tenant") for s in exporter.get_finished_spans()]

def emit(record):
    tracer_provider, exporter = provider()
    telemetry = Telemetry(
        tracer_provider=tracer_provider, meter_provider=None, logger_provider=None,
        capture_content=False, redact=None, content_max_chars=1, stats=Stats(lambda: 0),
    )
    evaluation = gw.evaluate(record.question, record.contexts, record.answer)
    telemetry.emit_span(record, evaluation, 1.0, 1, 2, evaluation.verdict_counts)
    return tenants(exporter)

CHILD = provider()

def child_providers(resource):  # export_from_worker's providers function, as the child calls it
    return CHILD[0], None

class Tenant:  # a value set on the host, where the record is taken
    def decide(self, record):
        record.tenant = "acme"
        return gw.Decision.SAMPLED

found = {}
tracer_provider, exporter = provider()
monitor = gw.Monitor(
    executor="thread", sampler=Tenant(), tracer_provider=tracer_provider,
    shutdown_on_exit=False,
)
monitor.record(question="Height?", contexts=["It is 330 m tall."], answer="It is 330 m tall.")
monitor.force_flush(60_000)
monitor.shutdown()
found["thread"] = tenants(exporter)

record = gw.RagRecord("Height?", ["It is 330 m tall."], "It is 330 m tall.", record_id="ab")
record.tenant = "acme"
prepare_record(record)
sent = pickle.dumps(RecordFields.of(record, record.contexts).to_wire())
# The child's side: the span ChildExport builds from the fields the pipe carried.
child = ChildExport(pickle.dumps((child_providers, None, False, None, 1, 0)))
evaluation = gw.evaluate(record.question, record.contexts, record.answer)
child.emit(RecordFields.from_wire(pickle.loads(sent)), evaluation, 1, 2)
found["process"] = tenants(CHILD[1])
found["redis"] = emit(stream_json.decode(stream_json.encode(record, 1.0, 1)).to_record())
print(json.dumps(found))
"""


def _add_field(root: Path) -> None:
    """The edits a person makes to add ``tenant``: the two declarations and the span line."""

    def edit(relative: str, after: str, added: str) -> None:
        path = root / relative
        text = path.read_text(encoding="utf-8")
        assert text.count(after) == 1, (relative, after)
        path.write_text(text.replace(after, after + added), encoding="utf-8")

    edit("_shared/record.py", "    truncated: bool = False\n", "    tenant: str | None = None\n")
    edit("_fields.py", "    enqueued_ns: int = 0\n", "    tenant: str | None = None\n")
    edit(
        "telemetry/_emitter.py",
        "    yield sc.GROUNDWATCH_RECORD_ID, record.record_id\n",
        '    if record.tenant is not None:\n        yield "test.tenant", record.tenant\n',
    )


def test_a_field_declared_on_the_record_reaches_the_span_on_every_path(tmp_path: Path) -> None:
    copy = tmp_path / "src" / "groundwatch"
    shutil.copytree(
        Path(groundwatch.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    _add_field(copy)
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == {"thread": ["acme"], "process": ["acme"], "redis": ["acme"]}


def test_without_the_declarations_the_field_does_not_travel(tmp_path: Path) -> None:
    # The control: the same script on the package as it is fails where the field is read,
    # so the test above measures the added declarations, not something already there.
    env = {**os.environ, "PYTHONPATH": str(Path(groundwatch.__file__).parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "AttributeError" in done.stderr and "'tenant'" in done.stderr
