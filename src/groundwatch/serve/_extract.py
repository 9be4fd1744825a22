"""RAG interactions out of a finished trace's spans, for OpenInference and OpenLLMetry.

Attribute names come from the conventions' own packages:

- OpenInference (``openinference-semantic-conventions``): ``openinference.span.kind``
  (``RETRIEVER``, ``LLM``, ``CHAIN``, ...), ``retrieval.documents.<i>.document.content`` /
  ``.id`` / ``.score`` / ``.metadata``, ``input.value`` / ``input.mime_type``, ``output.value``,
  ``llm.output_messages.<i>.message.role`` / ``.content``, ``llm.input_messages.<i>...``.
- OpenLLMetry (``opentelemetry-semantic-conventions-ai``) and the GenAI conventions:
  ``gen_ai.prompt.<i>.role`` / ``.content`` and ``gen_ai.completion.<i>.content`` on LLM
  spans, ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON) in the newer
  conventions, ``traceloop.span.kind`` with ``traceloop.entity.input`` / ``.output`` (JSON) on
  workflow and task spans (a LangChain retriever's task span carries its documents there), and
  ``db.query.result`` span events with ``db.query.result.document`` / ``.id`` / ``.score``
  from the vector-store instrumentations.
- Agents' tools: OpenInference ``TOOL`` spans (``tool.name``, ``output.value``), the GenAI
  conventions' ``execute_tool`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.result``) and
  ``retrieval`` spans (``gen_ai.retrieval.documents``), as the
  ``open-telemetry/semantic-conventions-genai`` registry defines them, and OpenLLMetry's
  ``tool`` spans (``traceloop.entity.output``). A tool's result is a ``tool`` passage named
  after the tool; a failed call (``error.type``, or an error status) is not a passage.

Every extractor is a small generator wrapped by :func:`_guarded`: an attribute of an
unexpected shape is counted as a skip (``groundwatch.serve.skipped``) and the extractor stops
there; what the others found is kept. Nothing here raises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._inputs import MAX_PASSAGE_CHARS, tool_output_text
from ..types import Passage
from ._otlp import STATUS_ERROR, SpanData

_logger = logging.getLogger(__name__)

T = TypeVar("T")

OI_KIND = "openinference.span.kind"
OI_RETRIEVER = "RETRIEVER"
OI_LLM = "LLM"
OI_TOOL = "TOOL"
OI_TOOL_NAME = "tool.name"
OI_SESSION_ID = "session.id"
INPUT_VALUE = "input.value"
INPUT_MIME = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME = "output.mime_type"
TEXT_PLAIN = "text/plain"
_DOCUMENT = re.compile(r"retrieval\.documents\.(\d+)\.document\.(content|id|score|metadata)$")
_OI_MESSAGE = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$")
_GENAI_MESSAGE = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(role|content)$")

TL_KIND = "traceloop.span.kind"
TL_INPUT = "traceloop.entity.input"
TL_OUTPUT = "traceloop.entity.output"
LLM_REQUEST_TYPE = "llm.request.type"
GENAI_SYSTEM = "gen_ai.system"
GENAI_OPERATION = "gen_ai.operation.name"
GENAI_INPUT_MESSAGES = "gen_ai.input.messages"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GENAI_USER_MESSAGE = "gen_ai.user.message"
DB_RESULT_EVENT = "db.query.result"
DB_RESULT_DOCUMENT = "db.query.result.document"
DB_RESULT_ID = "db.query.result.id"
DB_RESULT_SCORE = "db.query.result.score"
GENAI_EXECUTE_TOOL = "execute_tool"
GENAI_TOOL_NAME = "gen_ai.tool.name"
GENAI_TOOL_RESULT = "gen_ai.tool.call.result"
GENAI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
GENAI_RESPONSE_ID = "gen_ai.response.id"
GENAI_CONVERSATION_ID = "gen_ai.conversation.id"
TL_ENTITY_NAME = "traceloop.entity.name"
ERROR_TYPE = "error.type"

SOURCE_OPENINFERENCE = "openinference"
SOURCE_OPENLLMETRY = "openllmetry"

_QUESTION_KEYS = ("question", "query", "input", "query_str", "user_input", "prompt")
RETRIEVE_OPERATIONS = frozenset({"vector_db_retrieve", "retrieve", "retrieval"})
"""``gen_ai.operation.name`` of retrieval spans (OpenLLMetry's LangChain retrievers)."""
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
"""``gen_ai.operation.name`` of model calls (the GenAI conventions' inference operations)."""


class Tally:
    """Counts by key, added to on the event loop and read by the metrics reader's thread
    (``groundwatch.serve.skipped`` by extractor, ``groundwatch.serve.requests`` by status)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[Any] = Counter()

    def add(self, key: Any) -> None:
        with self._lock:
            self._counts[key] += 1

    def snapshot(self) -> dict[Any, int]:
        with self._lock:
            return dict(self._counts)


Skips = Tally
"""Counted skips by extractor."""


def _guarded(where: str, items: Iterator[T], skips: Skips) -> Iterator[T]:
    """``items`` until the first exception, which is logged (debug) and counted."""
    try:
        yield from items
    except Exception as exc:
        skips.add(where)
        _logger.debug("serve: %s skipped an attribute: %r", where, exc)


@dataclass
class Interaction:
    """One RAG interaction found in a trace."""

    root: SpanData
    question: str | None
    passages: list[Passage]
    answer: str
    source: str
    llm: SpanData | None = None
    parent_id: bytes = b""
    """The span the evaluation hangs under: the root's id, or in pair mode the nearest common
    ancestor of the pair's retriever and LLM spans."""
    tools: int | None = None
    """Tool results among the passages; ``None`` when the interaction had no tool spans."""
    tool_errors: int = 0
    """Tool calls that failed (not passages)."""
    conversation_id: str | None = None
    """``gen_ai.conversation.id`` (or OpenInference's ``session.id``) found in the trace."""
    response_id: str | None = None
    """The scored completion's ``gen_ai.response.id``, for the evaluation events."""

    def __post_init__(self) -> None:
        if not self.parent_id:
            self.parent_id = self.root.span_id


# --- small readers -----------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"expected text, got {type(value).__name__}")


def _json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value)
    return value


