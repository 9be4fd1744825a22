"""The attribute names of the conventions ``groundwatch serve`` reads, and the role each span
plays under them (retriever, tool, LLM), with the attributes each role keeps while it waits.

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
"""

from __future__ import annotations

import re

from ._otlp import STATUS_ERROR, SpanData

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

RETRIEVE_OPERATIONS = frozenset({"vector_db_retrieve", "retrieve", "retrieval"})
"""``gen_ai.operation.name`` of retrieval spans (OpenLLMetry's LangChain retrievers)."""
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
"""``gen_ai.operation.name`` of model calls (the GenAI conventions' inference operations)."""


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
