"""``MLflowSink``: groundwatch's verdicts as MLflow 3 assessments on the traces an app sends to an
MLflow tracking server over OTLP (docs/mlflow.md).

An MLflow server takes OpenTelemetry spans at ``<tracking URI>/v1/traces`` (OTLP/HTTP, the
experiment named by the ``x-mlflow-experiment-id`` header) and files each OTel trace as
``tr-<the 32 hex digits of its trace id>``. An assessment is MLflow's own score object on a trace
(and optionally one of its spans): a name, a value, a source (``CODE``, ``LLM_JUDGE`` or
``HUMAN``, with an id), a rationale and string metadata. MLflow does not read OpenTelemetry's
``gen_ai.evaluation.result`` (neither as a span event nor as a log record: the server has no
``/v1/logs``), so the verdicts reach its assessments table only through its REST API:

- ``POST /api/3.0/mlflow/traces/{trace_id}/assessments`` creates one; the server keeps an
  ``assessment_id`` the client gives, and answers 404 ``RESOURCE_DOES_NOT_EXIST`` while the
  trace has not been ingested (retried for the delivery's ``span_wait_millis``);
- ``PATCH /api/3.0/mlflow/traces/{trace_id}/assessments/{assessment_id}`` updates one.

MLflow has no upsert and no idempotency key: a second create with the same ``assessment_id``
fails (HTTP 500 "constraint violation", the id being the table's primary key). So each write
carries an ``assessment_id`` fixed before its first try (for a verdict, derived from the trace,
the span and the assessment's name; for feedback, random, drawn once), and a create that fails
in any way that may mean "it exists already" is followed by a PATCH of that id: the write lands
once, whether or not an earlier try's reply was lost, and a verdict written again (the same
answer scored twice) updates the assessment instead of adding a second.

The REST API over the standard library (the shared :mod:`._http`), not MLflow's client: four
endpoints are all the sink needs; ``mlflow-skinny`` brings some twenty packages (FastAPI,
uvicorn, the Databricks SDK, GitPython...) into the app for them, and its HTTP layer retries on
its own (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, up to minutes per call) under the delivery's
deadlines, which must stay the only retry policy.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

from .._shared.error_types import ERROR_INVALID_INPUT, ERROR_TIMEOUT
from ._delivery import (
    DONE,
    Outcome,
    Reply,
    Write,
)
from ._http import HttpFailure, HttpReply, failure_reply, join, request, status_reply
from ._sink import DashboardSink

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..runtime.feedback import Pending
    from ..types import Claim, Evaluation, RagRecord
    from ._delivery import DeliverySettings

__all__ = ["MLflowSink"]

# MLflow's own environment variables (mlflow/environment_variables.py), read as its client does.
ENV_TRACKING_URI: Final = "MLFLOW_TRACKING_URI"
ENV_EXPERIMENT_NAME: Final = "MLFLOW_EXPERIMENT_NAME"
ENV_EXPERIMENT_ID: Final = "MLFLOW_EXPERIMENT_ID"
ENV_TOKEN: Final = "MLFLOW_TRACKING_TOKEN"
ENV_USERNAME: Final = "MLFLOW_TRACKING_USERNAME"
ENV_PASSWORD: Final = "MLFLOW_TRACKING_PASSWORD"

EXPERIMENT_HEADER: Final = "x-mlflow-experiment-id"
"""The OTLP request header that names the experiment a trace is filed under."""
OTLP_TRACES_PATH: Final = "/v1/traces"
DEFAULT_EXPERIMENT_ID: Final = "0"
"""MLflow's ``Default`` experiment, which every server has."""

# Assessment names, as PhoenixSink's annotations: plain identifiers, so that MLflow's search
# syntax takes them unquoted (``feedback.hallucination = 'hallucinated'``).
GROUNDEDNESS: Final = "groundedness"
FAITHFULNESS: Final = "faithfulness"
HALLUCINATION: Final = "hallucination"
"""The label (``grounded``, ``hallucinated``, ...): the judge's and a person's, side by side."""

SOURCE_CODE: Final = "CODE"
SOURCE_LLM_JUDGE: Final = "LLM_JUDGE"
SOURCE_HUMAN: Final = "HUMAN"

