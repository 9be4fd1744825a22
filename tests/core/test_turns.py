"""The conversation turns every integration shares (``groundwatch.integration``): which earlier
messages people wrote or read, and the passages they become, on plain objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from groundwatch.integration import earlier_turns, turn_passage


@dataclass
class Message:
    who: str  # "user", "assistant", "system", "tool", "call" (an assistant's tool call)
    text: Any = ""


def speaker(message: Any) -> str | None:
    return message.who if message.who in ("user", "assistant") else None


def test_the_turns_before_the_last_user_message_that_people_wrote_or_read() -> None:
    messages = [
        Message("system", "be brief"),
        Message("user", "first question"),
        Message("call", "lookup(x)"),
        Message("tool", "x = 1"),
        Message("assistant", "first answer"),
        Message("user", "the current question"),
        Message("assistant", "an answer being written"),
    ]
    turns = earlier_turns(messages, speaker)
    assert [m.text for m in turns] == ["first question", "first answer"]
    passages = [turn_passage(m.text, speaker(m)) for m in turns]
    assert passages == [
        {"text": "first question", "kind": "conversation", "metadata": {"role": "user"}},
        {"text": "first answer", "kind": "conversation", "metadata": {"role": "assistant"}},
    ]


def test_no_current_turn_or_no_messages_gives_no_turns() -> None:
    assert earlier_turns([Message("assistant", "hello")], speaker) == []
    assert earlier_turns([Message("user", "only the current question")], speaker) == []
    assert earlier_turns("not messages", speaker) == []
    assert earlier_turns(None, speaker) == []


def test_a_turn_without_text_or_speaker_is_no_passage() -> None:
    assert turn_passage("   ", "user") is None
    assert turn_passage(None, "assistant") is None
    assert turn_passage("text", None) is None
