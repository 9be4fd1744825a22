"""``PhoenixSink``: groundwatch's verdicts as Arize Phoenix's own annotations (docs/phoenix.md).

Phoenix reads a score only as an annotation: it ingests OTLP traces, not logs, so the
``gen_ai.evaluation.result`` events every monitor emits never reach it, and it turns no span
attribute or span event into an annotation (read in ``arize-phoenix`` 20's server: the span
insertion stores events as they are; annotations come only through ``/v1/span_annotations``,
``/v1/document_annotations`` and ``/v1/trace_annotations``). This sink writes them there, on
the span the record was made under (the chain's or query engine's root span, by its OTel span
id):

- ``groundedness`` and ``faithfulness``: the score, the label, the explanation;
- ``hallucination``: the label (``grounded``, ``hallucinated``, ...) and the judge's
  ``hallucination_probability`` as its score;

each with annotator kind ``LLM`` when a language model judged (tokens used) and ``CODE`` for the
local and detector judges, metadata (judge, model, route, audit flag, probability, claim
counts, record id) and the identifier ``groundwatch``: Phoenix upserts on (name, span,
identifier), so a retried write, or the same answer scored again, updates the annotation
instead of adding one. Each retrieved document of the trace's retriever span that the record's
passages came from gets a ``support`` document annotation: whether it backed a claim, and
which (Phoenix keys document annotations on name, span and position, so they upsert too).
``Monitor.feedback`` becomes a ``HUMAN`` annotation on the same span (a trace annotation when
no span is known), one per feedback call.

Configuration, as Phoenix's own client reads it: the endpoint from ``PHOENIX_ENDPOINT``, else
``PHOENIX_COLLECTOR_ENDPOINT`` (its ``/v1/traces`` path dropped), else
``http://localhost:6006``; the project from ``PHOENIX_PROJECT_NAME`` (``default``); headers from
``PHOENIX_CLIENT_HEADERS`` (``k=v,k2=v2``, URL-encoded) and ``PHOENIX_API_KEY`` as a bearer token.
``OTEL_EXPORTER_OTLP_ENDPOINT``, which Phoenix's client also falls back to, is not read: in a
groundwatch deployment it usually names a collector, not Phoenix. Credentials are never printed
(the repr shows the endpoint and project only).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._shared.error_types import ERROR_BAD_REPLY, ERROR_INVALID_INPUT
from ._delivery import DONE, Outcome, Reply, Write
from ._http import HttpFailure, failure_reply, join, request, status_reply
from ._sink import DashboardSink

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..runtime.feedback import Pending
    from ..types import Evaluation, RagRecord
    from ._delivery import DeliverySettings

__all__ = ["PhoenixSink"]

ENDPOINT_VARIABLES = ("PHOENIX_ENDPOINT", "PHOENIX_COLLECTOR_ENDPOINT")
"""Where the endpoint is read from, in Phoenix's own client's order."""
PROJECT_VARIABLE = "PHOENIX_PROJECT_NAME"
API_KEY_VARIABLE = "PHOENIX_API_KEY"
HEADERS_VARIABLE = "PHOENIX_CLIENT_HEADERS"
DEFAULT_ENDPOINT = "http://localhost:6006"
DEFAULT_PROJECT = "default"

IDENTIFIER = "groundwatch"
"""The identifier of groundwatch's own annotations: one per span and name, updated in place."""
GROUNDEDNESS = "groundedness"
FAITHFULNESS = "faithfulness"
HALLUCINATION = "hallucination"
"""The annotation carrying the label, with ``hallucination_probability`` as its score."""
SUPPORT = "support"
"""The document annotation: whether the document backed a claim of the answer."""

SPAN, DOCUMENTS, TRACE = "span", "documents", "trace"
"""The write kinds: a span annotation, a record's document annotations (found on the delivery
thread, where the retriever span is looked up), a trace annotation (feedback without a span)."""

_MISSING_SPANS = "Spans with IDs "
"""How Phoenix's 404 names the spans it does not have: ``Spans with IDs a, b do not exist.``"""


