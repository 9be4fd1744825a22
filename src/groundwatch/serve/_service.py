"""The receiver's logic, apart from HTTP: requests in, interactions to the monitor out.

:class:`TraceService` decodes an OTLP request, hands its spans to the assembler, and turns
each finished trace into ``Monitor.record`` calls with the trace's root span as the span
context, so the evaluation span is a child of the root (same trace id); in pair mode, of the
nearest common ancestor of the pair's retriever and LLM spans. The ratio part of the
monitor's sampler is decided on the trace id when a trace's first span arrives (:mod:`._intake`:
a trace that will not be scored stores nothing, and counts once as ``not_sampled``); the
monitor's sampler decides again when the interaction is recorded, with the same answer for the
ratio, and applies what is not a ratio (a rate limit) only there. Scoring and
emitting are the monitor's: in-process, or through a Redis queue to ``groundwatch worker``s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import SpanContext, TraceFlags

from .._shared import guard
from ..runtime.monitor import Monitor
from ..runtime.sampling import Decision
from ..telemetry import semconv as sc
from . import _otlp
from ._assemble import (
    IGNORED,
    OWN,
    REJECTED,
    TRACE_INTERACTION,
    TRACE_NO_INTERACTION,
    FinishedTrace,
    TraceAssembler,
)
from ._auth import TokenFile
from ._intake import IntakeSampler
from ._interactions import Interaction, interactions
from ._otlp import LogEvent, SpanData
from ._tally import Tally

_logger = logging.getLogger(__name__)

_Observe = Callable[[CallbackOptions], list[Observation]]

BACKPRESSURE_FILL = 0.9
"""Share of the monitor's queue in use past which exports are answered 429: the scorer is
behind, and a Collector's retry (with backoff) slows the intake instead of losing records."""


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, body, content type and extra headers."""

    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: tuple[tuple[str, str], ...] = ()


class TraceService:
    """Receive OTLP traces, assemble them, record their interactions into ``monitor``.

    Args:
        monitor: where interactions go (its sampler, judge or queue, and telemetry decide
            the rest).
        assembler: holds spans until their trace is complete; unless it has its own
            ``admit``, the service gives it the intake decision on the monitor's sampler.
        per_pair: one interaction per retriever + LLM pair instead of one per trace, each
            under the nearest common ancestor of its spans (the assembler keeps the links).
        max_body_bytes: cap on a request body, compressed and decompressed.
        max_queue_size: the monitor's queue capacity (for the backpressure threshold).
        route_attribute: the span or resource attribute that names the route; the root's
            ``service.name`` otherwise.
        meter_provider: for serve's own instruments (the global one by default).
        auth: the accepted bearer tokens (``--auth-token-file``); ``None`` accepts every
            request. The transports ask :meth:`authenticate` before anything else.
    """

    def __init__(
        self,
        monitor: Monitor,
        assembler: TraceAssembler,
        *,
        per_pair: bool = False,
        max_body_bytes: int,
        max_queue_size: int,
        route_attribute: str | None = None,
        meter_provider: MeterProvider | None = None,
        auth: TokenFile | None = None,
    ) -> None:
        self.monitor = monitor
        self.assembler = assembler
        self.per_pair = per_pair
        self.max_body_bytes = max_body_bytes
        self.max_queue_size = max_queue_size
        self.route_attribute = route_attribute
        self.skips = Tally()
        self.requests = Tally()
        self.refused = Tally()
        """Requests answered 401 (gRPC ``UNAUTHENTICATED``), by reason."""
        self.auth = auth
        self.stopping = False
        self.retry_after_s = max(1, math.ceil(assembler.quiet_s))
        self.intake = IntakeSampler(monitor.sampler, route_attribute=route_attribute)
        if assembler.admit is None:
            assembler.admit = self._admit
        # The links of the spans not stored: pair mode's nearest common ancestor, and in
        # either mode which tool a retriever ran in (a chain span may sit between them).
        assembler.keep_parents = True
        self._register_instruments(meter_provider or get_meter_provider())

    # --- receiving ---------------------------------------------------------------------------

    def export(
        self, body: bytes, content_type: str, content_encoding: str, *, logs: bool = False
    ) -> Reply:
        """Answer one ``POST /v1/traces`` (``/v1/logs`` with ``logs``). Never raises: our own
        failure is a 500."""
        media = _otlp.CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
        try:
            reply = self._export(body, media, content_type, content_encoding, logs)
        except Exception as exc:
            guard.internal_error("serve export", exc)
            reply = self.error(500, "internal error", media)
        self.requests.add(reply.status)
        return reply

    def authenticate(self, authorization: str | None, content_type: str) -> Reply | None:
        """``None`` when the request may go on (no token configured, or an accepted one in
        ``authorization``, the header's value); otherwise the 401 answer, counted by reason.
        Nothing of the request is read or scored before this."""
        if self.auth is None:
            return None
        reason = self.auth.check(authorization)
        return None if reason is None else self.unauthenticated(reason, content_type)

    def unauthenticated(self, reason: str, content_type: str) -> Reply:
        """The 401 answer for ``reason`` (``error.type``), counted."""
        media = _otlp.CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
        media = media or _otlp.PROTOBUF
        self.requests.add(401)
        self.refused.add(reason)
        headers: tuple[tuple[str, str], ...] = ()
        if reason == sc.SERVE_MISSING_TOKEN:
            message = "no bearer token: send the header authorization: Bearer <token>"
            headers = (("WWW-Authenticate", 'Bearer realm="groundwatch serve"'),)
        elif reason == sc.SERVE_INVALID_TOKEN:
            message = "the bearer token is not accepted"
            challenge = 'Bearer realm="groundwatch serve", error="invalid_token"'
            headers = (("WWW-Authenticate", challenge),)
        else:
            message = "a client certificate signed by the CA serve trusts is required"
        return Reply(401, _otlp.status_body(media, 401, message), media, headers)

    def error(
        self, status: int, message: str, media: str | None, retry_after: str | None = None
    ) -> Reply:
        """An OTLP error answer: a ``google.rpc.Status`` in the request's encoding."""
        media = media or _otlp.PROTOBUF
        headers = (("Retry-After", retry_after),) if retry_after else ()
        return Reply(status, _otlp.status_body(media, status, message), media, headers)

    def not_served(self, content_type: str, path: str) -> Reply:
        """The 404 answer to OTLP metrics: serve reads traces and GenAI log events only, and
        says so to an exporter pointed here."""
        media = _otlp.CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
        self.requests.add(404)
        return self.error(
            404,
            f"groundwatch serve receives traces and logs only (/v1/traces, /v1/logs), not {path}",
            media,
        )

    def too_large(self, content_type: str) -> Reply:
        """The 413 answer (the HTTP layer stops reading a body at the cap)."""
        media = _otlp.CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
        self.requests.add(413)
        return self.error(413, f"body exceeds {self.max_body_bytes} bytes", media)

    def _export(
        self, body: bytes, media: str | None, content_type: str, content_encoding: str, logs: bool
    ) -> Reply:
        if media is None:
            return self.error(
                415,
                f"unsupported Content-Type {content_type!r}: use {_otlp.PROTOBUF} or {_otlp.JSON}",
                None,
            )
        if self.stopping:
            return self.error(503, "shutting down", media, retry_after="1")
        if self.monitor.stats.queue_size() >= BACKPRESSURE_FILL * self.max_queue_size:
            return self.error(
                429, "scoring is behind; retry later", media, retry_after=str(self.retry_after_s)
            )
        if len(body) > self.max_body_bytes:
            return self.error(413, f"body exceeds {self.max_body_bytes} bytes", media)
        try:
            raw = _otlp.decompress(body, content_encoding, self.max_body_bytes)
            empty = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
            request = _otlp.parse_request(raw, media, empty)
        except _otlp.BodyError as exc:
            return self.error(exc.status, str(exc), media)
        if logs:
            return self._take_logs(_otlp.log_events_of(request), media)
        decoded = _otlp.spans_of(request, self.route_attribute)
        counts = self.assembler.counts
        counts.add_spans(OWN, decoded.own)
        counts.add_spans(REJECTED, decoded.rejected)
        self.assembler.add(decoded.spans)
        return Reply(
            200,
            _otlp.response_body(media, decoded.rejected, decoded.rejected_reason),
            media,
        )

    def _admit(self, span: SpanData | LogEvent) -> bool:
        """The intake decision on a trace's first span; a refused trace is counted here, as
        the one decision ``groundwatch.records`` gets for it."""
        if self.intake.sampled(span):
            return True
        self.monitor.record_decision(Decision.NOT_SAMPLED)
        return False

    def _take_logs(self, decoded: _otlp.DecodedLogs, media: str) -> Reply:
        counts = self.assembler.counts
        counts.add_logs(OWN, decoded.own)
        counts.add_logs(REJECTED, decoded.rejected)
        counts.add_logs(IGNORED, decoded.ignored)
        self.assembler.add_events(decoded.events)
        body = _otlp.response_body(media, decoded.rejected, decoded.rejected_reason, logs=True)
        return Reply(200, body, media)

    # --- completing ----------------------------------------------------------------------------

    def complete_due(self) -> int:
        """Record the interactions of every trace complete now; returns how many."""
        return self._record_all(self.assembler.due())

    def drain(self) -> int:
        """Record what every pending trace holds, complete or not (at shutdown)."""
        return self._record_all(self.assembler.drain())

    def _record_all(self, finished: list[FinishedTrace]) -> int:
        recorded = 0
        for root, spans, parents in finished:
            try:
                found = interactions(
                    root, spans, per_pair=self.per_pair, skips=self.skips, parents=parents
                )
            except Exception as exc:  # extractors are guarded; this is our own bug
                guard.internal_error("serve extract", exc)
                found = []
            outcome = TRACE_INTERACTION if found else TRACE_NO_INTERACTION
            self.assembler.counts.add_traces(outcome)
            for interaction in found:
                self._record(interaction, spans)
                recorded += 1
        return recorded

    def _route(self, interaction: Interaction, spans: list[Any]) -> str | None:
        for span in (interaction.root, *spans):
            if span.route is not None:
                return str(span.route)
        return interaction.root.service

    def _record(self, interaction: Interaction, spans: list[Any]) -> None:
        root = interaction.root
        parent = SpanContext(
            trace_id=int.from_bytes(root.trace_id, "big"),
            span_id=int.from_bytes(interaction.parent_id, "big"),
            is_remote=True,
            # Exporters only send sampled spans: the evaluation belongs in the same kept trace.
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        attributes: dict[str, Any] = {sc.GROUNDWATCH_SERVE_SOURCE: interaction.source}
        if interaction.llm is not None:
            attributes[sc.GROUNDWATCH_SERVE_LLM_SPAN_ID] = interaction.llm.span_id.hex()
        if interaction.tools is not None:
            attributes[sc.GROUNDWATCH_CONTEXTS_TOOLS] = interaction.tools
        if interaction.tool_errors:
            attributes[sc.GROUNDWATCH_TOOL_ERRORS] = interaction.tool_errors
        if interaction.conversation_id is not None:
            attributes[sc.GEN_AI_CONVERSATION_ID] = interaction.conversation_id
        if interaction.response_id is not None:
            # Also on the gen_ai.evaluation.result events: the completion they evaluate.
            attributes[sc.GEN_AI_RESPONSE_ID] = interaction.response_id
        self.monitor.record(
            question=interaction.question,
            contexts=interaction.passages,
            answer=interaction.answer,
            span_context=parent,
            route=self._route(interaction, spans),
            attributes=attributes,
        )

    # --- health and metrics --------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` reports."""
        spans, traces = self.assembler.counts.snapshot()
        return {
            "status": "stopping" if self.stopping else "ok",
            "pending_traces": len(self.assembler),
            "queue_size": self.monitor.stats.queue_size(),
            "spans": spans,
            "log_records": self.assembler.counts.log_snapshot(),
            "traces": traces,
            "skipped": self.skips.snapshot(),
            "requests": {str(k): v for k, v in self.requests.snapshot().items()},
            "unauthenticated": self.refused.snapshot(),
        }

    def _observe_requests(self, _: CallbackOptions) -> list[Observation]:
        # A 401 is split by why it was refused; every other status is one series.
        status = sc.HTTP_RESPONSE_STATUS_CODE
        observed = [Observation(n, {status: k}) for k, n in self.requests.snapshot().items()]
        observed = [o for o in observed if o.attributes != {status: 401}]
        observed.extend(
            Observation(n, {status: 401, sc.ERROR_TYPE: reason})
            for reason, n in self.refused.snapshot().items()
        )
        return observed

    def _register_instruments(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(sc.INSTRUMENTATION_NAME)
        counts = self.assembler.counts

        def by(attribute: str, snapshot: Callable[[], Mapping[Any, int]]) -> _Observe:
            def observe(_: CallbackOptions) -> list[Observation]:
                return [Observation(n, {attribute: k}) for k, n in snapshot().items()]

            return observe

        outcome = sc.GROUNDWATCH_SERVE_OUTCOME
        counters: tuple[tuple[str, _Observe, str, str], ...] = (
            (
                sc.METRIC_SERVE_SPANS,
                by(outcome, lambda: counts.snapshot()[0]),
                "{span}",
                "Spans received over OTLP",
            ),
            (
                sc.METRIC_SERVE_LOG_RECORDS,
                by(outcome, counts.log_snapshot),
                "{log_record}",
                "Log records received over OTLP",
            ),
            (
                sc.METRIC_SERVE_TRACES,
                by(outcome, lambda: counts.snapshot()[1]),
                "{trace}",
                "Traces assembled",
            ),
            (
                sc.METRIC_SERVE_SKIPPED,
                by(sc.GROUNDWATCH_COMPONENT, self.skips.snapshot),
                "{attribute}",
                "Attributes an extractor could not read",
            ),
            (sc.METRIC_SERVE_REQUESTS, self._observe_requests, "{request}", "OTLP exports"),
        )
        for name, callback, unit, description in counters:
            meter.create_observable_counter(name, [callback], unit=unit, description=description)

        def pending(_: CallbackOptions) -> list[Observation]:
            return [Observation(len(self.assembler))]

        meter.create_observable_gauge(
            sc.METRIC_SERVE_PENDING, [pending], unit="{trace}", description="Traces assembling"
        )