CODE_JUDGES: Final = frozenset({"local", "semantic", "nli", "hhem", "minicheck", "lettucedetect"})
"""Judges that run code (rules, detector models) on this machine: source type ``CODE``. Any
other judge (``openai`` under any name it is given), and a cascade whose LLM was called, is an
``LLM_JUDGE``."""

_FEEDBACK_SOURCE_TYPES: Final = {
    "human": SOURCE_HUMAN,
    "audit": SOURCE_HUMAN,  # a person's label in the random audit
    "llm_judge": SOURCE_LLM_JUDGE,  # the evaluator types of the GenAI conventions' proposal
    "deterministic": SOURCE_CODE,
}
"""``Monitor.feedback(source=...)`` as MLflow's source type; another system's name is ``CODE``."""
_ASSESSMENTS_PATH = "/api/3.0/mlflow/traces/{trace}/assessments"
_TRACE_PREFIX = "tr-"
_ASSESSMENT_PREFIX = "a-"
_MISSING = "RESOURCE_DOES_NOT_EXIST"
_CLAIMS_NAMED = 5
"""Unsupported or contradicted claims a rationale names one by one; past that, a count."""


class MLflowSink(DashboardSink):
    """Writes each evaluation as MLflow assessments on the answer's span, and each
    ``Monitor.feedback`` as a ``HUMAN`` assessment, in an MLflow 3 tracking server.

    The traces themselves reach MLflow over OTLP from the app's own exporter
    (:attr:`otlp_endpoint` and :meth:`otlp_headers` say where and how); this sink adds, per
    evaluation, the assessments ``groundedness`` and ``faithfulness`` (the scores, when there
    are any) and ``hallucination`` (the label), with source type ``CODE`` for the local and
    detector judges and ``LLM_JUDGE`` for the LLM judge, a rationale naming the unsupported and
    contradicted claims (quoting them only with content capture on), and metadata: ``judge``,
    ``route``, ``audit``, ``hallucination_probability``. Writes happen on a thread of their
    own, in batches, retried with backoff; see :mod:`groundwatch.dashboards`.

    Args:
        tracking_uri: the server, ``http(s)://host:port`` (with a path prefix if it has one);
            default ``MLFLOW_TRACKING_URI``. Credentials come from ``MLFLOW_TRACKING_TOKEN``
            (a bearer token) or ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``
            (basic auth, which wins when both are set, as in MLflow's client); they are never
            shown in a repr, a log line or an error.
        experiment: the experiment's name, for :meth:`otlp_headers`; default
            ``MLFLOW_EXPERIMENT_ID``, then ``MLFLOW_EXPERIMENT_NAME``, then ``Default``.
            Assessments need no experiment: MLflow's trace ids are global.
        source_id: the assessments' ``source.source_id`` prefix (``groundwatch/<judge>``).
        max_queue_size, max_batch_size, schedule_delay_millis, export_timeout_millis,
        retry_window_millis, span_wait_millis: the delivery's bounds
            (:class:`~groundwatch.dashboards.Delivery`).

    Raises:
        ValueError: no tracking URI, or one that is not an ``http(s)`` server (a local
            ``mlruns`` folder or ``sqlite:`` store takes no assessments over HTTP).
    """

    component = "mlflow"

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        *,
        source_id: str = "groundwatch",
        **delivery: Unpack[DeliverySettings],
    ) -> None:
        self.tracking_uri, self._auth = _server(tracking_uri)
        self.experiment = experiment
        self.source_id = source_id
        self._experiment_id: str | None = None
        super().__init__(_AssessmentExporter(self.tracking_uri, self._auth), **delivery)

    # --- where the app's traces go --------------------------------------------------------------

    @property
    def otlp_endpoint(self) -> str:
        """The server's OTLP/HTTP traces endpoint: ``<tracking URI>/v1/traces``."""
        return join(self.tracking_uri, OTLP_TRACES_PATH)

    def otlp_headers(self, timeout_s: float = 10.0) -> dict[str, str]:
        """The headers an OTLP/HTTP span exporter needs to file the app's traces in this sink's
        experiment: ``x-mlflow-experiment-id`` and, with credentials set, ``authorization``.

        Pass them with :attr:`otlp_endpoint` to OpenTelemetry's ``OTLPSpanExporter(endpoint=,
        headers=)``. An experiment given by name is looked up (and created when missing) once,
        on this call: it runs at the app's start-up, not on a request.

        Raises:
            RuntimeError: the server could not be asked or refused (the message names the
                status and MLflow's error code, never the credentials).
        """
        headers = {EXPERIMENT_HEADER: self.experiment_id(timeout_s)}
        if self._auth:
            headers["authorization"] = self._auth
        return headers

    def experiment_id(self, timeout_s: float = 10.0) -> str:
        """The id of this sink's experiment (looked up by name, created when missing; then
        kept).

        Raises:
            RuntimeError: as :meth:`otlp_headers`.
        """
        if self._experiment_id is None:
            self._experiment_id = self._resolve_experiment(timeout_s)
        return self._experiment_id

    def _resolve_experiment(self, timeout_s: float) -> str:
        name = self.experiment
        if name is None:
            from_env = os.environ.get(ENV_EXPERIMENT_ID, "").strip()
            if from_env:
                return from_env
            name = os.environ.get(ENV_EXPERIMENT_NAME, "").strip() or None
        if name is None:
            return DEFAULT_EXPERIMENT_ID
        path = f"/api/2.0/mlflow/experiments/get-by-name?experiment_name={quote(name)}"
        reply = self._call("GET", path, None, timeout_s)
        try:
            if reply.status == 200:
                return str(reply.json()["experiment"]["experiment_id"])
            if reply.status == 404:
                reply = self._call(
                    "POST", "/api/2.0/mlflow/experiments/create", {"name": name}, timeout_s
                )
                if reply.status == 200:
                    return str(reply.json()["experiment_id"])
        except (ValueError, KeyError, TypeError):
            raise RuntimeError(
                f"MLflow at {self.tracking_uri} gave no experiment id for {name!r}: not "
                "MLflow's reply (is the tracking URI an MLflow server?)"
            ) from None
        raise RuntimeError(
            f"MLflow at {self.tracking_uri} did not give experiment {name!r}: HTTP "
            f"{reply.status} {_error_code(reply) or ''}".rstrip()
        )

    def _call(self, method: str, path: str, body: Any, timeout_s: float) -> HttpReply:
        try:
            return request(
                method,
                join(self.tracking_uri, path),
                body=body,
                headers=_auth_headers(self._auth),
                timeout_s=timeout_s,
            )
        except HttpFailure as exc:
            raise RuntimeError(f"MLflow at {self.tracking_uri}: {exc.error_type}") from None

    # --- what the sink writes -----------------------------------------------------------------

    def evaluation_writes(self, record: RagRecord, evaluation: Evaluation) -> list[Write]:
        """``groundedness``, ``faithfulness`` (when scored) and ``hallucination`` on the
        record's span, keyed by trace, span and name (a second verdict on the same answer
        updates them)."""
        if not record.trace_id:
            # Recorded outside any trace: there is no trace in MLflow to assess.
            self.delivery.give_up([Write("", None)], ERROR_INVALID_INPUT)
            return []
        judge = evaluation.judge or "unknown"
        source = {"source_type": _source_type(evaluation), "source_id": f"{self.source_id}/{judge}"}
        metadata = {"judge": judge, "label": evaluation.label}
        if record.route:
            metadata["route"] = record.route
        if evaluation.model:
            metadata["model"] = evaluation.model
        metadata["audit"] = "true" if self.audited(record, evaluation) else "false"
        if evaluation.hallucination_probability is not None:
            metadata["hallucination_probability"] = repr(
                round(evaluation.hallucination_probability, 6)
            )
        if evaluation.error_type:
            metadata["error_type"] = evaluation.error_type
        rationale = self._rationale(evaluation)
        values: list[tuple[str, Any]] = [
            (GROUNDEDNESS, evaluation.groundedness),
            (FAITHFULNESS, evaluation.faithfulness),
            (HALLUCINATION, evaluation.label),
        ]
        writes = []
        for name, value in values:
            if value is None:
                continue
            assessment: dict[str, Any] = {
                "assessment_name": name,
                "source": source,
                "feedback": {"value": value},
                "rationale": rationale,
                "metadata": metadata,
            }
            if evaluation.label == "error":
                assessment["feedback"]["error"] = {
                    "error_code": evaluation.error_type or "error",
                    "error_message": (evaluation.error or "judge failed")[:500],
                }
            key = _verdict_id(record.trace_id, record.span_id, name)
            writes.append(_write(key, record.trace_id, record.span_id, assessment))
        return writes

    def feedback_writes(self, feedback: Pending) -> list[Write]:
        """A person's label as a ``HUMAN`` ``hallucination`` assessment (beside the judge's),
        and their score, when given, under the feedback's name; each with an id drawn once, so
        a retry never duplicates it and two people's feedback stays two assessments."""
        source_type = _FEEDBACK_SOURCE_TYPES.get(feedback.source, SOURCE_CODE)
        source = {"source_type": source_type, "source_id": feedback.source}
        metadata = {
            "feedback_name": feedback.name,
            "feedback_source": feedback.source,
            "judge_label": feedback.judge_label,
        }
        if feedback.route:
            metadata["route"] = feedback.route
        if feedback.audited:
            metadata["audit"] = "true"
        if feedback.probability is not None:
            metadata["hallucination_probability"] = repr(round(feedback.probability, 6))
        base: dict[str, Any] = {"source": source, "metadata": metadata}
        if feedback.comment and self.capture_content:
            base["rationale"] = self.content(feedback.comment)
        values: list[tuple[str, Any]] = [(HALLUCINATION, feedback.label)]
        if feedback.score is not None:
            values.append((feedback.name, feedback.score))
        return [
            _write(
                _ASSESSMENT_PREFIX + uuid.uuid4().hex,
                feedback.trace_id,
                feedback.span_id,
                {**base, "assessment_name": name, "feedback": {"value": value}},
            )
            for name, value in values
        ]

    def _rationale(self, evaluation: Evaluation) -> str:
        """The evaluation's explanation, then the unsupported and contradicted claims: quoted
        with content capture on, by their place in the answer otherwise."""
        parts = [evaluation.explanation] if evaluation.explanation else []
        for verdict in ("contradicted", "unsupported"):
            found = [
                (i, claim)
                for i, claim in enumerate(evaluation.claims, 1)
                if claim.verdict == verdict
            ]
            if not found:
                continue
            named = "; ".join(self._claim(i, claim) for i, claim in found[:_CLAIMS_NAMED])
            more = f"; and {len(found) - _CLAIMS_NAMED} more" if len(found) > _CLAIMS_NAMED else ""
            parts.append(f"{verdict}: {named}{more}")
        return self.content(". ".join(parts)) if self.capture_content else ". ".join(parts)

    def _claim(self, number: int, claim: Claim) -> str:
        if self.capture_content:
            return f'claim {number} "{claim.text}"'
        return f"claim {number}"

    def __repr__(self) -> str:
        return f"MLflowSink(tracking_uri={self.tracking_uri!r}, experiment={self.experiment!r})"