def _question_in(value: Any, depth: int = 0) -> str | None:
    """A question in a chain's input: the text itself, or a usual key of a JSON object."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict) and depth < 3:
        for key in _QUESTION_KEYS:
            if key in value:
                found = _question_in(value[key], depth + 1)
                if found:
                    return found
        for key in ("inputs", "kwargs"):
            if key in value:
                found = _question_in(value[key], depth + 1)
                if found:
                    return found
    return None


def _indexed(attributes: dict[str, Any], pattern: re.Pattern[str]) -> dict[int, dict[str, Any]]:
    """``{index: {field: value}}`` of the flattened list attributes matching ``pattern``
    (whose last two groups are the index and the field)."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        m = pattern.match(key)
        if m is not None:
            last = len(m.groups())
            found.setdefault(int(m.group(last - 1)), {})[m.group(last)] = value
    return found


def _score(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    return float(value)


# --- OpenInference -------------------------------------------------------------------------------


def oi_documents(span: SpanData, skips: Skips) -> Iterator[Passage]:
    """``retrieval.documents.<i>.document.*`` of a RETRIEVER span, in index order; one
    document of an odd shape is skipped and counted, the others kept."""
    ids = list(_guarded("openinference.output_ids", _oi_output_ids(span), skips))
    for i, doc in sorted(_indexed(span.attributes, _DOCUMENT).items()):
        if "id" not in doc and i < len(ids):
            doc["id"] = ids[i]
        yield from _guarded("openinference.document", _oi_document(doc), skips)


def _oi_output_ids(span: SpanData) -> Iterator[str | None]:
    """Document ids from a retriever's JSON ``output.value`` (``{"documents": [{"id"}]}``),
    for instrumentors that put the id there and not in ``document.id`` (LangChain's)."""
    if span.attributes.get(OUTPUT_MIME) != "application/json":
        return
    value = _json(span.attributes.get(OUTPUT_VALUE))
    docs = value.get("documents") if isinstance(value, dict) else None
    for doc in docs if isinstance(docs, list) else []:
        yield _text(doc.get("id")) if isinstance(doc, dict) else None


def _oi_document(doc: dict[str, Any]) -> Iterator[Passage]:
    text = _text(doc.get("content"))
    if not text:
        return
    metadata = _json(doc.get("metadata")) if doc.get("metadata") is not None else {}
    yield Passage(
        text=text,
        id=_text(doc.get("id")),
        score=_score(doc.get("score")),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def oi_answer(span: SpanData) -> Iterator[str]:
    """An LLM span's answer: the last assistant output message, else ``output.value`` text."""
    messages = _indexed(span.attributes, _OI_MESSAGE)
    # _indexed mixes input and output messages by index: read the output ones by key.
    outputs = [
        _text(span.attributes.get(f"llm.output_messages.{i}.message.content"))
        for i in sorted(messages)
    ]
    texts = [t for t in outputs if t]
    if texts:
        yield texts[-1]
        return
    value = span.attributes.get(OUTPUT_VALUE)
    if isinstance(value, str) and span.attributes.get(OUTPUT_MIME, TEXT_PLAIN) == TEXT_PLAIN:
        yield value


def oi_question(span: SpanData) -> Iterator[str]:
    """The question in a span's ``input.value`` (text, or a usual key of a JSON input)."""
    value = span.attributes.get(INPUT_VALUE)
    if value is None:
        return
    if span.attributes.get(INPUT_MIME) == "application/json":
        value = _json(value)
    found = _question_in(value)
    if found:
        yield found


def oi_user_message(span: SpanData) -> Iterator[str]:
    """The last user message of an LLM span's ``llm.input_messages``."""
    messages = _indexed(span.attributes, _OI_MESSAGE)
    for i in sorted(messages, reverse=True):
        if span.attributes.get(f"llm.input_messages.{i}.message.role") == "user":
            text = _text(span.attributes.get(f"llm.input_messages.{i}.message.content"))
            if text:
                yield text
                return


# --- OpenLLMetry and the GenAI conventions ---------------------------------------------------


def _genai_parts_text(message: Any) -> str | None:
    """Text of one GenAI-convention message: ``{"role", "parts": [{"type": "text",
    "content"}]}`` (gen_ai.*.messages), or ``{"content": ...}`` (older events)."""
    if not isinstance(message, dict):
        return None
    parts = message.get("parts")
    if isinstance(parts, list):
        texts: list[str] = [
            p["content"]
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
        ]
        return "".join(texts) or None
    content = message.get("content")
    if isinstance(content, str):
        return content
    message = message.get("message")
    return _genai_parts_text(message) if isinstance(message, dict) else None


def genai_answer(span: SpanData) -> Iterator[str]:
    """An LLM span's completion: ``gen_ai.completion.<i>.content``, ``gen_ai.output.messages``,
    or a ``gen_ai.content.completion`` / ``gen_ai.choice`` span event."""
    attrs = span.attributes
    indexed = _indexed(attrs, _GENAI_MESSAGE)
    completions = [
        _text(attrs.get(f"gen_ai.completion.{i}.content"))
        for i in sorted(indexed)
        if f"gen_ai.completion.{i}.content" in attrs
    ]
    texts = [t for t in completions if t]
    if texts:
        yield texts[-1]
        return
    if GENAI_OUTPUT_MESSAGES in attrs:
        messages = _json(attrs[GENAI_OUTPUT_MESSAGES])
        found = [_genai_parts_text(m) for m in (messages if isinstance(messages, list) else [])]
        texts = [t for t in found if t]
        if texts:
            yield texts[-1]
            return
    for name, event_attrs in reversed(span.events):
        if name == "gen_ai.content.completion" and "gen_ai.completion" in event_attrs:
            messages = _json(event_attrs["gen_ai.completion"])
            found = [_genai_parts_text(m) for m in (messages if isinstance(messages, list) else [])]
            texts = [t for t in found if t]
            if texts:
                yield texts[-1]
                return
        if name == "gen_ai.choice":
            text = _genai_parts_text(_json(event_attrs.get("message", event_attrs)))
            if text:
                yield text
                return


def genai_user_message(span: SpanData) -> Iterator[str]:
    """The last user prompt of an LLM span (``gen_ai.prompt.<i>``, ``gen_ai.input.messages``,
    a ``gen_ai.user.message`` event: a span event, or a log record joined to the span)."""
    attrs = span.attributes
    indexed = _indexed(attrs, _GENAI_MESSAGE)
    for i in sorted(indexed, reverse=True):
        if attrs.get(f"gen_ai.prompt.{i}.role") == "user":
            text = _text(attrs.get(f"gen_ai.prompt.{i}.content"))
            if text:
                yield text
                return
    if GENAI_INPUT_MESSAGES in attrs:
        messages = _json(attrs[GENAI_INPUT_MESSAGES])
        for m in reversed(messages if isinstance(messages, list) else []):
            if isinstance(m, dict) and m.get("role") == "user":
                text = _genai_parts_text(m)
                if text:
                    yield text
                    return
    for name, event_attrs in reversed(span.events):
        if name == GENAI_USER_MESSAGE:
            text = _genai_parts_text(event_attrs)
            if text:
                yield text
                return


def tl_documents(span: SpanData, skips: Skips) -> Iterator[Passage]:
    """Documents of an OpenLLMetry retriever task span (``traceloop.entity.output``: LangChain's
    serialised ``Document`` list) or of ``db.query.result`` events (vector stores)."""
    for name, attrs in span.events:
        if name == DB_RESULT_EVENT:
            yield from _guarded("openllmetry.db_result", _db_result(attrs), skips)
    output = span.attributes.get(TL_OUTPUT)
    if output is not None:
        yield from _guarded("openllmetry.entity_output", _entity_documents(output), skips)


def _db_result(attrs: dict[str, Any]) -> Iterator[Passage]:
    text = _text(attrs.get(DB_RESULT_DOCUMENT))
    if text:
        yield Passage(
            text=text, id=_text(attrs.get(DB_RESULT_ID)), score=_score(attrs.get(DB_RESULT_SCORE))
        )


def _entity_documents(output: Any) -> Iterator[Passage]:
    value = _json(output)
    if isinstance(value, dict):
        value = value.get("outputs", value.get("documents", value))
    if not isinstance(value, list):
        return
    for doc in value:
        if not isinstance(doc, dict):
            continue
        inner = doc.get("kwargs")
        kwargs: dict[str, Any] = inner if isinstance(inner, dict) else doc
        text = kwargs.get("page_content", kwargs.get("text"))
        if isinstance(text, str) and text:
            found = kwargs.get("metadata")
            metadata: dict[str, Any] = found if isinstance(found, dict) else {}
            score = metadata.get("score")
            yield Passage(
                text=text,
                id=_text(kwargs.get("id")),
                score=_score(score) if isinstance(score, (int, float)) else None,
                metadata=metadata,
            )


def genai_documents(span: SpanData, skips: Skips) -> Iterator[Passage]:
    """``gen_ai.retrieval.documents`` of a ``retrieval`` span: a JSON array (or a structured
    list) of ``{"id", "score", ...}``. The conventions require only ids and scores; a document
    with its text under ``content`` (or ``text``, ``page_content``) becomes a passage, one
    without text has nothing to ground an answer in and is left out."""
    value = span.attributes.get(GENAI_RETRIEVAL_DOCUMENTS)
    if value is None:
        return
    found = _json(value)
    if not isinstance(found, list):
        raise TypeError(f"{GENAI_RETRIEVAL_DOCUMENTS} is not a list")
    for doc in found:
        yield from _guarded("genai.retrieval_document", _genai_document(doc), skips)


def _genai_document(doc: Any) -> Iterator[Passage]:
    if not isinstance(doc, dict):
        raise TypeError("a retrieval document is not an object")
    text = next(
        (doc[k] for k in ("content", "text", "page_content") if isinstance(doc.get(k), str)), None
    )
    if not text:
        return
    metadata = doc.get("metadata")
    yield Passage(
        text=text,
        id=_text(doc.get("id")),
        score=_score(doc.get("score")),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def tl_question(span: SpanData) -> Iterator[str]:
    """The question in a workflow or task span's ``traceloop.entity.input``."""
    value = span.attributes.get(TL_INPUT)
    if value is None:
        return
    found = _question_in(_json(value))
    if found:
        yield found


# --- tools ---------------------------------------------------------------------------------------


def tool_name(span: SpanData) -> str | None:
    """The tool a tool span ran: ``tool.name``, ``gen_ai.tool.name``, OpenLLMetry's entity
    name, else the span's name (less the conventions' ``execute_tool`` prefix)."""
    for key in (OI_TOOL_NAME, GENAI_TOOL_NAME, TL_ENTITY_NAME):
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    name = span.name.removeprefix(GENAI_EXECUTE_TOOL).strip()
    return name or None


def tool_failed(span: SpanData) -> bool:
    """A call that failed: its span's status is an error, or it names an ``error.type``."""
    attrs = span.attributes
    return attrs.get(STATUS_ERROR) == "ERROR" or ERROR_TYPE in attrs


def _unwrapped(value: Any, depth: int = 0) -> Any:
    """A framework's tool-output object, as its instrumentor serialised it, down to the
    output: LlamaIndex's ``ToolOutput`` (``raw_output``, else its text ``blocks``), LangChain's
    ``ToolMessage`` (``content``: as a message, OpenInference's ``{"type": "tool", "data"}``
    or a serialised constructor's ``kwargs``), OpenLLMetry's ``{"output", "kwargs"}``."""
    if not isinstance(value, dict) or depth > 3:
        return value
    if "raw_output" in value and value["raw_output"] is not None:
        return _unwrapped(value["raw_output"], depth + 1)
    blocks = value.get("blocks")
    if isinstance(blocks, list) and "tool_name" in value:
        return "".join(b["text"] for b in blocks if isinstance(b, dict) and "text" in b)
    data = value.get("data")
    if value.get("type") == "tool" and isinstance(data, dict) and "content" in data:
        return _unwrapped(data["content"], depth + 1)
    if "output" in value and set(value) <= {"output", "kwargs"}:
        return _unwrapped(value["output"], depth + 1)
    kwargs = value.get("kwargs")
    if isinstance(kwargs, dict) and "content" in kwargs:
        return _unwrapped(kwargs["content"], depth + 1)
    if "content" in value and ("tool_call_id" in value or value.get("type") == "tool"):
        return _unwrapped(value["content"], depth + 1)
    return value


def tool_result(span: SpanData) -> Iterator[Passage]:
    """A successful tool call's result as a ``tool`` passage: ``gen_ai.tool.call.result`` (an
    object, or JSON in a string), OpenInference's ``output.value``, OpenLLMetry's
    ``traceloop.entity.output``; structured results written as JSON with sorted keys (rows as
    lines), capped like any passage."""
    attrs = span.attributes
    if GENAI_TOOL_RESULT in attrs:
        value = attrs[GENAI_TOOL_RESULT]
        if isinstance(value, str) and value.lstrip().startswith("{"):
            # JSON in a string: perhaps an instrumentor's wrapper around the output.
            with contextlib.suppress(ValueError):
                value = _unwrapped(json.loads(value))
        else:
            value = _unwrapped(value)
    elif OUTPUT_VALUE in attrs:
        value = attrs[OUTPUT_VALUE]
        if attrs.get(OUTPUT_MIME) == "application/json":
            value = _unwrapped(_json(value))
    elif TL_OUTPUT in attrs:
        value = _unwrapped(_json(attrs[TL_OUTPUT]))
    else:
        return
    text = tool_output_text(value, MAX_PASSAGE_CHARS)
    if text.strip():
        yield Passage(text=text, kind="tool", tool=tool_name(span))


# --- span roles --------------------------------------------------------------------------------


def is_retriever(span: SpanData) -> bool:
    attrs = span.attributes
    if attrs.get(OI_KIND) == OI_RETRIEVER:
        return True
    if attrs.get(OI_KIND) is not None:
        return False
    if attrs.get(GENAI_OPERATION) in RETRIEVE_OPERATIONS:
        return True
    if any(name == DB_RESULT_EVENT for name, _ in span.events):
        return True
    return attrs.get(TL_KIND) == "task" and "retriever" in span.name.lower()


def is_tool(span: SpanData) -> bool:
    attrs = span.attributes
    kind = attrs.get(OI_KIND)
    if kind is not None:
        return bool(kind == OI_TOOL)
    if attrs.get(GENAI_OPERATION) == GENAI_EXECUTE_TOOL:
        return True
    return attrs.get(TL_KIND) == "tool"


def is_llm(span: SpanData) -> bool:
    attrs = span.attributes
    if attrs.get(OI_KIND) == OI_LLM:
        return True
    if attrs.get(OI_KIND) is not None:
        return False
    if attrs.get(GENAI_OPERATION) in LLM_OPERATIONS or LLM_REQUEST_TYPE in attrs:
        return True
    # Older instrumentations set only the system on their model spans.
    return GENAI_SYSTEM in attrs and TL_KIND not in attrs and GENAI_OPERATION not in attrs


_ROLE_KEYS = frozenset(
    {
        OI_KIND,
        GENAI_OPERATION,
        TL_KIND,
        LLM_REQUEST_TYPE,
        GENAI_SYSTEM,
        GENAI_CONVERSATION_ID,
        OI_SESSION_ID,
    }
)
_ROOT_KEYS = frozenset({INPUT_VALUE, INPUT_MIME, OUTPUT_VALUE, OUTPUT_MIME, TL_INPUT})
_RETRIEVER_KEYS = _ROOT_KEYS | {TL_OUTPUT, GENAI_RETRIEVAL_DOCUMENTS}
_TOOL_KEYS = frozenset(
    {
        OUTPUT_VALUE,
        OUTPUT_MIME,
        TL_OUTPUT,
        TL_ENTITY_NAME,
        OI_TOOL_NAME,
        GENAI_TOOL_NAME,
        GENAI_TOOL_RESULT,
        ERROR_TYPE,
        STATUS_ERROR,
    }
)
_LLM_KEYS = frozenset(
    {OUTPUT_VALUE, OUTPUT_MIME, GENAI_INPUT_MESSAGES, GENAI_OUTPUT_MESSAGES, GENAI_RESPONSE_ID}
)
_USER_MESSAGE = re.compile(r"(llm\.input_messages|gen_ai\.prompt)\.(\d+)\.")


def prune(span: SpanData, *, root: bool) -> None:
    """Drop the attributes extraction will not read for this span's role, before the span
    waits in a pending trace: an LLM span's prompt repeats the retrieved documents (kept
    once, on the retriever span), and OpenLLMetry writes each input and output twice
    (``traceloop.entity.*`` and ``gen_ai.task.*``)."""
    attrs = span.attributes
    keep = set(_ROLE_KEYS)
    if root:
        keep |= _ROOT_KEYS
    if is_retriever(span):
        keep |= _RETRIEVER_KEYS
        keep.update(k for k in attrs if k.startswith("retrieval.documents."))
    if is_tool(span):
        keep |= _TOOL_KEYS
    if is_llm(span):
        keep |= _LLM_KEYS
        answers = [k for k in attrs if k.startswith(("llm.output_messages.", "gen_ai.completion."))]
        keep.update(answers)
        if answers and not root:
            # The answer is in the output messages; output.value (the framework's whole
            # response object as JSON) is only the fallback.
            keep -= {OUTPUT_VALUE, OUTPUT_MIME}
        # Of the prompt, only the user messages: the question may be needed from them.
        for key, value in attrs.items():
            m = _USER_MESSAGE.match(key)
            if m is not None and key.endswith(".role") and value == "user":
                prefix = m.group(0)
                keep.update(k for k in attrs if k.startswith(prefix))
    span.attributes = {k: v for k, v in attrs.items() if k in keep}


def _first(
    readers: Sequence[tuple[str, Callable[[SpanData], Iterator[str]]]],
    spans: Sequence[SpanData],
    skips: Skips,
) -> str | None:
    for span in spans:
        for where, reader in readers:
            for text in _guarded(where, reader(span), skips):
                if text:
                    return text
    return None


def _source(span: SpanData) -> str:
    return SOURCE_OPENINFERENCE if OI_KIND in span.attributes else SOURCE_OPENLLMETRY


def documents(span: SpanData, skips: Skips) -> list[Passage]:
    if span.attributes.get(OI_KIND) == OI_RETRIEVER:
        return list(oi_documents(span, skips))
    found = list(_guarded("genai.retrieval_documents", genai_documents(span, skips), skips))
    return found + list(tl_documents(span, skips))


class _Contexts:
    """Which spans of a trace are context, and what each gives: a retriever's documents, a
    tool's result. A tool called inside another tool's span (a subagent's) is that tool's
    business: the outer tool's result is what the agent saw. A retriever inside a tool (a
    retriever wrapped as a tool, a query engine tool) gives its documents, named after the
    tool, in place of the tool's own text, which repeats them or is a model's summary of them.
    """

    def __init__(
        self, spans: Sequence[SpanData], parents: dict[bytes, bytes], skips: Skips
    ) -> None:
        self.skips = skips
        self.up = dict(parents)
        self.up.update((s.span_id, s.parent_id) for s in spans)
        self.tools = {s.span_id: s for s in spans if is_tool(s)}
        self.retrieving: set[bytes] = set()  # tools whose documents stand for their output
        self._owner: dict[bytes, bytes | None] = {}
        for span in spans:
            if span.span_id not in self.tools and is_retriever(span):
                owner = self.owner(span)
                if owner is not None:
                    self.retrieving.add(owner)

    def owner(self, span: SpanData) -> bytes | None:
        """The nearest tool span above ``span``, or ``None``."""
        if span.span_id in self._owner:
            return self._owner[span.span_id]
        found = None
        seen = 0
        parent = self.up.get(span.span_id)
        while parent and seen <= len(self.up):  # the bound stops a cycle of forged ids
            if parent in self.tools:
                found = parent
                break
            parent = self.up.get(parent)
            seen += 1
        self._owner[span.span_id] = found
        return found

    def is_source(self, span: SpanData) -> bool:
        """A top-level tool, or a retriever that is not inside a nested tool."""
        owner = self.owner(span)
        if span.span_id in self.tools:
            return owner is None
        if not is_retriever(span):
            return False
        return owner is None or self.owner(self.tools[owner]) is None

    def passages(self, sources: Sequence[SpanData]) -> tuple[list[Passage], int | None, int]:
        """The passages of ``sources`` in order, the tool results among them (``None``
        without tool spans) and the failed tool calls."""
        passages: list[Passage] = []
        tools: int | None = None
        errors = 0
        for span in sources:
            if span.span_id in self.tools:
                tools = tools or 0
                if tool_failed(span):
                    errors += 1
                elif span.span_id not in self.retrieving:
                    found = list(_guarded("tool.result", tool_result(span), self.skips))
                    passages.extend(found)
                    tools += len(found)
                continue
            docs = documents(span, self.skips)
            owner = self.owner(span)
            if owner is not None:
                name = tool_name(self.tools[owner])
                docs = [d.model_copy(update={"tool": name}) for d in docs]
            passages.extend(docs)
        return passages, tools, errors


def _conversation_id(root: SpanData, spans: Sequence[SpanData]) -> str | None:
    for span in (root, *spans):
        for key in (GENAI_CONVERSATION_ID, OI_SESSION_ID):
            value = span.attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _response_id(llm: SpanData | None) -> str | None:
    value = llm.attributes.get(GENAI_RESPONSE_ID) if llm is not None else None
    return value if isinstance(value, str) and value else None


def answer_of(llm: SpanData, skips: Skips) -> str | None:
    readers = (("openinference.answer", oi_answer), ("genai.answer", genai_answer))
    return _first(readers, [llm], skips)


def question_of(
    root: SpanData, retrievers: Sequence[SpanData], llm: SpanData | None, skips: Skips
) -> str | None:
    """The root's input, else the retriever's query, else the LLM's last user message."""
    readers = (("openinference.question", oi_question), ("openllmetry.question", tl_question))
    found = _first(readers, [root, *retrievers], skips)
    if found is None and llm is not None:
        found = _first(
            (("openinference.user", oi_user_message), ("genai.user", genai_user_message)),
            [llm],
            skips,
        )
    return found


def _root_answer(root: SpanData, skips: Skips) -> str | None:
    value = root.attributes.get(OUTPUT_VALUE)
    if isinstance(value, str) and root.attributes.get(OUTPUT_MIME, TEXT_PLAIN) == TEXT_PLAIN:
        return value
    return None


def _lineage(span_id: bytes, up: dict[bytes, bytes]) -> list[bytes]:
    """``span_id`` and its ancestors, as far as the parent links known reach."""
    line = [span_id]
    parent = up.get(span_id)
    while parent and len(line) <= len(up):  # the bound stops a cycle of forged ids
        line.append(parent)
        parent = up.get(parent)
    return line


def common_ancestor(
    members: Sequence[SpanData], spans: Sequence[SpanData], parents: dict[bytes, bytes]
) -> bytes | None:
    """The nearest span that is an ancestor (or one) of every span in ``members``, from the
    stored spans' parent ids and the links of those not stored; ``None`` when the lines known
    do not meet (a span between them never arrived, or was evicted)."""
    up = dict(parents)
    up.update((s.span_id, s.parent_id) for s in spans)
    first, *others = members
    shared = [set(_lineage(m.span_id, up)) for m in others]
    for candidate in _lineage(first.span_id, up):
        if all(candidate in line for line in shared):
            return candidate
    return None


def interactions(
    root: SpanData,
    spans: Sequence[SpanData],
    *,
    per_pair: bool,
    skips: Skips,
    parents: dict[bytes, bytes] | None = None,
) -> list[Interaction]:
    """The interactions in one finished trace.

    One per trace by default: every retriever's documents (in start order) against the answer
    of the last LLM span to end (the root's text output when no LLM span has one). With
    ``per_pair``, one per LLM span that has an answer, against the retrievers that ended before
    it started and after the previous LLM span (the retrieve-then-generate steps of an agent),
    each under the nearest common ancestor of its retriever and LLM spans (``parents``: the
    links of the spans not stored), the root when their lines do not meet. A trace without
    retrieved documents or without an answer has no interaction.
    """
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    contexts = _Contexts(ordered, parents or {}, skips)
    sources = [s for s in ordered if contexts.is_source(s)]
    if not sources:
        return []
    retrievers = [s for s in sources if s.span_id not in contexts.tools]
    conversation = _conversation_id(root, ordered)
    llms = sorted((s for s in ordered if is_llm(s)), key=lambda s: s.end_ns)
    if not per_pair:
        passages, tools, errors = contexts.passages(sources)
        if not passages and not tools and not errors:
            return []
        llm = None
        answer = None
        for candidate in reversed(llms):
            answer = answer_of(candidate, skips)
            if answer:
                llm = candidate
                break
        if not answer:
            answer = _root_answer(root, skips)
        if not answer:
            return []
        question = question_of(root, retrievers, llm, skips)
        source = _source(sources[0])
        interaction = Interaction(root, question, passages, answer, source, llm)
        return [_with_agent(interaction, tools, errors, conversation)]
    found: list[Interaction] = []
    previous_end = 0
    for llm in llms:
        own = [r for r in sources if previous_end <= r.end_ns <= llm.start_ns]
        passages, tools, errors = contexts.passages(own)
        answer = answer_of(llm, skips)
        if (passages or tools or errors) and answer:
            retrieved = [r for r in own if r.span_id not in contexts.tools]
            question = question_of(root, retrieved, llm, skips)
            parent = common_ancestor([llm, *own], spans, parents or {})
            interaction = Interaction(
                root, question, passages, answer, _source(own[0]), llm, parent or b""
            )
            found.append(_with_agent(interaction, tools, errors, conversation))
            previous_end = llm.end_ns
    return found


def _with_agent(
    interaction: Interaction, tools: int | None, errors: int, conversation: str | None
) -> Interaction:
    interaction.tools = tools
    interaction.tool_errors = errors
    interaction.conversation_id = conversation
    interaction.response_id = _response_id(interaction.llm)
    return interaction
