"""What the request path captures beside the record: the size caps and tool outputs held by
reference.

:meth:`groundwatch.Monitor.record` caps a record's contexts and the integrations put
:class:`ToolOutput` objects among them, on the host's request path; both import this module at
start-up, so it defines no pydantic model (the first one costs about half of what importing
pydantic and the OpenTelemetry API does: ``benchmarks/import_cost.py``). The worker turns what
was captured into passages (:mod:`groundwatch._shared.inputs`, which re-exports these names for the
rest of the package). The record itself is :mod:`groundwatch._shared.record`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import config

if TYPE_CHECKING:
    from .passage import Passage

# Caps keep one pathological input from costing unbounded time or memory on the worker; the
# environment may raise them (read in config, once, at import: they size every record).
DEFAULT_MAX_ANSWER_CHARS = config.DEFAULT_MAX_ANSWER_CHARS
DEFAULT_MAX_PASSAGE_CHARS = config.DEFAULT_MAX_PASSAGE_CHARS
DEFAULT_MAX_PASSAGES = config.DEFAULT_MAX_PASSAGES
DEFAULT_MAX_QUESTION_CHARS = 4_000

MAX_ANSWER_CHARS, MAX_PASSAGE_CHARS, MAX_PASSAGES = config.input_caps()
MAX_QUESTION_CHARS = DEFAULT_MAX_QUESTION_CHARS


# --- tool outputs --------------------------------------------------------------------------------

UNREADABLE_TOOL_OUTPUT = "[tool output of type {type} that cannot be read as text]"
"""The text of a tool output that turned out unreadable on the worker (a structure that JSON
cannot hold: a reference cycle); outputs plainly unreadable are left out by the integration
(:func:`readable_tool_output`) and counted there."""


def readable_tool_output(output: Any) -> bool:
    """Whether a tool's output can become a passage, asked on the request path: by its type
    only (nothing is converted or called). Unreadable: ``None``, bytes, and objects whose only
    text is Python's default ``<Foo object at 0x...>`` repr (what a framework sends the model
    for them, which says nothing the answer could rest on)."""
    if output is None or isinstance(output, (bytes, bytearray, memoryview)):
        return False
    if isinstance(output, (str, int, float, Mapping, list, tuple)) or _is_pydantic_model(output):
        return True
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return True
    kind: Any = type(output)
    return kind.__str__ is not object.__str__ or kind.__repr__ is not object.__repr__


class ToolOutput:
    """One tool call's output, held by reference on the request path and turned into a
    ``tool`` passage (:func:`tool_output_text`) only on the worker, for sampled records.

    Integrations put these among a record's ``contexts`` beside documents and strings; the
    monitor caps and counts them like any passage.
    """

    __slots__ = ("output", "tool")

    def __init__(self, output: Any, tool: str | None) -> None:
        self.output = output
        self.tool = tool

    def passage(self) -> Passage:
        """The output as a ``tool`` passage (never raises for the output's sake)."""
        from .passage import Passage  # a pydantic model: the worker's side, not at start-up

        return Passage.model_construct(
            text=tool_output_text(self.output, MAX_PASSAGE_CHARS),
            kind="tool",
            tool=self.tool,
        )

    def __repr__(self) -> str:
        return f"ToolOutput(tool={self.tool!r}, type={type(self.output).__name__})"


def tool_output_text(output: Any, limit: int) -> str:
    """A tool's output as deterministic text, at most ``limit + 1`` characters (one more than
    the cap, so that preparing the record sees the cut and marks it truncated).

    A string is itself (a JSON object or array in a string is read and written again as
    below, so the same data always reads the same); a message its text content; a mapping
    JSON with sorted keys; a list of mappings (rows) one JSON object per line; other lists,
    numbers and booleans JSON; a pydantic model or a dataclass as its fields. Values JSON
    cannot hold are written as ``<TypeName>``. A large structure is written only up to the
    cap: a 5 MB result costs the cap, not 5 MB. Never raises for the output's sake.
    """
    try:
        return _tool_text(output, limit)[: limit + 1]
    except Exception:
        return UNREADABLE_TOOL_OUTPUT.format(type=type(output).__name__)


def _tool_text(output: Any, limit: int) -> str:
    if isinstance(output, str):
        stripped = output.lstrip()
        if stripped[:1] in ("{", "[") and len(output) <= limit:
            try:
                return _structured(json.loads(output), limit)
            except ValueError:
                pass
        return output
    content = getattr(output, "content", None)  # a message (LangChain ToolMessage, ...)
    if content is not None and not isinstance(output, Mapping):
        if isinstance(content, list):  # content blocks: the text parts, in order
            parts = [
                p if isinstance(p, str) else p.get("text", "")
                for p in content
                if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text")
            ]
            return "".join(parts)
        return _tool_text(content, limit)
    return _structured(output, limit)


def _structured(value: Any, limit: int) -> str:
    value = _plain(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(row, Mapping) for row in value):
        lines: list[str] = []
        size = 0
        for row in value:  # rows as lines: one sentence-like unit per row for the judges
            line = _dump(row, limit - size)
            lines.append(line)
            size += len(line) + 1
            if size > limit:
                break
        return "\n".join(lines)
    return _dump(value, limit)


def _is_pydantic_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic model, without importing pydantic's model machinery at
    start-up (``from pydantic import BaseModel`` costs more than the rest of this module's
    imports: ``benchmarks/import_cost.py``): an instance of ``BaseModel`` exists only once
    ``pydantic.main`` is imported, so when it is not, nothing is one."""
    main = sys.modules.get("pydantic.main")
    return main is not None and isinstance(value, main.BaseModel)


def _plain(value: Any) -> Any:
    if _is_pydantic_model(value):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


_ENCODER = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, default=lambda v: _json_default(v), check_circular=True
)


def _json_default(value: Any) -> Any:
    plain = _plain(value)
    if plain is not value:
        return plain
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return f"<{type(value).__name__}>"


def _dump(value: Any, limit: int) -> str:
    """JSON with sorted keys, written only up to ``limit + 1`` characters."""
    chunks: list[str] = []
    size = 0
    for chunk in _ENCODER.iterencode(value):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return "".join(chunks)