def _config_endpoint() -> str:
    for name in ENDPOINT_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            value = value.rstrip("/")
            return value[: -len("/v1/traces")] if value.endswith("/v1/traces") else value
    return DEFAULT_ENDPOINT


def _config_headers() -> dict[str, str]:
    from opentelemetry.util.re import parse_env_headers

    headers = dict(parse_env_headers(os.environ.get(HEADERS_VARIABLE, ""), liberal=True))
    key = os.environ.get(API_KEY_VARIABLE, "").strip()
    if key and "authorization" not in {k.lower() for k in headers}:
        headers["authorization"] = f"Bearer {key}"
    return headers


def annotator_kind(evaluation: Evaluation) -> str:
    """``LLM`` when a language model judged the answer (it used tokens: the LLM judge, or a
    cascade that escalated to it), ``CODE`` for the local and detector judges."""
    usage = evaluation.usage
    if usage is not None and (usage.input_tokens or usage.output_tokens or usage.calls):
        return "LLM"
    return "LLM" if evaluation.judge.startswith("openai") else "CODE"


class PhoenixSink(DashboardSink):
    """Write each evaluation into Arize Phoenix as span and document annotations.

    Pass it as (or among) a monitor's ``on_result``; ``serve --sink phoenix`` and
    ``worker --sink phoenix`` build one from the environment. Writes leave on a thread of
    their own in batches (``docs/dashboards.md``: queue, retries, deadlines, what is counted).

    Args:
        endpoint: Phoenix's base URL (default: ``PHOENIX_ENDPOINT``,
            ``PHOENIX_COLLECTOR_ENDPOINT``, ``http://localhost:6006``).
        project: the project the app's traces go to (default ``PHOENIX_PROJECT_NAME`` or
            ``default``); the retriever spans are looked up there.
        headers: extra request headers (default from ``PHOENIX_CLIENT_HEADERS`` and
            ``PHOENIX_API_KEY``).
        documents: write a ``support`` annotation on each retrieved document (one span
            look-up per record).
        **delivery: the delivery's bounds (``max_queue_size``, ``max_batch_size``,
            ``schedule_delay_millis``, ``export_timeout_millis``, ``retry_window_millis``,
            ``span_wait_millis``).
    """

    component = "phoenix"

    def __init__(
        self,
        endpoint: str | None = None,
        project: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        documents: bool = True,
        **delivery: Unpack[DeliverySettings],
    ) -> None:
        self.endpoint = (endpoint or _config_endpoint()).rstrip("/")
        self.project = project or os.environ.get(PROJECT_VARIABLE, "").strip() or DEFAULT_PROJECT
        self.documents = documents
        self.exporter = PhoenixExporter(
            self.endpoint, self.project, dict(_config_headers() if headers is None else headers)
        )
        super().__init__(self.exporter, **delivery)

    def __repr__(self) -> str:
        return f"PhoenixSink(endpoint={self.endpoint!r}, project={self.project!r})"

    # --- evaluations (the monitor's worker thread) ----------------------------------------------

    def evaluation_writes(self, record: RagRecord, evaluation: Evaluation) -> list[Write]:
        if not record.span_id:
            # Recorded outside any trace: there is no span in Phoenix to annotate.
            self.delivery.give_up([Write("", None)], ERROR_INVALID_INPUT)
            return []
        span_id = f"{record.span_id:016x}"
        kind = annotator_kind(evaluation)
        explanation = self._explanation(evaluation)
        counts = evaluation.verdict_counts
        metadata: dict[str, Any] = {
            "judge": evaluation.judge,
            "model": evaluation.model,
            "route": record.route,
            "audit": self.audited(record, evaluation),
            "hallucination_probability": evaluation.hallucination_probability,
            "claims": dict(counts),
            "record_id": record.record_id,
            "truncated": evaluation.truncated,
        }
        if evaluation.error_type:
            metadata["error_type"] = evaluation.error_type
        writes = [
            _span_write(span_id, name, kind, evaluation.label, score, explanation, metadata)
            for name, score in (
                (GROUNDEDNESS, evaluation.groundedness),
                (FAITHFULNESS, evaluation.faithfulness),
                (HALLUCINATION, evaluation.hallucination_probability),
            )
        ]
        if self.documents and record.trace_id and evaluation.claims:
            support = _document_support(evaluation)
            texts = [p.text for p in record.passages]
            writes.append(
                Write(
                    key=f"{span_id}:{SUPPORT}",
                    kind=DOCUMENTS,
                    body={
                        "trace_id": f"{record.trace_id:032x}",
                        "span_id": span_id,
                        "kind": kind,
                        "passages": texts,
                        "support": support,
                    },
                )
            )
        return writes

    def _explanation(self, evaluation: Evaluation) -> str:
        """The judge's sentence, then the claims that were not backed: quoted (redacted,
        capped) with content capture on, by number and place in the answer without it."""
        if evaluation.label == "error":
            if self.capture_content:
                return self.content(evaluation.explanation)
            return f"judge failed: {evaluation.error_type or 'error'}"
        parts = [evaluation.explanation] if evaluation.explanation else []
        for verdict in ("unsupported", "contradicted"):
            named = [
                self._claim_name(i, claim)
                for i, claim in enumerate(evaluation.claims)
                if claim.verdict == verdict
            ]
            if named:
                parts.append(f"{verdict}: {'; '.join(named)}")
        text = ". ".join(parts)
        return self.content(text) if self.capture_content else text

    def _claim_name(self, index: int, claim: Any) -> str:
        where = ""
        if claim.verdict == "contradicted" and claim.evidence:
            where = f" (contradicted by {claim.evidence[0].name})"
        if self.capture_content:
            return f"claim {index + 1} “{claim.text}”{where}"
        span = f" (answer[{claim.start}:{claim.end}])" if claim.start is not None else ""
        return f"claim {index + 1}{span}{where}"

    # --- feedback (the monitor's feedback thread) -----------------------------------------------

    def feedback_writes(self, feedback: Pending) -> list[Write]:
        result: dict[str, Any] = {"label": feedback.label}
        if feedback.score is not None:
            result["score"] = feedback.score
        if feedback.comment is not None and self.capture_content:
            result["explanation"] = self.content(feedback.comment)
        metadata = {
            "source": feedback.source,
            "judge_label": feedback.judge_label,
            "route": feedback.route,
            "audit": feedback.audited,
        }
        identifier = f"groundwatch.feedback:{feedback.source}:{feedback.timestamp_ns}"
        body: dict[str, Any] = {
            "name": feedback.name,
            "annotator_kind": "HUMAN",
            "result": result,
            "metadata": metadata,
            "identifier": identifier,
        }
        if feedback.span_id:
            body["span_id"] = f"{feedback.span_id:016x}"
            return [Write(key=f"{body['span_id']}:{identifier}", body=body, kind=SPAN)]
        body["trace_id"] = f"{feedback.trace_id:032x}"
        return [Write(key=f"{body['trace_id']}:{identifier}", body=body, kind=TRACE)]


