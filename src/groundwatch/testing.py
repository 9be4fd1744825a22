"""Helpers for users' own test suites: pytest fixtures and assertions.

Import in a ``conftest.py``::

    from groundwatch.testing import *  # noqa: F403

The runtime fixture ``capgw`` (alias ``groundwatch_telemetry``) wires fresh OpenTelemetry SDK
providers to in-memory exporters and builds monitors on them; its accessors flush every monitor
first, so a test can record and assert at once::

    def test_my_chain_is_monitored(capgw):
        monitor = capgw.monitor(judge=MyFastJudge())
        my_rag_function("What is X?", monitor=monitor)
        (record, evaluation), = capgw.results()
        assert evaluation.label == "grounded"
        assert capgw.metric_total("groundwatch.records", groundwatch__decision="sampled") == 1
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanContext, Tracer

from ._shared.errors import install_hint
from ._shared.inputs import to_passage
from .runtime.monitor import Monitor
from .runtime.sampling import Decision
from .telemetry import semconv
from .types import Evaluation, RagRecord

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.trace import ReadableSpan

SDK_INSTALL_HINT = (
    "groundwatch.testing's telemetry fixture needs the OpenTelemetry SDK (groundwatch itself "
    f"depends on the API only), {install_hint('testing')}"
)

__all__: list[str] = ["GroundwatchTelemetry"]

try:  # the fixtures need pytest; the rest of this module does not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

# --- in-memory telemetry fixture (runtime) -------------------------------------------------------


class GroundwatchTelemetry:
    """Fresh SDK providers with in-memory exporters, and monitors built on them.

    Attributes:
        tracer_provider, meter_provider, logger_provider: the providers (not the global ones).
        span_exporter, metric_reader, log_exporter: where the telemetry lands.
        tracer: a tracer of ``tracer_provider``, to open the spans a test's "request" runs in.
    """

    def __init__(self) -> None:
        # The SDK is imported here, not with the module: assert_grounded and RecordingMonitor
        # work with the API alone, and the fixture says what to install when the SDK is missing.
        try:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import (
                InMemoryLogRecordExporter,
                SimpleLogRecordProcessor,
            )
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
        except ImportError as exc:
            raise ImportError(SDK_INSTALL_HINT) from exc
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(
            metric_readers=[self.metric_reader], shutdown_on_exit=False
        )
        self.log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self.logger_provider = LoggerProvider(shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self.tracer: Tracer = self.tracer_provider.get_tracer("groundwatch.testing")
        self.monitors: list[Monitor] = []
        self._results: list[tuple[RagRecord, Evaluation]] = []

    def monitor(self, judge: Any = None, sampler: Any = None, **kwargs: Any) -> Monitor:
        """A :class:`Monitor` on this fixture's providers, shut down when the test ends.

        ``on_result`` callbacks given here run after the fixture's own, which collects
        :meth:`results`. Defaults differ from production in two ways: no ``atexit`` hook, and
        ``executor="thread"`` (no worker process to start per test; pass
        ``executor="process"`` to test that path), in ``scoring=`` or flat alike.
        """
        callbacks = kwargs.pop("on_result", None)
        extra = [] if callbacks is None else [callbacks] if callable(callbacks) else callbacks
        kwargs.setdefault("shutdown_on_exit", False)
        scoring = kwargs.get("scoring")
        if scoring is None:
            kwargs.setdefault("executor", "thread")
        elif scoring.executor is None and "executor" not in kwargs:
            kwargs["scoring"] = dataclasses.replace(scoring, executor="thread")
        monitor = Monitor(
            judge,
            sampler,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            on_result=[self._collect, *extra],
            **kwargs,
        )
        self.monitors.append(monitor)
        return monitor

    def _collect(self, record: RagRecord, evaluation: Evaluation) -> None:
        self._results.append((record, evaluation))

    def flush(self, timeout_millis: int = 10_000) -> None:
        """Wait for every monitor's queue to be scored and emitted.

        Raises:
            AssertionError: a monitor did not finish within ``timeout_millis``.
        """
        for monitor in self.monitors:
            if not monitor.force_flush(timeout_millis):
                raise AssertionError(f"groundwatch monitor did not flush in {timeout_millis} ms")

    def results(self) -> list[tuple[RagRecord, Evaluation]]:
        """``(record, evaluation)`` of every scored record, in completion order (flushes)."""
        self.flush()
        return list(self._results)

    def evaluations(self) -> list[Evaluation]:
        return [evaluation for _, evaluation in self.results()]

    def spans(self, name: str | None = semconv.SPAN_EVALUATION) -> list[ReadableSpan]:
        """Finished spans, ``groundwatch.evaluation`` ones by default (flushes)."""
        self.flush()
        spans = self.span_exporter.get_finished_spans()
        return [s for s in spans if name is None or s.name == name]

    def events(self, name: str | None = semconv.EVENT_EVALUATION_RESULT) -> list[ReadableLogRecord]:
        """Emitted log records, ``gen_ai.evaluation.result`` events by default (flushes)."""
        self.flush()
        logs = self.log_exporter.get_finished_logs()
        return [r for r in logs if name is None or r.log_record.event_name == name]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value)`` of each data point of metric ``name``; a histogram's value is
        its data point (``.count``, ``.sum``, ``.bucket_counts``, ``.explicit_bounds``)."""
        self.flush()
        return [(attrs, value) for attrs, value in self._points(name)]

    def metric_total(self, name: str, **attributes: str) -> float:
        """Sum of a counter's points whose attributes include ``attributes`` (dots spelled as
        double underscores: ``groundwatch__decision="sampled"``)."""
        want = {k.replace("__", "."): v for k, v in attributes.items()}
        total = 0.0
        for attrs, value in self.metric_points(name):
            if all(attrs.get(k) == v for k, v in want.items()):
                total += value
        return total

    def _points(self, name: str) -> Iterator[tuple[dict[str, Any], Any]]:
        data = self.metric_reader.get_metrics_data()
        if data is None:
            return
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = getattr(point, "value", point)
                        yield dict(point.attributes or {}), value

    def close(self) -> None:
        """Shut down the monitors, then the providers."""
        for monitor in self.monitors:
            monitor.shutdown(5_000)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        self.logger_provider.shutdown()


