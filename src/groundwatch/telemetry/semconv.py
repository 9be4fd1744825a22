"""Every telemetry name groundwatch emits, defined once (docs/runtime.md: "What comes out").

The ``gen_ai.*`` and ``error.type`` names follow the OpenTelemetry semantic conventions; the
``groundwatch.*`` names are ours.
"""

from __future__ import annotations

from typing import Final

from .._shared import error_types as _et
from ..rates._sums import BY_FIELD as _SUMS

INSTRUMENTATION_NAME: Final = "groundwatch"

# --- span ----------------------------------------------------------------------------------------
SPAN_EVALUATION: Final = "groundwatch.evaluation"

# --- attributes ----------------------------------------------------------------------------------
GROUNDWATCH_LABEL: Final = "groundwatch.label"
GROUNDWATCH_FAITHFULNESS: Final = "groundwatch.faithfulness"
GROUNDWATCH_GROUNDEDNESS: Final = "groundwatch.groundedness"
GROUNDWATCH_CLAIMS_SUPPORTED: Final = "groundwatch.claims.supported"
GROUNDWATCH_CLAIMS_INFERRED: Final = "groundwatch.claims.inferred"
GROUNDWATCH_CLAIMS_UNSUPPORTED: Final = "groundwatch.claims.unsupported"
GROUNDWATCH_CLAIMS_CONTRADICTED: Final = "groundwatch.claims.contradicted"
GROUNDWATCH_CLAIMS_BY_VERDICT: Final = {
    "supported": GROUNDWATCH_CLAIMS_SUPPORTED,
    "inferred": GROUNDWATCH_CLAIMS_INFERRED,
    "unsupported": GROUNDWATCH_CLAIMS_UNSUPPORTED,
    "contradicted": GROUNDWATCH_CLAIMS_CONTRADICTED,
}
GROUNDWATCH_JUDGE: Final = "groundwatch.judge"
GROUNDWATCH_ROUTE: Final = "groundwatch.route"
GROUNDWATCH_SAMPLING_RATE: Final = "groundwatch.sampling.rate"
GROUNDWATCH_VERDICT: Final = "groundwatch.verdict"
GROUNDWATCH_DECISION: Final = "groundwatch.decision"
GROUNDWATCH_RECORD_ID: Final = "groundwatch.record.id"
GROUNDWATCH_EVIDENCE_REJECTED: Final = "groundwatch.evidence.rejected"
GROUNDWATCH_TRUNCATED: Final = "groundwatch.truncated"
"""``true`` when the record's inputs were cut to the size caps before judging: on the evaluation
span and on its ``groundwatch.evaluations`` point (absent when nothing was cut)."""
GROUNDWATCH_HALLUCINATION_PROBABILITY: Final = "groundwatch.hallucination.probability"
"""The judge's probability that a person would call the answer hallucinated under the label
policy (``Evaluation.hallucination_probability``): on the evaluation span and its events, absent
for an ``error`` evaluation."""
GROUNDWATCH_AUDIT: Final = "groundwatch.audit"
"""``true`` on the evaluation span and its events when the trace is in the random audit
(``Monitor(audit_rate=...)``, docs/feedback.md "Audits"); absent otherwise."""
GROUNDWATCH_COMPONENT: Final = "groundwatch.component"
"""Where an internal error happened (``groundwatch.errors``): ``record``, ``on_result``, ..."""

# Content attributes: only with capture_content=True, after redact, capped in size.
GROUNDWATCH_CONTENT_QUESTION: Final = "groundwatch.content.question"
GROUNDWATCH_CONTENT_ANSWER: Final = "groundwatch.content.answer"
GROUNDWATCH_CONTENT_CLAIMS: Final = "groundwatch.content.claims"
"""JSON list of ``{"text", "verdict", "quotes", "sources"}``, one entry per claim; ``sources``
names each quote's passage (``passage 2``, ``tool lookup_policy``)."""

GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""The conversation (thread, session) a record's turn belongs to: a span attribute only, never
a metric attribute (one series per conversation would be unbounded). Integrations hand it over
in the record's ``attributes``."""
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
"""The completion an evaluation is about, when a record's ``attributes`` name it (``groundwatch
serve`` takes it from the scored LLM span): on the span and on both ``gen_ai.evaluation.result``
events, which the GenAI conventions ask to carry it when they are not parented to the evaluated
operation's span."""
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
GEN_AI_EVALUATION_EVALUATOR_TYPE: Final = "gen_ai.evaluation.evaluator.type"
"""Who gave an evaluation: ``human``, ``llm_judge``, ``deterministic``. Proposed in the GenAI
semantic conventions (open-telemetry/semantic-conventions-genai PR #359), not yet in their
registry; set on feedback events (docs/feedback.md)."""
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
EXCEPTION_TYPE: Final = "exception.type"
"""The class of the exception a judge raised, beside ``error.type=internal`` on the evaluation's
span (OpenTelemetry's exception conventions)."""

EVALUATION_FAITHFULNESS: Final = "faithfulness"
EVALUATION_GROUNDEDNESS: Final = "groundedness"
TOKEN_TYPE_INPUT: Final = "input"
TOKEN_TYPE_OUTPUT: Final = "output"

# --- log event -----------------------------------------------------------------------------------
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"

# --- metrics -------------------------------------------------------------------------------------
METRIC_EVALUATION_SCORE: Final = "groundwatch.evaluation.score"
METRIC_EVALUATIONS: Final = "groundwatch.evaluations"
METRIC_CLAIMS: Final = "groundwatch.claims"
METRIC_RECORDS: Final = "groundwatch.records"
METRIC_JUDGE_DURATION: Final = "groundwatch.judge.duration"
METRIC_JUDGE_TOKENS: Final = "groundwatch.judge.tokens"
METRIC_QUEUE_SIZE: Final = "groundwatch.queue.size"
METRIC_QUEUE_LAG: Final = "groundwatch.queue.lag"
"""``groundwatch worker``: entries of the stream not yet delivered to the consumer group."""
METRIC_FEEDBACK: Final = "groundwatch.feedback"
"""``Monitor.feedback`` calls, by the judge's label (``groundwatch.label``; ``unknown``: no
verdict remembered for the trace), the person's (``groundwatch.feedback.label``) and
``groundwatch.route``; ``error.type=invalid_input`` alone for a call that could not be read."""
GROUNDWATCH_FEEDBACK_LABEL: Final = "groundwatch.feedback.label"
FEEDBACK_JUDGE_UNKNOWN: Final = "unknown"
"""``groundwatch.label`` of feedback on a trace the monitor has no verdict for."""
GROUNDWATCH_FEEDBACK_SOURCE: Final = "groundwatch.feedback.source"
"""Who gave the feedback (``human`` by default, or another system's name)."""
GROUNDWATCH_FEEDBACK_AUDIT_SOURCE: Final = "audit"
"""``source`` of a label from the random audit (``Monitor.feedback(source="audit")``, ``groundwatch
feedback import``): only such a label, on an audited trace, enters the ``groundwatch.audit.*``
counters (docs/feedback.md "Audits")."""

