"""Fixtures: a fake OpenAI-compatible server on 127.0.0.1 and judges pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from groundwatch import OpenAIJudge
from testkit.fake_openai import FakeOpenAIServer

TEST_KEY = "sk-test-SECRETKEY-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def make_judge(server: FakeOpenAIServer) -> Iterator[Callable[..., OpenAIJudge]]:
    """Build judges against ``server`` with fast retry timings; all closed after the test."""
    made: list[OpenAIJudge] = []

    def make(**kwargs: Any) -> OpenAIJudge:
        options: dict[str, Any] = {
            "base_url": server.url,
            "api_key": TEST_KEY,
            "timeout_seconds": 2.0,
            "backoff_base_seconds": 0.01,
            "backoff_cap_seconds": 0.05,
        }
        options.update(kwargs)
        judge = OpenAIJudge(options.pop("model", "fake-model"), **options)
        made.append(judge)
        return judge

    yield make
    for judge in made:
        judge.close()


@pytest.fixture(autouse=True)
def _fresh_negotiation_memory() -> None:
    """Each test meets its server afresh: what a judge learnt about an endpoint is kept per
    base URL for the process, and a later test's server may get the same free port."""
    from groundwatch.judging.judges.openai import _endpoint as judge_module

    with judge_module._NEGOTIATED_LOCK:
        judge_module._NEGOTIATED.clear()