def _span_write(
    span_id: str,
    name: str,
    kind: str,
    label: str,
    score: float | None,
    explanation: str,
    metadata: dict[str, Any],
) -> Write:
    result: dict[str, Any] = {"label": label, "explanation": explanation}
    if score is not None:
        result["score"] = score
    body = {
        "span_id": span_id,
        "name": name,
        "annotator_kind": kind,
        "result": result,
        "metadata": metadata,
        "identifier": IDENTIFIER,
    }
    return Write(key=f"{span_id}:{name}:{IDENTIFIER}", body=body, kind=SPAN)


def _document_support(evaluation: Evaluation) -> dict[int, dict[str, list[int]]]:
    """Per passage index, the claims (numbered from 1) its evidence supported (or inferred)
    and contradicted."""
    support: dict[int, dict[str, list[int]]] = {}
    for i, claim in enumerate(evaluation.claims):
        if claim.verdict not in ("supported", "inferred", "contradicted"):
            continue
        role = "contradicted" if claim.verdict == "contradicted" else "supported"
        for evidence in claim.evidence:
            entry = support.setdefault(evidence.passage, {"supported": [], "contradicted": []})
            if i + 1 not in entry[role]:
                entry[role].append(i + 1)
    return support


class PhoenixExporter:
    """Sends a batch of writes to Phoenix's REST API (the delivery thread only)."""

    component = "phoenix"

    def __init__(self, endpoint: str, project: str, headers: dict[str, str]) -> None:
        self.endpoint = endpoint
        self.project = project
        self._headers = headers

    def __repr__(self) -> str:  # headers hold credentials: never shown
        return f"PhoenixExporter(endpoint={self.endpoint!r}, project={self.project!r})"

    def export(self, writes: Sequence[Write], timeout_s: float) -> Sequence[Reply]:
        replies: list[Reply | None] = [None] * len(writes)
        by_kind: dict[str, list[int]] = {}
        for i, write in enumerate(writes):
            by_kind.setdefault(write.kind, []).append(i)
        for kind, path in ((SPAN, "v1/span_annotations"), (TRACE, "v1/trace_annotations")):
            if kind in by_kind:
                indexes = by_kind[kind]
                got = self._annotate(path, [writes[i] for i in indexes], timeout_s)
                for i, reply in zip(indexes, got, strict=True):
                    replies[i] = reply
        for i in by_kind.get(DOCUMENTS, ()):
            replies[i] = self._documents(writes[i], timeout_s)
        return [r if r is not None else Reply(Outcome.FAILED, ERROR_BAD_REPLY) for r in replies]

    def _post(self, path: str, data: list[Any], timeout_s: float) -> Any:
        return request(
            "POST",
            join(self.endpoint, f"{path}?sync=true"),
            body={"data": data},
            headers=self._headers,
            timeout_s=timeout_s,
        )

    def _annotate(self, path: str, writes: list[Write], timeout_s: float) -> list[Reply]:
        """One POST for the batch; when Phoenix lacks some of its spans (404 naming them),
        those wait for ingestion and the rest are sent again without them."""
        try:
            reply = self._post(path, [w.body for w in writes], timeout_s)
        except HttpFailure as failure:
            return [failure_reply(failure)] * len(writes)
        if 200 <= reply.status < 300:
            return [DONE] * len(writes)
        if reply.status == 404:
            missing = _missing_spans(reply.text)
            if missing is not None:
                key = "span_id" if path.endswith("span_annotations") else "trace_id"
                late = [w.body.get(key) in missing for w in writes]
                rest = [w for w, is_late in zip(writes, late, strict=True) if not is_late]
                sent = iter(self._annotate(path, rest, timeout_s) if rest else [])
                return [Reply(Outcome.NOT_INGESTED) if is_late else next(sent) for is_late in late]
            if path.endswith("trace_annotations"):
                return [Reply(Outcome.NOT_INGESTED)] * len(writes)
        return [status_reply(reply.status)] * len(writes)

    def _documents(self, write: Write, timeout_s: float) -> Reply:
        """Find the trace's retriever spans, match their documents to the record's passages,
        and annotate each matched document with whether it backed a claim."""
        body = write.body
        query = urllib.parse.urlencode({"trace_id": body["trace_id"], "limit": 1000})
        project = urllib.parse.quote(self.project, safe="")
        try:
            reply = request(
                "GET",
                join(self.endpoint, f"v1/projects/{project}/spans?{query}"),
                headers=self._headers,
                timeout_s=timeout_s,
            )
        except HttpFailure as failure:
            return failure_reply(failure)
        if reply.status != 200:
            return status_reply(reply.status)
        try:
            spans = reply.json()["data"]
        except (ValueError, KeyError, TypeError):
            return Reply(Outcome.FAILED, ERROR_BAD_REPLY)
        if not any(_span_id(span) == body["span_id"] for span in spans):
            return Reply(Outcome.NOT_INGESTED)
        data = list(_document_annotations(spans, body))
        if not data:
            return DONE  # no retriever span holds these passages: nothing to annotate
        try:
            posted = self._post("v1/document_annotations", data, timeout_s)
        except HttpFailure as failure:
            return failure_reply(failure)
        return DONE if 200 <= posted.status < 300 else status_reply(posted.status)