# --- the hallucination-rate estimate's sums (docs/rates.md; all counters, by groundwatch.route
# and groundwatch.judge, so that Prometheus adds them across replicas). Each name is declared
# beside its RateTotals field and its Prometheus record in groundwatch.rates._sums.SUMS, the only
# place the three meet; these constants read it. -------------------------------------------------
METRIC_RATE_SCORED: Final = _SUMS["scored"].counter
"""Judged answers (``label`` not ``error``; ``always_score`` records left out: not a random
sample of the traffic)."""
METRIC_RATE_FLAGGED: Final = _SUMS["flagged"].counter
"""Of those, labelled ``hallucinated`` by the judge."""
METRIC_RATE_PROBABILITY: Final = _SUMS["probability_sum"].counter
"""Sum of ``hallucination_probability`` over them (the flag, 0 or 1, where it is unknown)."""
METRIC_RATE_PROBABILITY_SQUARES: Final = _SUMS["probability_square_sum"].counter
"""Sum of its squares."""
METRIC_AUDIT_LABELLED: Final = _SUMS["labelled"].counter
"""Audited answers that received a person's label (``source="audit"``)."""
METRIC_AUDIT_LABEL_SUM: Final = _SUMS["label_sum"].counter
"""Of those, labelled ``hallucinated`` by the person."""
METRIC_AUDIT_FLAGGED: Final = _SUMS["labelled_flagged"].counter
"""Of those, flagged by the judge."""
METRIC_AUDIT_LABEL_FLAG: Final = _SUMS["label_flag_sum"].counter
"""Of those, labelled ``hallucinated`` by the person and flagged by the judge."""
METRIC_AUDIT_PROBABILITY: Final = _SUMS["labelled_probability_sum"].counter
"""Sum of the judge's probability ``f`` over labelled audited answers."""
METRIC_AUDIT_PROBABILITY_SQUARES: Final = _SUMS["labelled_probability_square_sum"].counter
"""Sum of ``f**2`` over them."""
METRIC_AUDIT_LABEL_PROBABILITY: Final = _SUMS["label_probability_sum"].counter
"""Sum of ``y * f`` over them (``y``: 1 for the person's ``hallucinated``, else 0)."""
METRIC_ALERTS: Final = "groundwatch.alerts"
"""Emitted by the alerts engine, with ``gen_ai.evaluation.name`` and ``groundwatch.route``."""

# The runtime's accounting and health (docs/runtime.md "Accounting: nothing is lost silently"):
METRIC_DROPPED: Final = "groundwatch.evaluations.dropped"
"""Sampled records never scored (``error.type``: ``shutdown``, ``fork``, ``internal``)."""
METRIC_ERRORS: Final = "groundwatch.errors"
"""groundwatch's own failures, by ``groundwatch.component`` and ``error.type``."""
METRIC_JUDGE_ESCALATIONS: Final = "groundwatch.judge.escalations"
"""CascadeJudge answers, by ``groundwatch.escalated`` (sent to the second judge or not)."""
METRIC_JUDGE_ESCALATIONS_UNIT: Final = "{evaluation}"
GROUNDWATCH_ESCALATED: Final = "groundwatch.escalated"

# --- alerts (groundwatch.alerts; docs/alerts.md "Alerts on score drops") --------------------------
EVENT_ALERT: Final = "groundwatch.alert"
GROUNDWATCH_ALERT_KIND: Final = "groundwatch.alert.kind"
"""``fired`` or ``resolved``."""
GROUNDWATCH_ALERT_METHOD: Final = "groundwatch.alert.method"
GROUNDWATCH_ALERT_BASELINE: Final = "groundwatch.alert.baseline"
GROUNDWATCH_ALERT_CURRENT: Final = "groundwatch.alert.current"
GROUNDWATCH_ALERT_EVALUATIONS: Final = "groundwatch.alert.evaluations"
GROUNDWATCH_ALERT_THRESHOLD: Final = "groundwatch.alert.threshold"

