"""The tolerant reply parser on its own: shapes seen from real servers, and what it refuses."""

from __future__ import annotations

import json

import pytest

from groundwatch.judging.judges._reply import parse_reply, read_reply

ITEMS = [
    {"claim": 'A "quoted" {brace} claim', "passage": 1, "quote": "x", "verdict": "supported"},
    {"claim": "Second, with ] and }", "passage": 2, "quote": "y", "verdict": "unsupported"},
]
FULL = json.dumps({"claims": ITEMS})


@pytest.mark.parametrize(
    "text",
    [
        FULL,
        "```json\n" + FULL + "\n```",
        "```\n" + FULL + "\n```\nDone.",
        "Sure! Here is the result:\n" + FULL + "\nLet me know if you need more.",
        json.dumps(ITEMS),
        json.dumps({"results": ITEMS}),
    ],
)
def test_accepted_shapes(text: str) -> None:
    assert parse_reply(text) == ITEMS


def test_truncation_inside_a_string_with_brackets_keeps_complete_claims() -> None:
    cut = FULL[: FULL.index("with ] and") + 6]
    assert parse_reply(cut) == ITEMS[:1]


def test_truncation_before_any_complete_claim_is_unusable() -> None:
    assert parse_reply(FULL[:30]) is None


@pytest.mark.parametrize(
    "text",
    ["", "   ", "No JSON here.", "{not json}", '{"answer": "yes"}', '["a", "b"]', "null"],
)
def test_unusable(text: str) -> None:
    assert parse_reply(text) is None


def test_never_evaluates_code() -> None:
    assert parse_reply("__import__('os').system('echo hi')") is None
    assert parse_reply('{"claims": [{"claim": __import__("os")}]}') is None


@pytest.mark.parametrize(
    "text",
    [
        '<think>\nThe answer says X. Draft: {"claims": []}\n</think>\n\n' + FULL,
        "<think>Let me see [1] and {2}.</think>```json\n" + FULL + "\n```",
        "<thinking>checking</thinking>" + FULL,
        "<reasoning>ok</reasoning>\n" + FULL,
    ],
)
def test_reasoning_blocks_before_the_json_are_skipped(text: str) -> None:
    assert read_reply(text) == (ITEMS, True)


def test_an_unclosed_reasoning_block_is_not_an_answer() -> None:
    # Cut while thinking: the JSON inside the thoughts is a draft.
    assert parse_reply('<think>Maybe {"claims": [{"claim": "x", "verdict": "supported"}]}') is None


def test_exact_json_is_not_counted_as_tolerant_but_everything_else_is() -> None:
    assert read_reply(FULL) == (ITEMS, False)
    assert read_reply("  " + FULL + "\n") == (ITEMS, False)
    assert read_reply("```json\n" + FULL + "\n```") == (ITEMS, True)
    assert read_reply(FULL[:-20])[1] is True
    assert read_reply("no json here") == (None, True)
    assert read_reply(None) == (None, False)
