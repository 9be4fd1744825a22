"""What is wrong with the arguments ``Monitor.record`` was given: read only once the inline
check on the request path has failed (:mod:`.monitor`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import SpanContext

from .sampling import Decision

NOT_PASSAGES = frozenset({type(None), int, float, complex, bool, bytes, bytearray})
"""Item types that are never a passage, told apart on the request path by one set lookup (the
rest, documents included, are read on the worker)."""


def invalid_reason(
    question: Any,
    contexts: Any,
    answer: Any,
    span_context: Any,
    route: Any,
    attributes: Any,
    always_score: Any,
    decision: Any,
) -> str:
    """What is wrong with the arguments ``record()`` was given (no item is read). Called only
    when the inline check on the request path failed."""
    if answer is None:
        return "answer is missing (record(question=..., contexts=..., answer=...))"
    if contexts is None:
        return "contexts is missing (record(question=..., contexts=..., answer=...))"
    if not isinstance(answer, str):
        return f"answer must be a string, got {type(answer).__name__}"
    if question is not None and not isinstance(question, str):
        return f"question must be a string or None, got {type(question).__name__}"
    # A lone mapping or string is one passage given without its list: iterating it would
    # score its keys or characters as passages.
    if isinstance(contexts, (str, bytes, Mapping)) or not hasattr(contexts, "__iter__"):
        return f"contexts must be a list of passages, got {type(contexts).__name__}"
    if span_context is not None and not isinstance(span_context, SpanContext):
        return f"span_context must be a SpanContext, got {type(span_context).__name__}"
    if route is not None and not isinstance(route, str):
        return f"route must be a string or None, got {type(route).__name__}"
    if attributes is not None and not isinstance(attributes, Mapping):
        return f"attributes must be a mapping or None, got {type(attributes).__name__}"
    if not isinstance(always_score, bool):
        return f"always_score must be a bool, got {type(always_score).__name__}"
    if decision is not None:
        return f"decision must be a Decision, got {decision!r}"
    return "invalid arguments"


def misuse_reason(args: tuple[Any, ...], unknown: Mapping[str, Any]) -> str:
    if args:
        return (
            f"record() takes keyword arguments only (question=, contexts=, answer=), "
            f"got {len(args)} positional"
        )
    return f"unknown arguments: {', '.join(sorted(unknown))}"


def a_decision(value: Any) -> bool:
    try:
        Decision(value)
    except (ValueError, TypeError):
        return False
    return True
