"""The judge with no flags against the response_format behaviour of real servers.

Each profile in ``fake_openai.PROFILES`` reproduces one server's handling of
``response_format`` (status, error body, what it enforces, what it ignores), read from that
server's source. Whatever the server does, the default judge must end up with verdicts, learn
the format once, never retry a format refusal and never count one towards its circuit breaker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import groundwatch as gw
from groundwatch import OpenAIJudge
from testkit.fake_openai import PROFILES, FakeOpenAIServer, Reply, format_kind

MakeJudge = Callable[..., OpenAIJudge]

PASSAGES = [
    "The Eiffel Tower was completed in 1889. It is 330 metres tall.",
    "Gustave Eiffel's company designed and built the tower for the World's Fair.",
]
ANSWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889."

# profile -> (formats the judge sends in order on the first answer, format negotiated, whether
# the reply needs the tolerant parser)
EXPECTED = {
    "llama-cpp-python": (["json_schema", "json_object_schema"], "json_object_schema", False),
    "ollama": (["json_schema"], "json_schema", False),
    "ollama-legacy": (["json_schema"], "json_schema", True),
    "lm-studio": (["json_schema"], "json_schema", False),
    "vllm": (["json_schema"], "json_schema", False),
    "reasoning-unsplit": (["json_schema"], "json_schema", True),
    "litellm": (["json_schema", "json_object_schema", "json_object", "none"], "none", True),
    "litellm-drop-params": (["json_schema"], "json_schema", True),
}


def test_every_profile_has_an_expectation() -> None:
    assert set(EXPECTED) == set(PROFILES)


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_default_judge_works_on_the_server_without_flags(
    make_judge: MakeJudge, profile: str, caplog: pytest.LogCaptureFixture
) -> None:
    sent, negotiated, tolerant = EXPECTED[profile]
    with FakeOpenAIServer(profile=profile) as srv:
        # One failure would open the breaker: refusals must not count as failures.
        judge = make_judge(base_url=srv.url, failure_threshold=1, cache_size=0)
        with caplog.at_level(logging.INFO, logger="groundwatch.judging.judges.openai"):
            ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
            assert ev.label == "grounded", (ev.error_type, ev.error)
            assert [format_kind(r.body.get("response_format")) for r in srv.completions()] == sent
            assert judge.negotiated_format == negotiated
            assert judge.circuit_state == "closed"
            assert judge.stats.retries == 0 and judge.stats.format_fallbacks == len(sent) - 1
            assert judge.stats.tolerant_replies == int(tolerant)
            # Later answers send the negotiated format only.
            assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
            assert format_kind(srv.completions()[-1].body.get("response_format")) == negotiated
            assert len(srv.completions()) == len(sent) + 1
            # A second judge for the same server and model starts from what was learnt.
            other = make_judge(base_url=srv.url, cache_size=0)
            assert gw.evaluate(ANSWER, PASSAGES, judge=other).label == "grounded"
            assert len(srv.completions()) == len(sent) + 2
        logged = [r.getMessage() for r in caplog.records if "accepts response_format" in r.message]
        assert logged == [
            f"judge endpoint {srv.url} (model fake-model) accepts response_format={negotiated}"
        ]


def test_learnt_format_is_per_model(make_judge: MakeJudge) -> None:
    with FakeOpenAIServer(profile="llama-cpp-python") as srv:
        gw.evaluate(ANSWER, PASSAGES, judge=make_judge(base_url=srv.url, model="a"))
        gw.evaluate(ANSWER, PASSAGES, judge=make_judge(base_url=srv.url, model="b"))
        kinds = [format_kind(r.body.get("response_format")) for r in srv.completions()]
        assert kinds == ["json_schema", "json_object_schema"] * 2


@pytest.mark.parametrize(
    ("profile", "forced", "sent"),
    [
        ("llama-cpp-python", "json_schema", ["json_schema"]),
        ("lm-studio", "json_object", ["json_object_schema", "json_object"]),
        ("litellm", "json_object", ["json_object_schema", "json_object"]),
    ],
)
def test_forced_format_the_server_refuses_is_format_unsupported(
    make_judge: MakeJudge, profile: str, forced: str, sent: list[str]
) -> None:
    with FakeOpenAIServer(profile=profile) as srv:
        judge = make_judge(base_url=srv.url, response_format=forced, failure_threshold=1)
        ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
        assert ev.label == "error" and ev.error_type == "format_unsupported"
        assert 'response_format="auto"' in (ev.error or "")
        assert [format_kind(r.body.get("response_format")) for r in srv.completions()] == sent
        assert judge.circuit_state == "closed" and judge.negotiated_format is None


def test_a_500_that_is_not_about_the_format_is_still_a_server_fault(
    make_judge: MakeJudge,
) -> None:
    with FakeOpenAIServer(profile="llama-cpp-python") as srv:
        judge = make_judge(base_url=srv.url, max_attempts=2, failure_threshold=2, cache_size=0)
        gw.evaluate(ANSWER, PASSAGES, judge=judge)  # negotiates json_object_schema
        srv.push(Reply(status=500, error="llama_decode returned -1"), Reply(status=500))
        ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
        assert ev.error_type == "http_500" and judge.stats.retries == 1
        assert judge.circuit_state == "open"
        assert judge.negotiated_format == "json_object_schema"  # not stepped down
