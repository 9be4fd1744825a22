"""OpenAIJudge through the real ``openai`` client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable

import pytest

import groundwatch as gw
from groundwatch import ConfigWarning, OpenAIJudge
from groundwatch.judging.judges._prompt import PROMPT_VERSION, SYSTEM_PROMPT
from testkit.fake_openai import FakeOpenAIServer, Reply, parse_prompt

from .conftest import TEST_KEY

MakeJudge = Callable[..., OpenAIJudge]

PASSAGES = [
    "The Eiffel Tower was completed in 1889. It is 330 metres tall.",
    "Gustave Eiffel's company designed and built the tower for the World's Fair.",
]
ANSWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889."
GOOD = {
    "claims": [
        {
            "claim": "The Eiffel Tower is 330 metres tall.",
            "passage": 1,
            "quote": "It is 330 metres tall.",
            "reason": "stated",
            "verdict": "supported",
        },
        {
            "claim": "It was completed in 1889.",
            "passage": 1,
            "quote": "The Eiffel Tower was completed in 1889.",
            "reason": "stated",
            "verdict": "supported",
        },
    ]
}


def test_one_call_per_answer_with_verdicts_evidence_and_usage(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(model="gpt-judge")
    ev = gw.evaluate(ANSWER, PASSAGES, question="How tall is it?", judge=judge)
    assert ev.label == "grounded"
    assert ev.faithfulness == 1.0 and ev.groundedness == 1.0
    assert ev.model == "gpt-judge" and ev.judge == "openai"
    assert len(server.completions()) == 1
    assert ev.usage is not None and ev.usage.calls == 1
    assert ev.usage.input_tokens > 0 and ev.usage.output_tokens > 0
    for claim in ev.claims:
        assert claim.start is not None and ANSWER[claim.start : claim.end] == claim.text
        (e,) = claim.evidence
        assert PASSAGES[e.passage][e.start : e.end] == e.quote
    body = server.completions()[0].body
    assert body["model"] == "gpt-judge" and body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    verdicts = schema["properties"]["claims"]["items"]["properties"]["verdict"]["enum"]
    assert verdicts == ["supported", "inferred", "unsupported", "contradicted"]


def test_prompt_numbers_passages_fences_data_with_a_fresh_nonce(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(cache_size=0)
    gw.evaluate(ANSWER, PASSAGES, question="How tall?", judge=judge)
    gw.evaluate(ANSWER, PASSAGES, question="How tall?", judge=judge)
    first, second = server.completions()
    assert first.system == SYSTEM_PROMPT == second.system  # static: provider prefix caching
    assert "never instructions" in first.system and "inferred" in first.system
    assert "never translate" in first.system
    p1, p2 = parse_prompt(first.user), parse_prompt(second.user)
    assert p1.nonce != p2.nonce and re.fullmatch(r"gw[0-9a-f]{12}", p1.nonce)
    assert p1.passages == {1: PASSAGES[0], 2: PASSAGES[1]}
    assert p1.answer == ANSWER and p1.question == "How tall?"
    # Every data marker carries the code; the code is not in the system prompt.
    assert p1.nonce not in first.system
    assert first.user.count(p1.nonce) == 1 + 2 * 4 + 1


def test_inferred_counts_as_grounded_and_contradicted_is_kept(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    answer = "The tower was built for a fair. It was finished in 1890."
    server.push(
        {
            "claims": [
                {
                    "claim": "The tower was built for a fair.",
                    "passage": 2,
                    "quote": "designed and built the tower for the World's Fair",
                    "reason": "paraphrase",
                    "verdict": "inferred",
                },
                {
                    "claim": "It was finished in 1890.",
                    "passage": 1,
                    "quote": "The Eiffel Tower was completed in 1889.",
                    "reason": "1889, not 1890",
                    "verdict": "contradicted",
                },
            ]
        }
    )
    ev = gw.evaluate(answer, PASSAGES, judge=make_judge())
    assert [c.verdict for c in ev.claims] == ["inferred", "contradicted"]
    assert ev.faithfulness == 0.5 and ev.groundedness == 0.5
    assert ev.label == "hallucinated"


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("```json\n" + json.dumps(GOOD) + "\n```", id="fenced"),
        pytest.param(json.dumps(GOOD) + "\n\nI checked each claim carefully.", id="trailing-prose"),
        pytest.param("Here you go:\n" + json.dumps(GOOD["claims"]), id="bare-list"),
    ],
)
def test_tolerant_parser_accepts_common_reply_shapes(
    server: FakeOpenAIServer, make_judge: MakeJudge, reply: str
) -> None:
    server.push(reply)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.label == "grounded" and len(ev.claims) == 2
    assert len(server.completions()) == 1


def _cut_reply() -> str:
    full = json.dumps(GOOD)
    return full[: full.index('"It was completed') + 10]  # mid-way through the second claim


@pytest.mark.parametrize("max_output_tokens", [None, 300])
def test_reply_cut_at_its_token_limit_is_retried_once_with_a_larger_budget(
    server: FakeOpenAIServer, make_judge: MakeJudge, max_output_tokens: int | None
) -> None:
    server.push(Reply(content=_cut_reply(), finish_reason="length"), GOOD)
    judge = make_judge(max_output_tokens=max_output_tokens)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.label == "grounded" and len(ev.claims) == 2
    first, second = server.completions()
    assert first.body.get("max_tokens") == max_output_tokens
    assert second.body["max_tokens"] >= max(2 * (max_output_tokens or 0), 2048)
    assert judge.stats.length_retries == 1 and judge.stats.retries == 0
    assert judge.circuit_state == "closed"


def test_reply_cut_twice_is_a_truncated_error(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    cut = Reply(content=_cut_reply(), finish_reason="length")
    server.push(cut, cut, GOOD)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.label == "error" and ev.error_type == "truncated"
    assert "token limit" in (ev.error or "") and len(server.completions()) == 2


def test_cut_json_the_server_called_complete_keeps_the_complete_claims(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    # A stop sequence or a proxy can end a reply mid-way without finish_reason="length".
    server.push(Reply(content=_cut_reply(), finish_reason="stop"))
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert len(server.completions()) == 1 and judge.stats.tolerant_replies == 1
    first = ev.claims[0]
    assert first.verdict == "supported" and first.text == "The Eiffel Tower is 330 metres tall."
    # The lost claim's sentence is not silently dropped: it comes back as unsupported.
    assert ev.claims[1].text == "It was completed in 1889."
    assert ev.claims[1].verdict == "unsupported"
    assert judge.stats.added == 1


@pytest.mark.parametrize(
    ("finish_reason", "refusal"),
    [("stop", "I can't help with that request."), ("content_filter", None)],
)
def test_refusal_is_a_refused_error(
    server: FakeOpenAIServer, make_judge: MakeJudge, finish_reason: str, refusal: str | None
) -> None:
    server.push(Reply(content=None, finish_reason=finish_reason, refusal=refusal))
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.label == "error" and ev.error_type == "refused"
    assert len(server.completions()) == 1  # asking again gets the same refusal


def test_malformed_reply_is_retried_once(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    server.push('{"claims": [{"claim": "The Eiffel', GOOD)  # unrepairable, then good
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.label == "grounded"
    assert len(server.completions()) == 2 and judge.stats.reply_retries == 1
    assert ev.usage is not None and ev.usage.calls == 2
    first, second = server.completions()
    assert parse_prompt(first.user).nonce != parse_prompt(second.user).nonce


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("I cannot help with that.", id="prose"),
        pytest.param(Reply(content=None), id="null-content"),
        pytest.param('{"verdict": "supported"}', id="wrong-shape"),
        pytest.param("[1, 2, 3]", id="not-objects"),
    ],
)
def test_unusable_twice_is_an_error_evaluation_not_an_exception(
    server: FakeOpenAIServer, make_judge: MakeJudge, bad: Reply | str
) -> None:
    server.push(bad, bad)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.label == "error" and ev.error_type == "bad_reply"
    assert ev.faithfulness is None and ev.groundedness is None
    assert ev.usage is not None and ev.usage.calls == 2
    assert len(server.completions()) == 2


def test_unknown_verdict_and_missing_quote_do_not_count_as_support(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(
        {
            "claims": [
                {"claim": "The Eiffel Tower is 330 metres tall.", "verdict": "definitely"},
                {"claim": "It was completed in 1889.", "verdict": "supported", "quote": ""},
            ]
        }
    )
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert [c.verdict for c in ev.claims] == ["unsupported", "unsupported"]
    assert ev.evidence_rejected == 1  # the supported claim without a quote


def test_quote_with_wrong_passage_number_is_located_in_the_right_one(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    reply = json.loads(json.dumps(GOOD))
    reply["claims"][0]["passage"] = 2
    reply["claims"][0]["quote"] = "it is 330  metres tall"  # case and spacing differ
    server.push(reply)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    e = ev.claims[0].evidence[0]
    assert e.passage == 0 and PASSAGES[0][e.start : e.end] == "It is 330 metres tall"


def test_fabricated_quote_is_downgraded_and_counted(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    reply = json.loads(json.dumps(GOOD))
    reply["claims"][1]["quote"] = "The tower opened to the public in 1889."
    server.push(reply)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert ev.claims[1].verdict == "unsupported" and ev.evidence_rejected == 1
    assert ev.label == "hallucinated"


# --- response_format negotiation -------------------------------------------------------------


def test_json_schema_refused_falls_back_to_json_mode_and_remembers(make_judge: MakeJudge) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema"}) as srv:
        judge = make_judge(base_url=srv.url)
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
        assert [r.response_format for r in srv.completions()] == ["json_schema", "json_object"]
        # JSON mode carries the reply schema (llama-cpp-python turns it into a grammar).
        assert srv.completions()[1].body["response_format"]["schema"]["required"] == ["claims"]
        assert gw.evaluate(ANSWER + " ", PASSAGES, judge=judge).label == "grounded"
        assert [r.response_format for r in srv.completions()][2:] == ["json_object"]
        assert judge.response_format_in_use == "json_object_schema"
        assert judge.negotiated_format == "json_object_schema"
        assert judge.stats.format_fallbacks == 1 and judge.stats.retries == 0


def test_no_structured_output_at_all_falls_back_to_plain_text(make_judge: MakeJudge) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema", "json_object"}) as srv:
        judge = make_judge(base_url=srv.url)
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
        assert [r.response_format for r in srv.completions()] == [
            "json_schema",
            "json_object",
            "json_object",
            None,
        ]
        assert judge.response_format_in_use == "none" == judge.negotiated_format


def test_forced_format_refused_is_an_error(make_judge: MakeJudge) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema"}) as srv:
        judge = make_judge(base_url=srv.url, response_format="json_schema", failure_threshold=1)
        ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
        assert ev.label == "error" and ev.error_type == "format_unsupported"
        assert "response_format" in (ev.error or "")
        assert len(srv.completions()) == 1  # not retried
        assert judge.circuit_state == "closed"  # a refusal is not an endpoint failure


def test_unrelated_400_does_not_step_down_format(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(Reply(status=400, error="maximum context length exceeded"))
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.error_type == "http_400" and judge.response_format_in_use == "json_schema"
    assert len(server.completions()) == 1


# --- retries, timeouts, circuit breaker -----------------------------------------------------


def test_429_waits_for_retry_after(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    server.push(Reply(status=429, headers={"Retry-After": "0.4"}, error="slow down"))
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.label == "grounded"
    first, second = server.completions()
    assert second.at - first.at >= 0.4  # backoff alone would be ~0.01 s here
    assert judge.stats.retries == 1 and ev.usage is not None and ev.usage.calls == 2


def test_429_asking_for_too_long_a_wait_fails_fast(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(Reply(status=429, headers={"retry-after": "120"}, error="quota"))
    started = time.monotonic()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge(max_retry_after_seconds=5))
    assert time.monotonic() - started < 2
    assert ev.label == "error" and ev.error_type == "rate_limited"
    assert len(server.completions()) == 1


def test_5xx_are_retried_with_backoff(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    server.push(Reply(status=500, error="boom"), Reply(status=503, error="busy"))
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.label == "grounded" and judge.stats.retries == 2
    assert len(server.completions()) == 3


def test_persistent_5xx_gives_an_error_evaluation_after_max_attempts(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(*[Reply(status=502, error="bad gateway")] * 3)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge(max_attempts=3))
    assert ev.label == "error" and ev.error_type == "http_502"
    assert "502" in (ev.error or "") and len(server.completions()) == 3


def test_hang_times_out_and_is_retried(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    server.push(Reply(content=json.dumps(GOOD), delay=3.0))
    judge = make_judge(timeout_seconds=0.3)
    started = time.monotonic()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert time.monotonic() - started < 2.0
    assert ev.label == "grounded" and judge.stats.retries == 1


def test_hang_on_every_attempt_is_a_timeout_error(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(Reply(delay=3.0, content="{}"), Reply(delay=3.0, content="{}"))
    started = time.monotonic()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge(timeout_seconds=0.2, max_attempts=2))
    assert time.monotonic() - started < 1.5
    assert ev.label == "error" and ev.error_type == "timeout"


def test_circuit_breaker_fails_fast_then_probes(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(max_attempts=1, failure_threshold=2, recovery_seconds=0.3, cache_size=0)
    server.push(Reply(status=500), Reply(status=500))
    for _ in range(2):
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).error_type == "http_500"
    assert judge.circuit_state == "open"
    sent = len(server.completions())
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.error_type == "circuit_open" and len(server.completions()) == sent
    time.sleep(0.35)
    assert judge.circuit_state == "half_open"
    server.push(Reply(status=500))  # the probe fails: open again
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).error_type == "http_500"
    assert judge.circuit_state == "open"
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).error_type == "circuit_open"
    time.sleep(0.35)
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"  # probe succeeds
    assert judge.circuit_state == "closed"
    assert judge.stats.circuit_rejections == 2


def test_connection_refused_is_an_error_evaluation(make_judge: MakeJudge) -> None:
    srv = FakeOpenAIServer().start()
    url = srv.url
    srv.stop()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge(base_url=url, max_attempts=2))
    assert ev.label == "error" and ev.error_type == "connection"


def test_garbage_http_body_is_an_error_evaluation(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(Reply(status=500), Reply(raw=b"<html>gateway</html>"))
    judge = make_judge(max_attempts=1, failure_threshold=1, recovery_seconds=0.0)
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).error_type == "http_500"  # breaker opens
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)  # the probe gets garbage
    assert ev.label == "error" and ev.error_type == "bad_reply"
    assert len(server.completions()) == 2  # not retried
    assert judge.stats.evaluations == 2 and judge.stats.errors == 2
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"  # breaker not stuck


# --- concurrency, async and sync use, cache ---------------------------------------------------


async def test_concurrency_limit_holds_across_callers(make_judge: MakeJudge) -> None:
    with FakeOpenAIServer(latency=0.15) as srv:
        judge = make_judge(base_url=srv.url, concurrency=3)
        answers = [f"The Eiffel Tower is 330 metres tall. Variant {i}." for i in range(9)]
        results = await asyncio.gather(*(gw.aevaluate(a, PASSAGES, judge=judge) for a in answers))
        assert all(r.label != "error" for r in results)
        assert srv.max_in_flight == 3
        assert len(srv.completions()) == 9


async def test_sync_evaluate_inside_a_running_loop(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)  # blocking call from async code
    assert ev.label == "grounded"
    ev2 = await gw.aevaluate(ANSWER, PASSAGES, judge=judge)
    assert ev2.label == "grounded"


def test_one_judge_serves_many_event_loops(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    judge = make_judge(cache_size=0)
    for _ in range(3):  # each asyncio.run is a new loop; the judge's client must survive
        ev = asyncio.run(gw.aevaluate(ANSWER, PASSAGES, judge=judge))
        assert ev.label == "grounded"
    assert len(server.completions()) == 3


def test_cache_hits_cost_nothing_and_key_covers_inputs(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(cache_size=2)
    first = gw.evaluate(ANSWER, PASSAGES, question="q", judge=judge)
    again = gw.evaluate(ANSWER, PASSAGES, question="q", judge=judge)
    assert len(server.completions()) == 1
    assert again.usage is not None and again.usage.calls == 0
    assert again.claims == first.claims and judge.stats.cache_hits == 1
    gw.evaluate(ANSWER, PASSAGES, question="other", judge=judge)
    gw.evaluate(ANSWER, PASSAGES[:1], question="q", judge=judge)
    assert len(server.completions()) == 3
    gw.evaluate(ANSWER, PASSAGES, question="q", judge=judge)  # evicted (LRU of 2)
    assert len(server.completions()) == 4


def test_errors_are_not_cached(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    judge = make_judge(max_attempts=1)
    server.push(Reply(status=500))
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "error"
    assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"


def test_cache_key_includes_config_and_prompt_version(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    a = make_judge(model="a")._cache_key(ANSWER, [gw.Passage(text="x")], None)
    b = make_judge(model="b")._cache_key(ANSWER, [gw.Passage(text="x")], None)
    c = make_judge(model="a", max_context_tokens=99)._cache_key(
        ANSWER, [gw.Passage(text="x")], None
    )
    assert len({a, b, c}) == 3
    assert PROMPT_VERSION  # part of the key; bumping it invalidates old entries


# --- secrets ----------------------------------------------------------------------------------


def test_api_key_never_in_errors_logs_or_repr(
    server: FakeOpenAIServer, make_judge: MakeJudge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(
        Reply(status=401, error=f"Incorrect API key provided: {TEST_KEY}. Bearer {TEST_KEY}")
    )
    judge = make_judge()
    ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
    assert ev.label == "error" and ev.error_type == "http_401"
    assert server.completions()[0].headers["authorization"] == f"Bearer {TEST_KEY}"
    for text in (ev.error or "", ev.explanation, ev.model_dump_json(), repr(judge), caplog.text):
        assert TEST_KEY not in text
        assert "SECRETKEY" not in text
    other = make_judge(base_url="https://u:secret@example.invalid/v1?api-key=zzz")
    assert "secret" not in repr(other) and "zzz" not in repr(other)
    assert "[REDACTED]" in (ev.error or "")


def test_missing_key_for_openai_is_a_clear_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="API key"):
        OpenAIJudge("gpt-4o-mini")


def test_local_servers_need_no_key(
    monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = OpenAIJudge("llama3.1", base_url=server.url)
    try:
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
    finally:
        judge.close()


def test_given_client_is_used_without_its_own_retries(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai import AsyncOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-which-is-not-the-clients")
    client = AsyncOpenAI(api_key=TEST_KEY, base_url=server.url, max_retries=5)
    judge = OpenAIJudge("m", client=client, max_attempts=1, name="azure")
    try:
        server.push(Reply(status=500, error=f"bad key {TEST_KEY}"))
        ev = gw.evaluate(ANSWER, PASSAGES, judge=judge)
        assert ev.error_type == "http_500" and ev.judge == "azure"
        assert len(server.completions()) == 1  # the client's 5 retries are off
        assert server.completions()[0].headers["authorization"] == f"Bearer {TEST_KEY}"
        assert TEST_KEY not in repr(judge) and TEST_KEY not in (ev.error or "")
    finally:
        judge.close()


# --- long and multilingual contexts ------------------------------------------------------------


def _filler(i: int, n: int = 40) -> str:
    return " ".join(
        f"Section {i}.{k} describes unrelated maintenance schedules for district heating pipes."
        for k in range(n)
    )


def test_long_context_is_trimmed_to_relevant_sentences_keeping_numbers(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    passages = [_filler(i) for i in range(10)]
    fact = "The Millau Viaduct is 343 metres tall at its highest pylon."
    passages[6] = _filler(6, 20) + " " + fact + " " + _filler(60, 20)
    answer = "The Millau Viaduct is 343 metres tall."
    judge = make_judge(max_context_tokens=300)
    ev = gw.evaluate(answer, passages, judge=judge)
    req = server.completions()[0]
    prompt = parse_prompt(req.user)
    assert 7 in prompt.passages and fact in prompt.passages[7]  # numbering kept
    for n, shown in prompt.passages.items():  # every kept piece is verbatim from its passage
        assert all(p.strip() in passages[n - 1] for p in shown.split("[...]") if p.strip())
    assert len(prompt.passages) < 10 and "nothing relevant" in req.user
    assert "[...]" in prompt.passages[7]
    assert len(req.user) < 0.1 * sum(len(p) for p in passages)
    assert ev.label == "grounded"
    (e,) = ev.claims[0].evidence
    assert e.passage == 6 and passages[6][e.start : e.end] == fact
    assert judge.stats.trimmed == 1
    assert ev.truncated  # the judge's own cut is marked, so a gate sees it


def test_short_context_is_not_trimmed(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    ev = gw.evaluate(ANSWER, PASSAGES, judge=make_judge())
    assert "[...]" not in server.completions()[0].user
    assert not ev.truncated


def test_chinese_claims_and_quotes_stay_in_chinese(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    passages = ["该公司2023年营业收入为500万元，同比增长20%。公司总部位于杭州。"]
    answer = "该公司2023年营业收入为500万元。公司总部位于北京。"
    server.push(
        {
            "claims": [
                {
                    "claim": "该公司2023年营业收入为500万元",
                    "passage": 1,
                    "quote": "该公司2023年营业收入为500万元",
                    "reason": "原文",
                    "verdict": "supported",
                },
                {
                    "claim": "公司总部位于北京",
                    "passage": 1,
                    "quote": "公司总部位于杭州",
                    "reason": "杭州，不是北京",
                    "verdict": "contradicted",
                },
            ]
        }
    )
    ev = gw.evaluate(answer, passages, judge=make_judge())
    supported, other = ev.claims
    assert supported.verdict == "supported" and answer[supported.start : supported.end] == (
        "该公司2023年营业收入为500万元"
    )
    (e,) = supported.evidence
    assert passages[0][e.start : e.end] == "该公司2023年营业收入为500万元"
    assert other.verdict == "contradicted" and other.evidence[0].quote == "公司总部位于杭州"
    assert ev.label == "hallucinated" and ev.faithfulness == 0.5
    assert parse_prompt(server.completions()[0].user).answer == answer  # sent untranslated


def test_no_claim_answer_is_no_claims(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    server.push({"claims": []})
    ev = gw.evaluate("I don't know.", PASSAGES, judge=make_judge())
    assert ev.label == "no_claims" and ev.faithfulness is None


def test_judge_protocol_and_exports() -> None:
    assert "OpenAIJudge" in gw.__all__ and "CascadeJudge" in gw.__all__
    judge = OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert isinstance(judge, gw.Judge)
    judge.close()


def test_own_requests_run_with_instrumentation_suppressed(server: FakeOpenAIServer) -> None:
    """Instrumentations (httpx, openai) skip spans when this key is set: the judge's calls
    must not appear in the user's traces."""
    import openai
    from opentelemetry import context as otel_context

    seen: list[object] = []

    async def hook(request: object) -> None:
        seen.append(otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY))

    client_cls = getattr(openai, "DefaultAsyncHttpx2Client", None) or openai.DefaultAsyncHttpxClient
    http_client = client_cls(event_hooks={"request": [hook]})
    client = openai.AsyncOpenAI(api_key=TEST_KEY, base_url=server.url, http_client=http_client)
    judge = OpenAIJudge("m", client=client)
    try:
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
    finally:
        judge.close()
    assert seen == [True]
    assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is None


