"""Turning LangChain run inputs, outputs and documents into what a record needs.

Every function here is called on the host's request path, so each one only looks at the object it
is given (attribute reads, a few ``isinstance`` checks): no serialisation, no copies of large
texts, no imports of LangChain. Objects are recognised by shape (``content``, ``page_content``)
rather than by class, which keeps the module importable without LangChain and tolerant of
subclasses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

from groundwatch.integration import ToolOutput, readable_tool_output, turn_passage

from ._root import _DEFAULT_REPR, CONVERSATION_METADATA_KEYS, _Tagged

#: Keys looked up, in order, when the root input of a chain is a mapping.
QUESTION_KEYS: tuple[str, ...] = ("question", "input", "query", "q")
#: Keys looked up, in order, when the final output of a chain is a mapping.
ANSWER_KEYS: tuple[str, ...] = ("answer", "output", "result")
#: Document metadata keys that carry a retrieval score, looked up in order. Vector stores and
#: rerankers that report a score usually put it under one of these (LangChain's own retrievers
#: drop it; a retriever built on ``similarity_search_with_score`` typically stores it as "score").
SCORE_KEYS: tuple[str, ...] = ("score", "relevance_score", "similarity_score", "_score")

QuestionExtractor = Callable[[Any], "str | None"]
AnswerExtractor = Callable[[Any], "str | None"]


def plain(text: str) -> str:
    """A plain ``str`` for a ``str`` subclass (langchain-core 1.x parsers return one), so the
    record holds no framework object."""
    return text if type(text) is str else str.__str__(text)


def message_text(message: Any) -> str | None:
    """Return the text of a message-like object (``.content`` as a string or a list of parts)."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Multimodal / block content: keep the text parts, in order.
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts) if parts else None
    return None


#: Key of the message list in LangGraph / agent state ({"messages": [...]}).
MESSAGES_KEY = "messages"


#: Roles of the other message forms LangChain accepts (``("user", "...")``,
#: ``{"role": "user", "content": "..."}``), as message types.
_ROLES = {"user": "human", "human": "human", "assistant": "ai", "ai": "ai"}


def _role_and_text(message: Any) -> tuple[str | None, Any]:
    """``(type, message-like)`` of a message, a ``(role, content)`` pair or a role mapping."""
    kind = getattr(message, "type", None)
    if kind is not None:
        return kind, message
    if isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], str):
        return _ROLES.get(message[0]), message[1]
    if isinstance(message, Mapping) and isinstance(message.get("role"), str):
        return _ROLES.get(message["role"]), message.get("content")
    return None, None


def _text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else message_text(value)


def _last_text(messages: Any, role: str) -> str | None:
    """Text of the last message of ``role`` ("human", "ai") in a message list."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return None
    for message in reversed(messages):
        kind, value = _role_and_text(message)
        if kind == role:
            return _text_of(value)
    return None


def final_answer(messages: Any) -> str | None:
    """An agent's final answer: the last AI message without tool calls, in the current turn
    (after the last human message). None when the turn ended on a tool call (interrupted, or
    out of steps): an earlier turn's answer is not this turn's."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return None
    for message in reversed(messages):
        kind, value = _role_and_text(message)
        if kind == "human":
            return None
        if kind == "ai" and not getattr(message, "tool_calls", None):
            return _text_of(value)
    return None


def _current_turn(messages: Any) -> Sequence[Any]:
    """The messages after the last human message (the current turn's steps)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return ()
    for i in range(len(messages) - 1, -1, -1):
        if _role_and_text(messages[i])[0] == "human":
            return messages[i + 1 :]
    return ()


def turn_in_progress(outputs: Any) -> bool:
    """Whether agent state ``{"messages": [...]}`` stops in the middle of a turn: its last
    message calls tools or is a tool's result (a graph paused at an interrupt)."""
    if not isinstance(outputs, Mapping):
        return False
    turn = _current_turn(outputs.get(MESSAGES_KEY))
    if not turn:
        return False
    last = turn[-1]
    return getattr(last, "type", None) == "tool" or bool(getattr(last, "tool_calls", None))


def turn_tool_messages(outputs: Any) -> list[Any]:
    """The tool results of the current turn in agent state (``ToolMessage``s after the last
    human message), for a turn resumed after an interrupt: its tools ran in an earlier run."""
    if not isinstance(outputs, Mapping):
        return []
    return [
        m for m in _current_turn(outputs.get(MESSAGES_KEY)) if getattr(m, "type", None) == "tool"
    ]


def speaker(message: Any) -> str | None:
    """Who wrote a message of a conversation (``groundwatch.integration.earlier_turns``):
    ``"user"`` for a human message, ``"assistant"`` for an AI answer without tool calls."""
    kind = _role_and_text(message)[0]
    if kind == "human":
        return "user"
    if kind == "ai" and not getattr(message, "tool_calls", None):
        return "assistant"
    return None


def conversation_passage(message: Any) -> dict[str, Any] | None:
    """An earlier turn's message as a ``conversation`` context (None without text)."""
    return turn_passage(_text_of(_role_and_text(message)[1]), speaker(message))