# --- integrations: record attributes they add ----------------------------------------------------
GROUNDWATCH_LANGCHAIN_RUN_ID: Final = "groundwatch.langchain.run_id"
"""The root LangChain run the record came from."""
GROUNDWATCH_CONTEXTS_DROPPED: Final = "groundwatch.contexts.dropped"
"""Retrieved passages past the cap that were not recorded."""
GROUNDWATCH_CONTEXTS_TOOLS: Final = "groundwatch.contexts.tools"
"""Tool outputs among the record's passages (agents)."""
GROUNDWATCH_CONTEXTS_UNREADABLE: Final = "groundwatch.contexts.unreadable"
"""Tool outputs left out because they could not be read as text (``None``, bytes, an object
with only Python's default repr)."""
GROUNDWATCH_TOOL_ERRORS: Final = "groundwatch.tool.errors"
"""Tool calls of the run that raised (an error is not a passage)."""
LLAMA_INDEX_ENGINE: Final = "llama_index.engine"
"""The LlamaIndex engine or agent class a record came from (``RetrieverQueryEngine``)."""
LLAMA_INDEX_STREAM: Final = "llama_index.stream"
"""A streamed LlamaIndex answer: ``complete`` (consumed to its end) or ``closed`` (stopped early;
the text shown so far is recorded)."""
# error.type of an integration's ``record_failure`` (docs/integrations.md); a run that failed
# with an exception of the framework's own may also carry the exception's class name.
ERROR_NO_ANSWER: Final = "no_answer"
"""The run retrieved and a model ran, but its output held no answer that could be read."""
ERROR_EVICTED: Final = "evicted"
"""The run was given up unfinished (too many runs open at once, or open too long)."""
ERROR_CANCELLED: Final = "cancelled"
"""The run was cancelled, or its streamed answer abandoned before the run ended (or never read)."""
ERROR_EXTRACTOR: Final = "extractor_error"
"""An extractor (the integration's own or one passed to it) raised on the run's input or output."""
ERROR_RETRIEVER: Final = "retriever_error"
ERROR_LLM: Final = "llm_error"
ERROR_CHAIN: Final = "chain_error"

SCORE_BUCKETS: Final = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DURATION_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

# error.type values of a failed evaluation: defined on the ground floor
# (groundwatch._shared.error_types)
# for the judges and the telemetry alike, re-exported here with every other telemetry name.
ERROR_TIMEOUT: Final = _et.ERROR_TIMEOUT
ERROR_SHUTDOWN: Final = _et.ERROR_SHUTDOWN
ERROR_FORK: Final = _et.ERROR_FORK
ERROR_INVALID_INPUT: Final = _et.ERROR_INVALID_INPUT
ERROR_SAMPLER: Final = _et.ERROR_SAMPLER
ERROR_INTERNAL: Final = _et.ERROR_INTERNAL
ERROR_HTTP_PREFIX: Final = _et.ERROR_HTTP_PREFIX
ERROR_CONNECTION: Final = _et.ERROR_CONNECTION
ERROR_RATE_LIMITED: Final = _et.ERROR_RATE_LIMITED
ERROR_CIRCUIT_OPEN: Final = _et.ERROR_CIRCUIT_OPEN
ERROR_FORMAT_UNSUPPORTED: Final = _et.ERROR_FORMAT_UNSUPPORTED
ERROR_BAD_REPLY: Final = _et.ERROR_BAD_REPLY
ERROR_TRUNCATED: Final = _et.ERROR_TRUNCATED
ERROR_REFUSED: Final = _et.ERROR_REFUSED
ERROR_TRANSPORT: Final = _et.ERROR_TRANSPORT
ERROR_TYPES: Final = _et.ERROR_TYPES
ERROR_QUEUE_FULL: Final = _et.ERROR_QUEUE_FULL
ERROR_SPAN_NOT_FOUND: Final = _et.ERROR_SPAN_NOT_FOUND
DELIVERY_ERROR_TYPES: Final = _et.DELIVERY_ERROR_TYPES

DROPPED_ERROR_TYPES: Final = (
    ERROR_SHUTDOWN,
    ERROR_FORK,
    ERROR_INTERNAL,
    ERROR_TRANSPORT,
    ERROR_INVALID_INPUT,
)
"""The ``error.type`` values of ``groundwatch.evaluations.dropped``, each published at 0 from the
start: a counter that appeared only with its first increment would show "No data" on a healthy
service, and ``increase()`` would miss that first increment."""