def _fixture() -> Iterator[GroundwatchTelemetry]:
    telemetry = GroundwatchTelemetry()
    try:
        yield telemetry
    finally:
        telemetry.close()


if pytest is not None:
    capgw = pytest.fixture(_fixture, name="capgw")
    groundwatch_telemetry = pytest.fixture(_fixture, name="groundwatch_telemetry")
    __all__ += ["capgw", "groundwatch_telemetry"]

# --- a recording monitor (integrations) ---------------------------------------------------------


class RecordingMonitor:
    """A :class:`~groundwatch.integration.MonitorLike` that keeps every call instead of scoring.

    For testing an integration (yours or ours) without a worker: run the pipeline with the
    integration attached to a ``RecordingMonitor`` and look at what it was handed.

    Attributes:
        records: one dict per ``record`` call: ``question``, ``contexts`` (the items as passed,
            in a list), ``passages`` (each item turned into a :class:`~groundwatch.Passage`, as
            the monitor's worker does), ``answer``, ``span_context``, ``route``, ``attributes``
            (a dict), ``always_score`` and ``decision``.
        failures: one ``(error_type, route)`` per ``record_failure`` call.
        decisions: one ``(decision, route)`` per ``record_decision`` call.
        decided: one ``(span_context, route)`` per ``decide`` call.

    Args:
        decision: what :meth:`decide` answers (``SAMPLED`` by default: keep everything).
    """

    def __init__(self, decision: Decision = Decision.SAMPLED) -> None:
        self._lock = threading.Lock()
        self.decision = decision
        self.records: list[dict[str, Any]] = []
        self.failures: list[tuple[str, str | None]] = []
        self.decisions: list[tuple[Decision, str | None]] = []
        self.decided: list[tuple[SpanContext | None, str | None]] = []

    def decide(
        self, *, span_context: SpanContext | None = None, route: str | None = None
    ) -> Decision:
        with self._lock:
            self.decided.append((span_context, route))
        return self.decision

    def record_decision(self, decision: Decision, *, route: str | None = None) -> None:
        with self._lock:
            self.decisions.append((decision, route))

    def record(
        self,
        *,
        question: str | None = None,
        contexts: Sequence[Any] | None = None,
        answer: str | None = None,
        span_context: SpanContext | None = None,
        route: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        always_score: bool = False,
        decision: Decision | None = None,
    ) -> None:
        """Keep the call, as :meth:`Monitor.record <groundwatch.Monitor.record>` takes it:
        every argument may be left out (``contexts`` is then an empty list)."""
        items = list(contexts) if contexts is not None else []
        call = {
            "question": question,
            "contexts": items,
            "passages": [to_passage(item, i) for i, item in enumerate(items)],
            "answer": answer,
            "span_context": span_context,
            "route": route,
            "attributes": dict(attributes or {}),
            "always_score": always_score,
            "decision": decision,
        }
        with self._lock:
            self.records.append(call)

    def record_failure(self, error_type: str, *, route: str | None = None) -> None:
        with self._lock:
            self.failures.append((error_type, route))