@pytest.mark.parametrize(
    ("claim", "quote", "verdict", "kept"),
    [
        # A number nowhere in the passages cannot be supported, however similar the quote.
        ("It is 400 metres tall.", "It is 330 metres tall.", "supported", False),
        # A partial quote is fine when the claim's numbers are elsewhere in its passage.
        (
            "It is 330 metres tall and was completed in 1889.",
            "It is 330 metres tall.",
            "supported",
            True,
        ),
        # An inference keeps the claim's numbers too (the local judge's rule): a computed
        # number is not in the evidence.
        ("It is over 300 metres tall.", "It is 330 metres tall.", "inferred", False),
        # A name the quote's passage does not mention.
        ("It was designed by Leonardo da Vinci.", "It is 330 metres tall.", "supported", False),
        # A quote that has nothing to do with the claim.
        ("It was painted gold.", "It is 330 metres tall.", "supported", False),
    ],
)
def test_claim_must_be_backed_by_its_quote(
    server: FakeOpenAIServer,
    make_judge: MakeJudge,
    claim: str,
    quote: str,
    verdict: str,
    kept: bool,
) -> None:
    server.push(
        {
            "claims": [
                {"claim": claim, "passage": 1, "quote": quote, "reason": "", "verdict": verdict}
            ]
        }
    )
    judge = make_judge()
    ev = gw.evaluate(claim, PASSAGES, judge=judge)
    assert ev.claims[0].verdict == (verdict if kept else "unsupported")
    # Word overlap is the judge's own check; numbers and names are scoring's, for every judge.
    assert judge.stats.downgraded + ev.evidence_rejected == int(not kept)
    assert ev.claims[0].evidence  # the (real) quote is kept for the record either way