def _missing_spans(text: str) -> set[str] | None:
    """The span ids of Phoenix's "Spans with IDs a, b do not exist." (``None``: not that)."""
    start = text.find(_MISSING_SPANS)
    if start < 0:
        return None
    end = text.find(" do not exist", start)
    listed = text[start + len(_MISSING_SPANS) : end if end >= 0 else None]
    return {s.strip() for s in listed.split(",") if s.strip()}


def _span_id(span: Mapping[str, Any]) -> str | None:
    context = span.get("context")
    return context.get("span_id") if isinstance(context, Mapping) else None


def _documents_of(span: Mapping[str, Any]) -> list[str]:
    """The contents of a retriever span's documents, in position order (Phoenix returns the
    attributes flat, ``retrieval.documents.0.document.content``, or nested)."""
    attributes = span.get("attributes") or {}
    nested = attributes.get("retrieval")
    if isinstance(nested, Mapping):
        documents = nested.get("documents")
        if isinstance(documents, list):
            return [_nested_content(d) for d in documents]
    listed = attributes.get("retrieval.documents")
    if isinstance(listed, list):
        return [_nested_content(d) for d in listed]
    contents: dict[int, str] = {}
    for key, value in attributes.items():
        parts = key.split(".")
        if (
            len(parts) == 5
            and parts[:2] == ["retrieval", "documents"]
            and parts[3:] == ["document", "content"]
            and parts[2].isdigit()
        ):
            contents[int(parts[2])] = str(value)
    return [contents.get(i, "") for i in range(max(contents, default=-1) + 1)]