ERROR_COMPONENTS: Final = (
    "record",
    "record_decision",
    "record_failure",
    "force_flush",
    "shutdown",
    "sampler",
    "judge",
    "scoring",
    "worker",
    "on_result",
    "redact",
    "telemetry",
    "telemetry span",
    "telemetry events",
    "telemetry user attributes",
    "telemetry score attributes",
    "telemetry record attributes",
    "telemetry content attributes",
    "alerts",
    "on_alert",
    "feedback",
    "dataset",
    "phoenix",
    "mlflow",
)
"""The runtime's places of failure (``groundwatch.component`` of ``groundwatch.errors``), each
published at 0 from the start, without ``error.type`` (an exception's class name, known only
when it happens): ``sum by (groundwatch_component)`` reads 0 on a healthy service."""

# --- groundwatch serve (docs/serve.md) -----------------------------------------------------------
METRIC_SERVE_SPANS: Final = "groundwatch.serve.spans"
"""Spans received over OTLP, by ``groundwatch.serve.outcome``, each counted once on arrival:
``accepted`` (taken for assembly), ``rejected`` (invalid, reported in the response's partial
success), ``own`` (our evaluation spans coming back: loop protection), ``late`` (for a trace
already assembled), ``not_sampled`` (of a trace the intake sampling left out); and
``evicted``: accepted spans lost later to a cap (the per-trace span cap, or with an evicted
trace)."""
METRIC_SERVE_TRACES: Final = "groundwatch.serve.traces"
"""Traces leaving assembly, by ``groundwatch.serve.outcome``: ``interaction`` (at least one
interaction handed to the monitor), ``no_interaction`` (nothing to score in it), ``evicted``
(over the pending-traces cap), ``not_sampled`` (left out by the intake sampling, on its first
span or log record)."""
METRIC_SERVE_LOG_RECORDS: Final = "groundwatch.serve.log_records"
"""Log records received over OTLP (``POST /v1/logs``), by ``groundwatch.serve.outcome``, each
counted once on arrival: ``accepted`` (a GenAI content event, ``gen_ai.user.message`` or
``gen_ai.choice``, held for its trace), ``ignored`` (any other log record), ``rejected``
(a GenAI event without a valid trace and span id), ``own`` (our evaluation events coming
back), ``late``, ``not_sampled``; and later ``evicted`` (lost to a cap) or ``unmatched`` (its
span was not among the trace's stored spans when the trace completed)."""
METRIC_SERVE_PENDING: Final = "groundwatch.serve.pending_traces"
METRIC_SERVE_REQUESTS: Final = "groundwatch.serve.requests"
"""OTLP export requests, by ``http.response.status_code``; those refused 401 (gRPC
``UNAUTHENTICATED``) also by ``error.type``: ``missing_token``, ``invalid_token`` or
``missing_client_certificate``."""
SERVE_MISSING_TOKEN: Final = "missing_token"
"""``error.type`` of a request refused for want of an ``authorization: Bearer`` header."""
SERVE_INVALID_TOKEN: Final = "invalid_token"
"""``error.type`` of a request refused for a bearer token serve does not accept (RFC 6750's
error code of the same name)."""
SERVE_MISSING_CLIENT_CERTIFICATE: Final = "missing_client_certificate"
"""``error.type`` of an OTLP/HTTP request without a client certificate under mutual TLS (the
handshake lets it through so that the probes answer; the export is refused)."""
METRIC_SERVE_SKIPPED: Final = "groundwatch.serve.skipped"
"""Attributes or events an extractor could not read (a counted skip, the rest of the span is
kept), by ``groundwatch.component`` (the extractor)."""
GROUNDWATCH_SERVE_OUTCOME: Final = "groundwatch.serve.outcome"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
GROUNDWATCH_SERVE_SOURCE: Final = "groundwatch.serve.source"
"""On the evaluation span: the conventions the interaction was read from (``openinference``,
``openllmetry``)."""
GROUNDWATCH_SERVE_LLM_SPAN_ID: Final = "groundwatch.serve.llm_span_id"
"""On the evaluation span: the LLM span whose answer was scored (16 hex digits)."""
