"""What a span's attributes say, under each convention (:mod:`._conventions` names them):
a retriever's documents, an LLM's answer and user message, a chain's question, a tool's result.

Every extractor is a small generator wrapped by :func:`~._tally.guarded`: an attribute of an
unexpected shape is counted as a skip (``groundwatch.serve.skipped``) and the extractor stops
there; what the others found is kept. Nothing here raises.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._shared.inputs import MAX_PASSAGE_CHARS, tool_output_text
from ..types import Passage
from ._conventions import (
    DB_RESULT_DOCUMENT,
    DB_RESULT_EVENT,
    DB_RESULT_ID,
    DB_RESULT_SCORE,
    ERROR_TYPE,
    GENAI_EXECUTE_TOOL,
    GENAI_INPUT_MESSAGES,
    GENAI_OUTPUT_MESSAGES,
    GENAI_RETRIEVAL_DOCUMENTS,
    GENAI_TOOL_NAME,
    GENAI_TOOL_RESULT,
    GENAI_USER_MESSAGE,
    INPUT_MIME,
    INPUT_VALUE,
    OI_KIND,
    OI_RETRIEVER,
    OI_TOOL_NAME,
    OUTPUT_MIME,
    OUTPUT_VALUE,
    TEXT_PLAIN,
    TL_ENTITY_NAME,
    TL_INPUT,
    TL_OUTPUT,
)
from ._otlp import STATUS_ERROR, SpanData
from ._tally import Skips, guarded

_DOCUMENT = re.compile(r"retrieval\.documents\.(\d+)\.document\.(content|id|score|metadata)$")
_OI_MESSAGE = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$")
_GENAI_MESSAGE = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(role|content)$")
_QUESTION_KEYS = ("question", "query", "input", "query_str", "user_input", "prompt")


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
    ids = list(guarded("openinference.output_ids", _oi_output_ids(span), skips))
    for i, doc in sorted(_indexed(span.attributes, _DOCUMENT).items()):
        if "id" not in doc and i < len(ids):
            doc["id"] = ids[i]
        yield from guarded("openinference.document", _oi_document(doc), skips)


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
            yield from guarded("openllmetry.db_result", _db_result(attrs), skips)
    output = span.attributes.get(TL_OUTPUT)
    if output is not None:
        yield from guarded("openllmetry.entity_output", _entity_documents(output), skips)


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
        yield from guarded("genai.retrieval_document", _genai_document(doc), skips)


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


# --- one reading per span, whichever convention wrote it -----------------------------------


def _first(
    readers: Sequence[tuple[str, Callable[[SpanData], Iterator[str]]]],
    spans: Sequence[SpanData],
    skips: Skips,
) -> str | None:
    for span in spans:
        for where, reader in readers:
            for text in guarded(where, reader(span), skips):
                if text:
                    return text
    return None


def documents(span: SpanData, skips: Skips) -> list[Passage]:
    if span.attributes.get(OI_KIND) == OI_RETRIEVER:
        return list(oi_documents(span, skips))
    found = list(guarded("genai.retrieval_documents", genai_documents(span, skips), skips))
    return found + list(tl_documents(span, skips))


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


def root_answer(root: SpanData, skips: Skips) -> str | None:
    value = root.attributes.get(OUTPUT_VALUE)
    if isinstance(value, str) and root.attributes.get(OUTPUT_MIME, TEXT_PLAIN) == TEXT_PLAIN:
        return value
    return None