class _AssessmentExporter:
    """Sends a batch of assessments, one request each (MLflow creates them one at a time),
    within the batch's deadline."""

    component = MLflowSink.component

    def __init__(self, tracking_uri: str, auth: str | None) -> None:
        self.tracking_uri = tracking_uri
        self.headers = _auth_headers(auth)

    def export(self, writes: Sequence[Write], timeout_s: float) -> Sequence[Reply]:
        deadline = time.monotonic() + timeout_s
        replies: list[Reply] = []
        for write in writes:
            left = deadline - time.monotonic()
            if left <= 0:
                replies.append(Reply(Outcome.RETRY, ERROR_TIMEOUT))
                continue
            try:
                replies.append(self._upsert(write, deadline))
            except HttpFailure as exc:
                replies.append(failure_reply(exc))
        return replies

    def _upsert(self, write: Write, deadline: float) -> Reply:
        """Create the assessment; where the create may have failed because it exists (an earlier
        try whose reply was lost), update it by its id instead."""
        trace, body = write.body
        path = _ASSESSMENTS_PATH.format(trace=trace)
        created = request(
            "POST",
            join(self.tracking_uri, path),
            body={"assessment": body},
            headers=self.headers,
            timeout_s=max(0.001, deadline - time.monotonic()),
        )
        if created.status == 200:
            return DONE
        code = _error_code(created)
        if created.status == 404 and code == _MISSING:
            return Reply(Outcome.NOT_INGESTED)  # the trace is not there (yet)
        if created.status < 500 and created.status != 409:
            return status_reply(created.status)  # refused (401, 403, 400): retried only if 408/429
        # 5xx (MLflow's answer to a duplicate id is a 500 "constraint violation") or 409: the
        # assessment may exist; an update by id settles it either way.
        fields = [f for f in ("feedback", "rationale", "metadata") if f in body]
        updated = request(
            "PATCH",
            join(self.tracking_uri, f"{path}/{write.key}"),
            body={"assessment": {f: body[f] for f in fields}, "update_mask": ",".join(fields)},
            headers=self.headers,
            timeout_s=max(0.001, deadline - time.monotonic()),
        )
        if updated.status == 200:
            return DONE
        return status_reply(created.status)


