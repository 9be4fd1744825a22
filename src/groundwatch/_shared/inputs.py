"""Checking and capping what callers hand us: answers, passages, questions."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

# The caps and tool outputs live in _capture, which the request path imports with no pydantic
# model; the worker's side reads them from here.
from .capture import DEFAULT_MAX_ANSWER_CHARS as DEFAULT_MAX_ANSWER_CHARS
from .capture import DEFAULT_MAX_PASSAGE_CHARS as DEFAULT_MAX_PASSAGE_CHARS
from .capture import DEFAULT_MAX_PASSAGES as DEFAULT_MAX_PASSAGES
from .capture import DEFAULT_MAX_QUESTION_CHARS as DEFAULT_MAX_QUESTION_CHARS
from .capture import MAX_ANSWER_CHARS as MAX_ANSWER_CHARS
from .capture import MAX_PASSAGE_CHARS as MAX_PASSAGE_CHARS
from .capture import MAX_PASSAGES as MAX_PASSAGES
from .capture import MAX_QUESTION_CHARS as MAX_QUESTION_CHARS
from .capture import UNREADABLE_TOOL_OUTPUT as UNREADABLE_TOOL_OUTPUT
from .capture import ToolOutput as ToolOutput
from .capture import readable_tool_output as readable_tool_output
from .capture import tool_output_text as tool_output_text
from .passage import PASSAGE_KINDS, Passage

# A passage's metadata rides along to on_result callbacks (and, pickled, to the worker
# process). Deep nesting would fail the pickling (RecursionError) where a thread scores it, and a
# huge tree costs memory for nothing the judge reads: both executors see the same capped copy.
MAX_METADATA_DEPTH = 16
"""Nesting levels of mappings and lists kept; a deeper value becomes :data:`METADATA_CUT`."""
MAX_METADATA_ENTRIES = 1_000
"""Mapping and list entries kept per passage, over the whole tree."""
MAX_METADATA_CHARS = 50_000
"""String characters (keys and values) kept per passage, over the whole tree."""
METADATA_CUT = "[truncated]"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Replace lone surrogates (``"\\ud800"`` in JSON input) with U+FFFD.

    They are not Unicode text: no UTF-8 encoder accepts them, so a result quoting one could not
    be serialised to JSON or exported. One character for one keeps every offset valid.
    """
    # isascii() is a flag check: most texts skip the search.
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` to ``limit`` characters. Returns the text and whether it was cut.

    The cut text is a prefix of the original, so offsets into it stay valid in the original.
    """
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def to_passage(item: Any, index: int) -> Passage:
    """Turn a string, a Passage, a mapping or a document-like object into a Passage."""
    if isinstance(item, Passage):
        return item
    if isinstance(item, str):
        return Passage(text=item)
    if type(item) is ToolOutput:
        return item.passage()
    # A plain dict (what both integrations hand over) skips the ABC check's machinery.
    if type(item) is dict or isinstance(item, Mapping):
        text = item.get("text")
        if text is None:
            text = item.get("page_content")
        if not isinstance(text, str):
            raise TypeError(f"contexts[{index}] is a mapping without a string 'text' field")
        item_id = item.get("id")
        passage = Passage(
            text=text,
            id=item_id if item_id is None or type(item_id) is str else str(item_id),
            score=_as_float(item.get("score")),
            metadata=_metadata(item.get("metadata"), index),
        )
        kind, tool = item.get("kind"), item.get("tool")
        if kind is None and tool is None:
            return passage
        if kind is not None and kind not in PASSAGE_KINDS:
            raise TypeError(f"contexts[{index}].kind must be one of {', '.join(PASSAGE_KINDS)}")
        if tool is not None and not isinstance(tool, str):
            raise TypeError(f"contexts[{index}].tool must be a string, got {type(tool).__name__}")
        # model_copy skips validation: both were checked just above.
        return passage.model_copy(update={"kind": kind or "retrieved", "tool": tool})
    # LangChain Document (page_content), LlamaIndex node (text / get_content()).
    text = _attribute(item, "page_content")
    if text is None:
        text = _attribute(item, "text")
    if isinstance(text, str):
        # LangChain documents have ``id``; LlamaIndex nodes (and NodeWithScore) ``node_id``.
        item_id = _attribute(item, "id")
        if item_id is None:
            item_id = _attribute(item, "node_id")
        return Passage(
            text=text,
            id=None if item_id is None else str(item_id),
            score=_as_float(_attribute(item, "score")),
            metadata=_metadata(_attribute(item, "metadata"), index),
        )
    raise TypeError(
        f"contexts[{index}] must be a string or a passage with text, got {type(item).__name__}"
    )


_CLASS_HAS: dict[tuple[type[Any], str], bool] = {}
_MISSING = object()


def _attribute(item: Any, name: str) -> Any:
    """``getattr(item, name, None)``, where a pydantic model without ``name`` answers from its
    class: pydantic's own path for a missing attribute (a LangChain ``Document``'s ``score``, a
    LlamaIndex ``NodeWithScore``'s ``page_content``) builds and raises an error, a few
    microseconds per passage, which was most of preparing a record on the worker thread."""
    if isinstance(item, BaseModel):
        value = item.__dict__.get(name, _MISSING)  # a model's fields live in its __dict__
        if value is not _MISSING:
            return value
        key = (type(item), name)
        has = _CLASS_HAS.get(key)
        if has is None:  # a property or a class attribute (classes are few: no bound)
            has = _CLASS_HAS[key] = any(name in vars(k) for k in type(item).__mro__)
        if not has:
            extra = item.__pydantic_extra__  # extra="allow" models keep unknown fields
            return extra.get(name) if extra else None
    return getattr(item, name, None)


def _metadata(value: Any, index: int) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"contexts[{index}].metadata must be a mapping, got {type(value).__name__}")
    # Passage.metadata is keyed by strings; a document's metadata may not be (``{1: ...}``).
    if type(value) is dict and all(type(k) is str for k in value):
        return value  # pydantic's validation copies it
    return {k if isinstance(k, str) else str(k): v for k, v in value.items()}


def _as_float(value: Any) -> float | None:
    if value is None or type(value) is float:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class _Budget:
    __slots__ = ("chars", "cut", "entries")

    def __init__(self) -> None:
        self.entries = MAX_METADATA_ENTRIES
        self.chars = MAX_METADATA_CHARS
        self.cut = False


def cap_metadata(metadata: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``metadata`` within :data:`MAX_METADATA_DEPTH`, :data:`MAX_METADATA_ENTRIES` and
    :data:`MAX_METADATA_CHARS` (the same object when it fits). Returns it and whether it was
    cut; what was cut is marked with :data:`METADATA_CUT`."""
    if _fits(metadata, 0, _Budget()):
        return metadata, False
    budget = _Budget()
    capped = _capped(metadata, 0, budget)
    return capped, True


def _fits(value: Any, depth: int, budget: _Budget) -> bool:
    if isinstance(value, str):
        budget.chars -= len(value)
        return budget.chars >= 0
    if isinstance(value, (Mapping, list, tuple)):
        if depth >= MAX_METADATA_DEPTH:
            return False
        budget.entries -= len(value)
        if budget.entries < 0:
            return False
        children: Iterable[tuple[Any, Any]] = (
            value.items() if isinstance(value, Mapping) else enumerate(value)
        )
        for k, v in children:
            # Strings and numbers inline: a flat metadata mapping then costs no call per entry.
            kind = type(k)
            if kind is str:
                budget.chars -= len(k)
            elif kind is not int and not _fits(k, depth, budget):
                return False
            kind = type(v)
            if kind is str:
                budget.chars -= len(v)
            elif kind not in _SCALARS and not _fits(v, depth + 1, budget):
                return False
        return budget.chars >= 0
    return True


_SCALARS = frozenset({int, float, bool, type(None)})


def _capped(value: Any, depth: int, budget: _Budget) -> Any:
    if isinstance(value, str):
        kept = value[: max(0, budget.chars)]
        budget.chars -= len(kept)
        return kept if len(kept) == len(value) else kept + METADATA_CUT
    if not isinstance(value, (Mapping, list, tuple)):
        return value
    if depth >= MAX_METADATA_DEPTH:
        return METADATA_CUT
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if budget.entries <= 0:
                out[METADATA_CUT] = len(value) - len(out)
                break
            budget.entries -= 1
            out[_capped(k, depth, budget)] = _capped(v, depth + 1, budget)
        return out
    items: list[Any] = []
    for v in value:
        if budget.entries <= 0:
            items.append(METADATA_CUT)
            break
        budget.entries -= 1
        items.append(_capped(v, depth + 1, budget))
    return items if isinstance(value, list) else tuple(items)


def prepare(
    answer: Any,
    contexts: Any,
    question: Any,
    *,
    max_answer_chars: int | None = None,
    max_passage_chars: int | None = None,
    max_passages: int | None = None,
) -> tuple[str, list[Passage], str | None, bool]:
    """Validate and cap the inputs of one evaluation (lone surrogates become U+FFFD).

    The caps default to the environment's (:data:`MAX_ANSWER_CHARS`, :data:`MAX_PASSAGE_CHARS`,
    :data:`MAX_PASSAGES`); ``groundwatch check`` passes its own options.

    Returns ``(answer, passages, question, truncated)``; ``truncated`` also when a passage's
    metadata was cut (:func:`cap_metadata`).

    Raises:
        TypeError: the answer is not a string, contexts is not a list of passages, or the
            question is neither a string nor None.
    """
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a string, got {type(answer).__name__}")
    if question is not None and not isinstance(question, str):
        raise TypeError(f"question must be a string or None, got {type(question).__name__}")
    if contexts is None:
        raise TypeError("contexts must be a list of strings or passages, got None")
    # A single mapping is iterable (over its keys) but is one passage given without its list.
    if isinstance(contexts, (str, bytes, Mapping)) or not isinstance(contexts, Iterable):
        raise TypeError(
            f"contexts must be a list of strings or passages, got {type(contexts).__name__}"
        )
    answer_cap = MAX_ANSWER_CHARS if max_answer_chars is None else max_answer_chars
    passage_cap = MAX_PASSAGE_CHARS if max_passage_chars is None else max_passage_chars
    passages_cap = MAX_PASSAGES if max_passages is None else max_passages
    # Only what is kept is converted (one more to tell whether any were cut): a million
    # passages, or an endless iterator, must cost no more than MAX_PASSAGES of them.
    passages = [
        to_passage(item, i) for i, item in enumerate(itertools.islice(contexts, passages_cap + 1))
    ]
    truncated = False
    answer, cut = cap_text(clean_text(answer), answer_cap)
    truncated |= cut
    if len(passages) > passages_cap:
        passages = passages[:passages_cap]
        truncated = True
    capped: list[Passage] = []
    for p in passages:
        text, cut = cap_text(clean_text(p.text), passage_cap)
        metadata, metadata_cut = cap_metadata(p.metadata)
        truncated |= cut or metadata_cut
        if text is not p.text or metadata is not p.metadata:
            p = p.model_copy(update={"text": text, "metadata": metadata})
        capped.append(p)
    if question is not None:
        question, cut = cap_text(clean_text(question), MAX_QUESTION_CHARS)
        truncated |= cut
    return answer, capped, question, truncated
