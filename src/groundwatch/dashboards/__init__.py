"""Dashboard sinks: groundwatch's verdicts written into tracing tools as their own objects
(Phoenix span and document annotations, MLflow assessments), beside the OpenTelemetry span
and events that every monitor sends anyway (docs/dashboards.md).

What a sink provides (see :class:`DashboardSink`, which every sink here subclasses):

- ``__call__(record, evaluation)``: it is an ``on_result`` callback; it turns the evaluation into
  writes and queues them, on the monitor's worker thread, without waiting or raising;
- ``on_feedback(feedback)``: the monitor hands it each ``Monitor.feedback`` (as
  :class:`groundwatch.runtime.feedback.Pending`) on its feedback thread, likewise;
- ``bind_monitor(capture_content=, redact=, audited=, audit_rate=)``: the monitor's content
  settings (an explanation quotes claims only with content capture on, through ``redact``);
- ``flush(timeout_s)`` / ``close(timeout_s)`` (and OpenTelemetry's ``force_flush`` /
  ``shutdown`` in milliseconds): the monitor, ``serve`` and ``worker`` call them with their own
  deadlines;
- a ``component`` name: its lost writes are counted in
  ``groundwatch.errors{groundwatch.component=<component>, error.type=...}``.

A sink's own code is two methods that build :class:`Write` objects (``evaluation_writes``,
``feedback_writes``) and an :class:`Exporter` that sends a batch of them and says, per write,
:class:`Outcome` ``DONE``, ``RETRY``, ``NOT_INGESTED`` or ``FAILED``; the shared
:class:`Delivery` does the rest: the bounded queue, the one batch thread, deadlines, retries
with backoff and jitter, the bounded wait for spans not ingested yet, fork safety, counting.
Each write carries the identifier its server upserts on, so a retry never duplicates.

``serve --sink NAME`` and ``worker --sink NAME`` build a sink from :data:`SINKS` by name
(``_registry.py``), configured from its tool's own environment variables. Nothing here is
imported with ``groundwatch``, and no sink needs a package beyond the core (requests go
through ``urllib``: :mod:`._http` says why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._shared.lazy import lazy_names
from ._registry import SINKS, sink_by_name

if TYPE_CHECKING:
    from ._delivery import Delivery, Exporter, Outcome, Reply, Write
    from ._sink import DashboardSink
    from .mlflow import MLflowSink
    from .phoenix import PhoenixSink

_WHERE = {
    "Delivery": "._delivery",
    "Exporter": "._delivery",
    "Outcome": "._delivery",
    "Reply": "._delivery",
    "Write": "._delivery",
    "DashboardSink": "._sink",
    "PhoenixSink": ".phoenix",
    "MLflowSink": ".mlflow",
}

__all__ = [
    "SINKS",
    "DashboardSink",
    "Delivery",
    "Exporter",
    "MLflowSink",
    "Outcome",
    "PhoenixSink",
    "Reply",
    "Write",
    "sink_by_name",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