__all__ += ["RecordingMonitor"]

# --- assertions (offline gate) -------------------------------------------------------------------

# Imported here, aliased, so this section merges with the fixture section above without clashes
# (E402: fixture code precedes these imports once that section is filled).
from collections.abc import Sequence as _Sequence  # noqa: E402, RUF100
from typing import Any as _Any  # noqa: E402, RUF100

from .check.summary import closest_sentence  # noqa: E402, RUF100
from .judging.evaluate import evaluate as _evaluate  # noqa: E402, RUF100
from .judging.judges import Judge as _Judge  # noqa: E402, RUF100
from .types import Claim as _Claim  # noqa: E402, RUF100
from .types import Evaluation as _Evaluation  # noqa: E402, RUF100
from .types import Passage as _Passage  # noqa: E402, RUF100

__all__ += ["assert_grounded"]


def _closest_sentence(claim: str, passages: _Sequence[_Passage]) -> tuple[int, str] | None:
    """The passage sentence sharing most words with the claim (not evidence: a pointer)."""
    texts = [p.text for p in passages]
    found = closest_sentence(claim, texts)
    return None if found is None else (found[0], texts[found[0]][found[1] : found[2]])


def _evidence_text(claim: _Claim, passages: _Sequence[_Passage]) -> str:
    if claim.evidence:
        ev = claim.evidence[0]
        return f'best evidence: {ev.name} [{ev.start}:{ev.end}]: "{ev.quote}"'
    text = "no evidence" + (f" ({claim.reason})" if claim.reason else "")
    closest = _closest_sentence(claim.text, passages)
    if closest is not None:
        text += f'; closest passage text: passage {closest[0] + 1}: "{closest[1][:300]}"'
    return text


def assert_grounded(
    answer: str,
    contexts: _Sequence[_Any],
    *,
    min_groundedness: float = 1.0,
    allow_contradicted: int = 0,
    judge: _Judge | None = None,
    question: str | None = None,
) -> _Evaluation:
    """Assert that ``answer`` is backed by ``contexts``; for use in any pytest suite.

    Scores the answer with ``judge`` (the embedded :class:`~groundwatch.LocalJudge` by default)
    and fails when its groundedness is below ``min_groundedness`` or more than
    ``allow_contradicted`` claims contradict the context. An answer with no checkable claim
    fails unless ``min_groundedness`` is 0; a judge failure always fails.

    Example::

        from groundwatch.testing import assert_grounded

        def test_refund_answer(rag_app):
            question = "Can I get my money back?"
            result = rag_app.ask(question)
            assert_grounded(result.answer, result.contexts, question=question)

    Args:
        answer: the generated answer.
        contexts: the retrieved passages (strings, passages, mappings, documents).
        min_groundedness: the least share of claims that must be supported or inferred.
        allow_contradicted: how many contradicted claims are tolerated.
        judge: the judge to use; the embedded local judge by default.
        question: the question, when the judge can use it.

    Returns:
        The :class:`~groundwatch.Evaluation`, for further assertions.

    Raises:
        AssertionError: the answer is not grounded enough; the message lists every unsupported
            and contradicted claim with its best evidence.
    """
    ev = _evaluate(answer, contexts, question=question, judge=judge)
    if ev.label == "error":
        raise AssertionError(
            f"groundwatch could not check the answer: judge {ev.judge!r} failed: {ev.error}"
        )
    if ev.groundedness is None:
        if min_groundedness > 0:
            raise AssertionError(
                f"answer is not grounded: it makes no checkable claim ({ev.explanation}): "
                f"{answer!r}"
            )
        return ev
    contradicted = [c for c in ev.claims if c.verdict == "contradicted"]
    problems: list[str] = []
    if ev.groundedness < min_groundedness - 1e-12:
        problems.append(f"groundedness {ev.groundedness:.2f} < required {min_groundedness:.2f}")
    if len(contradicted) > allow_contradicted:
        n = len(contradicted)
        problems.append(
            f"{n} contradicted claim{'' if n == 1 else 's'} (allowed {allow_contradicted})"
        )
    if not problems:
        return ev
    lines = [f"answer is not grounded: {'; '.join(problems)} [{ev.explanation}]"]
    if ev.label == "insufficient_context":
        lines.append("  the retrieved context has nothing substantive on the question")
    passages = [to_passage(item, i) for i, item in enumerate(contexts)]
    for claim in contradicted + [c for c in ev.claims if c.verdict == "unsupported"]:
        lines.append(f"  [{claim.verdict}] {claim.text!r}")
        lines.append(f"      {_evidence_text(claim, passages)}")
    raise AssertionError("\n".join(lines))