def test_checks_off_trusts_the_model_but_scoring_still_verifies_quotes(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(
        {
            "claims": [
                {
                    "claim": "It was painted gold.",
                    "passage": 1,
                    "quote": "It is 330 metres tall.",
                    "reason": "",
                    "verdict": "supported",
                },
                {
                    "claim": "It is blue.",
                    "passage": 1,
                    "quote": "It is blue.",
                    "reason": "",
                    "verdict": "supported",
                },
            ]
        }
    )
    ev = gw.evaluate("It was painted gold. It is blue.", PASSAGES, judge=make_judge(checks=False))
    assert [c.verdict for c in ev.claims] == ["supported", "unsupported"]
    assert ev.evidence_rejected == 1


async def test_close_during_a_request_ends_it_as_an_error(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    server.push(Reply(content=json.dumps(GOOD), delay=3.0))
    judge = make_judge(timeout_seconds=10)
    pending = asyncio.ensure_future(gw.aevaluate(ANSWER, PASSAGES, judge=judge))
    while not server.completions():
        await asyncio.sleep(0.01)
    started = time.monotonic()
    await judge.aclose()
    ev = await asyncio.wait_for(pending, 2)
    assert time.monotonic() - started < 2
    assert ev.label == "error" and ev.error_type == "internal"
    assert "closed" in (ev.error or "")
    # Usable again afterwards (a new loop and client).
    assert (await gw.aevaluate(ANSWER, PASSAGES, judge=judge)).label == "grounded"


def test_context_manager_closes(server: FakeOpenAIServer) -> None:
    with OpenAIJudge("m", base_url=server.url, api_key=TEST_KEY) as judge:
        assert gw.evaluate(ANSWER, PASSAGES, judge=judge).label == "grounded"
        thread = judge._loop._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()


@pytest.mark.parametrize(
    ("quote", "snapped"),
    [
        # A copy with slips (a word changed, punctuation lost): the real sentence is used.
        ("Gustave Eiffel's company designed and constructed the tower for the World's Fair", True),
        # Found as is (case, spacing): nothing to snap.
        ("gustave eiffel's company  designed and built the tower", False),
        # Another statement, a number not in the sentence, a fragment: not snapped, rejected.
        ("Gustave Eiffel's company designed the tower in Paris for the Expo.", False),
        ("Gustave Eiffel's company designed and built the tower for the 1900 World's Fair", False),
        ("Eiffel company built", False),  # a fragment of a longer sentence
    ],
)
def test_quote_with_slips_snaps_to_the_real_sentence(
    server: FakeOpenAIServer, make_judge: MakeJudge, quote: str, snapped: bool
) -> None:
    answer = "Gustave Eiffel's company built the tower."
    server.push(
        {"claims": [{"claim": answer, "verdict": "supported", "passage": 1, "quote": quote}]}
    )
    judge = make_judge()
    ev = gw.evaluate(answer, PASSAGES, judge=judge)
    assert judge.stats.quotes_snapped == int(snapped)
    (e,) = ev.claims[0].evidence or [None]
    if snapped:
        assert e is not None and e.quote == PASSAGES[1][:-1] + "."
        assert PASSAGES[e.passage][e.start : e.end] == e.quote
    exact = "  designed" in quote
    assert (ev.claims[0].verdict == "supported") == (snapped or exact), ev.claims[0].reason


def test_judge_settings_from_env_through_the_shared_reader(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE_CONCURRENCY", "3")
    monkeypatch.setenv("GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS", "lots")
    # The bad value is said where a person sees it: a ConfigWarning (stderr by default).
    with pytest.warns(ConfigWarning, match="GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS='lots'"):
        judge = OpenAIJudge("m", base_url=server.url, api_key=TEST_KEY)
    try:
        assert judge.concurrency == 3
        assert judge.max_context_tokens == 3000  # the default
    finally:
        judge.close()