def _first_text(mapping: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first string or message text found under ``keys``, in order."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            text = message_text(value)
            if text is not None:
                return text
    return None


def default_question(inputs: Any) -> str | None:
    """Extract the question from a root run's input.

    Understands a plain string, a mapping with one of :data:`QUESTION_KEYS` holding a string (or a
    message), a message, and a list of messages, also as agent state ``{"messages": [...]}``
    (the last human message is the question).
    """
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        text = _first_text(inputs, QUESTION_KEYS)
        return text if text is not None else _last_text(inputs.get(MESSAGES_KEY), "human")
    if isinstance(inputs, Sequence):
        return _last_text(inputs, "human")
    return message_text(inputs)


def odd_question(inputs: Any) -> str | None:
    """The type of a question :func:`default_question` cannot read although it is there (a
    number or an object under a question key, or as the whole input), else ``None``."""
    try:
        if isinstance(inputs, Mapping):
            for key in QUESTION_KEYS:
                value = inputs.get(key)
                if value is not None:
                    return None if _text_of(value) is not None else type(value).__name__
            return None
        if inputs is None or isinstance(inputs, (str, Sequence)) or message_text(inputs):
            return None
    except Exception:  # the application's object raised as it was read: not a string either
        pass
    return type(inputs).__name__


def default_answer(outputs: Any) -> str | None:
    """Extract the answer from a root run's final output.

    Understands a plain string, a message (``AIMessage`` or a merged ``AIMessageChunk`` from a
    stream), a mapping with one of :data:`ANSWER_KEYS` holding either of those, and agent state
    ``{"messages": [...]}`` (:func:`final_answer`: the last AI message without tool calls).
    """
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, Mapping):
        text = _first_text(outputs, ANSWER_KEYS)
        return text if text is not None else final_answer(outputs.get(MESSAGES_KEY))
    return message_text(outputs)


def document_score(metadata: Mapping[str, Any], keys: Sequence[str]) -> float | None:
    """Return the first numeric score found in a document's metadata under ``keys``."""
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def passage_of(document: Any, score_keys: Sequence[str]) -> dict[str, Any] | None:
    """Turn a LangChain ``Document`` into the mapping form that ``Monitor.record`` accepts.

    Returns None for an object without a string ``page_content``. The metadata is passed by
    reference: the runtime copies what it keeps.
    """
    text = getattr(document, "page_content", None)
    if not isinstance(text, str):
        return None
    metadata = getattr(document, "metadata", None)
    if not isinstance(metadata, Mapping):
        metadata = {}
    doc_id = getattr(document, "id", None)
    if doc_id is None:
        doc_id = metadata.get("id")
    return {
        "text": text,
        "id": None if doc_id is None else str(doc_id),
        "score": document_score(metadata, score_keys),
        "metadata": metadata,
    }


class _Passages(Sequence[Any]):
    """The documents and tool outputs of a run (then earlier turns, with
    ``conversation_context``), turned into passages only when read.

    The monitor reads the contexts only for records its sampler keeps, so at a low sampling
    rate the request path never pays for the conversion.
    """

    __slots__ = ("_items", "_score_keys")

    def __init__(
        self, documents: list[Any], score_keys: tuple[str, ...], turns: Sequence[Any] = ()
    ) -> None:
        # Earlier turns come last: the passage cap cuts them first.
        self._items = [*documents, *turns] if turns else documents
        self._score_keys = score_keys

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._convert(d) for d in self._items[index]]
        return self._convert(self._items[index])

    def __iter__(self) -> Iterator[Any]:
        for item in self._items:
            yield self._convert(item)

    def _convert(self, item: Any) -> Any:
        kind = type(item)
        if kind is ToolOutput:
            return item  # the core reads it (groundwatch.integration.ToolOutput)
        if kind is _Tagged:
            passage = passage_of(item.document, self._score_keys)
            if passage is None:
                return item.document
            passage["tool"] = item.tool
            return passage
        # Anything that is not document-shaped goes as is: the monitor validates its inputs.
        return passage_of(item, self._score_keys) or item


def _tool_result(output: Any) -> Any:
    """What the model is sent for a tool's output: the output, or the tool message of a
    LangGraph ``Command(update={"messages": [ToolMessage(...)]})`` (None when the command
    carries none: a state update is no text)."""
    update = getattr(output, "update", None)
    if update is None or type(output).__name__ != "Command":
        return output
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if isinstance(messages, Sequence):
        for message in messages:
            if getattr(message, "type", None) == "tool":
                return message
    return None


def _readable(output: Any) -> bool:
    """Whether a tool's output has text a passage can hold (asked on the request path)."""
    content = getattr(output, "content", None)  # a ToolMessage: what the model was sent
    if content is None or isinstance(output, Mapping):
        return readable_tool_output(output)
    if isinstance(content, str):
        # A default repr is at most a few dozen characters: longer content is never one.
        # "null" is what LangChain sends the model for a tool that returned None.
        return (
            bool(content)
            and content != "null"
            and not (len(content) < 200 and _DEFAULT_REPR.fullmatch(content) is not None)
        )
    return bool(content)


def _conversation_id(metadata: Mapping[str, Any]) -> str | None:
    for key in CONVERSATION_METADATA_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None
