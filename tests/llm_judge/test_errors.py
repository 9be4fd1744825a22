"""Every failure of the LLM judge ends as label ``error`` with an ``error_type`` from the one
documented list (telemetry/semconv.py, docs/llm-judge.md), never an exception class name."""

from __future__ import annotations

import builtins
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

import groundwatch as gw
from groundwatch import OpenAIJudge
from groundwatch.telemetry import semconv as sc
from groundwatch.types import Passage
from testkit.fake_openai import FakeOpenAIServer, Reply

from .conftest import TEST_KEY

MakeJudge = Callable[..., OpenAIJudge]
PASSAGES = ["The Eiffel Tower was completed in 1889. It is 330 metres tall."]
ANSWER = "The Eiffel Tower is 330 metres tall."


def documented(error_type: str | None) -> bool:
    return error_type in sc.ERROR_TYPES or re.fullmatch(r"http_\d{3}", error_type or "") is not None


def test_the_list_is_the_documented_one() -> None:
    assert set(sc.ERROR_TYPES) == {
        "timeout",
        "connection",
        "rate_limited",
        "circuit_open",
        "format_unsupported",
        "bad_reply",
        "truncated",
        "refused",
        "invalid_input",
        "transport",
        "internal",
    }
    assert sc.ERROR_HTTP_PREFIX == "http_"


def _completion(**fields: Any) -> bytes:
    import json

    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", **fields}
    return json.dumps(body).encode()


ODD = {
    "choices-null": _completion(choices=None),
    "choices-empty": _completion(choices=[]),
    "message-null": _completion(choices=[{"index": 0, "message": None, "finish_reason": "stop"}]),
    "content-number": _completion(
        choices=[{"index": 0, "message": {"role": "assistant", "content": 7}}]
    ),
    "usage-strings": _completion(
        choices=[{"index": 0, "message": {"role": "assistant", "content": "{}"}}],
        usage={"prompt_tokens": "many", "completion_tokens": None},
    ),
    "not-json": b"<html>502 Bad Gateway</html>",
    "json-list": b"[1, 2]",
}


@pytest.mark.parametrize("raw", list(ODD.values()), ids=list(ODD))
def test_odd_completion_bodies_are_bad_reply_not_attribute_errors(
    server: FakeOpenAIServer, make_judge: MakeJudge, raw: bytes
) -> None:
    server.push(Reply(raw=raw), Reply(raw=raw))
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.label == "error" and ev.error_type == "bad_reply", (ev.error_type, ev.error)


@pytest.mark.parametrize(
    ("replies", "kwargs", "expected"),
    [
        ([Reply(status=503)] * 4, {}, "http_503"),
        ([Reply(status=401, error="bad key")], {}, "http_401"),
        ([Reply(status=429, headers={"Retry-After": "3600"})], {}, "rate_limited"),
        ([Reply(delay=1.0)] * 2, {"timeout_seconds": 0.2, "max_attempts": 2}, "timeout"),
        (["no json"] * 2, {}, "bad_reply"),
        ([Reply(content="{", finish_reason="length")] * 2, {}, "truncated"),
        ([Reply(content=None, refusal="I must decline.")], {}, "refused"),
    ],
)
def test_each_failure_has_a_documented_error_type(
    server: FakeOpenAIServer,
    make_judge: MakeJudge,
    replies: list[Reply],
    kwargs: dict[str, Any],
    expected: str,
) -> None:
    server.push(*replies)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge(**kwargs))
    assert ev.label == "error" and ev.error_type == expected and documented(ev.error_type)


def test_invalid_input_is_invalid_input(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    import asyncio

    judge = make_judge()
    result = asyncio.run(judge.judge(123, [Passage(text="x")], None))  # type: ignore[arg-type]
    assert result.error_type == "invalid_input" and not server.completions()


def test_connection_and_circuit_open(make_judge: MakeJudge) -> None:
    srv = FakeOpenAIServer().start()
    url = srv.url
    srv.stop()
    judge = make_judge(base_url=url, max_attempts=1, failure_threshold=1, recovery_seconds=60)
    first = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert first.error_type == "connection"
    # The address and the socket's own words, not the client's bare "Connection error.".
    assert first.error == (
        f"connection failed to {url}: ConnectionRefusedError: [Errno 111] Connect call failed "
        f"('127.0.0.1', {url.split(':')[2].split('/')[0]})"
    )
    second = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert second.error_type == "circuit_open"
    assert second.error is not None
    assert second.error.startswith(f"{first.error}; the endpoint's circuit is open, next probe")


def test_without_the_openai_package_the_judge_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_openai(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "openai" or name.startswith("openai."):
            raise ImportError("No module named 'openai'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "openai", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_openai)
    import groundwatch  # the core imports without it

    with pytest.raises(ImportError, match=r'pip install -e "\.\[openai\]"'):
        groundwatch.OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key=TEST_KEY)