# --- helpers ------------------------------------------------------------------------------------


def _write(key: str, trace_id: int, span_id: int, assessment: dict[str, Any]) -> Write:
    trace = f"{_TRACE_PREFIX}{trace_id:032x}"
    assessment = {"assessment_id": key, "trace_id": trace, **assessment}
    if span_id:
        assessment["span_id"] = f"{span_id:016x}"
    return Write(key=key, body=(trace, assessment), kind="assessment")


def _verdict_id(trace_id: int, span_id: int, name: str) -> str:
    """The assessment id of groundwatch's verdict ``name`` on one answer's span: the same on
    every try and in every process that scores it (``a-`` and 32 hex digits, as MLflow's own)."""
    digest = hashlib.sha256(f"groundwatch/{trace_id:032x}/{span_id:016x}/{name}".encode())
    return _ASSESSMENT_PREFIX + digest.hexdigest()[:32]


def _source_type(evaluation: Evaluation) -> str:
    """``CODE`` for the local and detector judges; ``LLM_JUDGE`` for an LLM, and for a cascade
    whose LLM was asked (its tokens show in the usage)."""
    name = evaluation.judge
    parts = name[len("cascade(") : -1].split(",") if name.startswith("cascade(") else [name]
    usage = evaluation.usage
    asked_llm = usage is not None and (usage.input_tokens or usage.output_tokens)
    if all(part.strip() in CODE_JUDGES for part in parts) or (
        name.startswith("cascade(") and not asked_llm
    ):
        return SOURCE_CODE
    return SOURCE_LLM_JUDGE


