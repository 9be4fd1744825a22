"""The RAG interactions in a finished trace: which spans are context, which LLM span answers,
and the span the evaluation hangs under."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..types import Passage
from ._conventions import (
    GENAI_CONVERSATION_ID,
    GENAI_RESPONSE_ID,
    OI_KIND,
    OI_SESSION_ID,
    SOURCE_OPENINFERENCE,
    SOURCE_OPENLLMETRY,
    is_llm,
    is_retriever,
    is_tool,
)
from ._otlp import SpanData
from ._readers import (
    answer_of,
    documents,
    question_of,
    root_answer,
    tool_failed,
    tool_name,
    tool_result,
)
from ._tally import Skips, guarded


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


def _source(span: SpanData) -> str:
    return SOURCE_OPENINFERENCE if OI_KIND in span.attributes else SOURCE_OPENLLMETRY


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
                    found = list(guarded("tool.result", tool_result(span), self.skips))
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
            answer = root_answer(root, skips)
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
