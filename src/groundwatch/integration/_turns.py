"""A conversation's earlier turns as context (``conversation_context=True``), for every
integration: which messages before the current turn people wrote or read, and the passage each
becomes. The framework's side is one function that names a message's speaker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Speaker = Callable[[Any], str | None]
"""``speaker(message)``: ``"user"`` or ``"assistant"`` for a message a person wrote or read, else
``None`` (a system prompt, a tool call, a tool's result)."""


def earlier_turns(messages: Any, speaker: Speaker) -> list[Any]:
    """The messages before the current turn (the last ``"user"`` message) whose speaker is the
    user or the assistant, in order; ``[]`` for anything but a sequence of messages, or with no
    ``"user"`` message (no current turn to put them before)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return []
    for last in range(len(messages) - 1, -1, -1):
        if speaker(messages[last]) == "user":
            return [m for m in messages[:last] if speaker(m) in ("user", "assistant")]
    return []


def turn_passage(text: Any, speaker: str | None) -> dict[str, Any] | None:
    """An earlier turn as a ``conversation`` passage mapping (``metadata.role``: its speaker),
    or ``None`` when it has no text."""
    if not isinstance(text, str) or not text.strip() or speaker is None:
        return None
    return {"text": text, "kind": "conversation", "metadata": {"role": speaker}}