def _nested_content(document: Any) -> str:
    if isinstance(document, Mapping):
        inner = document.get("document", document)
        if isinstance(inner, Mapping):
            return str(inner.get("content", ""))
        if "document.content" in document:
            return str(document["document.content"])
    return ""


def _same_text(a: str, b: str) -> bool:
    """A passage and a document are the same text (whitespace aside; a passage capped to the
    size limits is a prefix of its document)."""
    x, y = " ".join(a.split()), " ".join(b.split())
    return bool(x) and (x == y or (len(x) >= 64 and y.startswith(x)))


def _document_annotations(
    spans: Sequence[Mapping[str, Any]], body: Mapping[str, Any]
) -> Iterator[dict[str, Any]]:
    """Per retriever span of the trace, each document that is one of the record's passages
    (a pipeline may have several retriever spans holding the same documents, as LlamaIndex's
    query engine and its retriever do: each gets its annotations)."""
    passages: list[str] = body["passages"]
    support: Mapping[Any, Mapping[str, list[int]]] = body["support"]
    for span in spans:
        if span.get("span_kind") != "RETRIEVER":
            continue
        span_id = _span_id(span)
        for position, content in enumerate(_documents_of(span)):
            index = next((i for i, t in enumerate(passages) if _same_text(t, content)), None)
            if index is None:
                continue
            backed = support.get(index) or support.get(str(index)) or {}
            yield _support_annotation(
                span_id,
                position,
                index,
                list(backed.get("supported", ())),
                list(backed.get("contradicted", ())),
                body["kind"],
            )


def _support_annotation(
    span_id: Any,
    position: int,
    index: int,
    supported: list[int],
    contradicted: list[int],
    kind: str,
) -> dict[str, Any]:
    if supported:
        label = "supports"
    elif contradicted:
        label = "contradicts"
    else:
        label = "unused"
    said = []
    if supported:
        said.append(
            f"backs claim{'s' if len(supported) > 1 else ''} {', '.join(map(str, supported))}"
        )
    if contradicted:
        said.append(
            f"contradicts claim{'s' if len(contradicted) > 1 else ''} "
            f"{', '.join(map(str, contradicted))}"
        )
    return {
        "span_id": span_id,
        "document_position": position,
        "name": SUPPORT,
        "annotator_kind": kind,
        "result": {
            "label": label,
            "score": 1.0 if supported else 0.0,
            "explanation": "; ".join(said) or "backs no claim of the answer",
        },
        "metadata": {
            "passage": index + 1,
            "claims_supported": supported,
            "claims_contradicted": contradicted,
        },
        "identifier": "",
    }