def _error_code(reply: HttpReply) -> str | None:
    """MLflow's ``error_code`` in an error reply (``None`` when the body is not MLflow's)."""
    try:
        body = reply.json()
    except ValueError:
        return None
    code = body.get("error_code") if isinstance(body, Mapping) else None
    return code if isinstance(code, str) else None


def _server(tracking_uri: str | None) -> tuple[str, str | None]:
    """The server's base URL (credentials in it moved out) and the ``authorization`` value."""
    import base64

    uri = (tracking_uri or os.environ.get(ENV_TRACKING_URI, "")).strip()
    if not uri:
        raise ValueError(
            f"MLflowSink needs a tracking server: pass tracking_uri= or set {ENV_TRACKING_URI} "
            "(http://host:5000)"
        )
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"MLflowSink writes to an MLflow tracking server over HTTP; {ENV_TRACKING_URI} or "
            f"tracking_uri must be http(s)://host:port, not a {parts.scheme or 'local'!s} store"
        )
    username = parts.username or os.environ.get(ENV_USERNAME)
    password = parts.password or os.environ.get(ENV_PASSWORD)
    netloc = parts.netloc.rpartition("@")[2]
    base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    if username and password:
        pair = f"{username}:{password}".encode()
        return base, "Basic " + base64.b64encode(pair).decode()
    token = os.environ.get(ENV_TOKEN)
    return base, f"Bearer {token}" if token else None


def _auth_headers(auth: str | None) -> dict[str, str]:
    return {"authorization": auth} if auth else {}
