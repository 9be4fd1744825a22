"""CascadeJudge: the local judge decides the clear answers, the LLM only the unclear ones."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

import groundwatch as gw
from groundwatch import CascadeJudge, OpenAIJudge
from groundwatch.types import Claim, Evidence, Judgement, Passage
from testkit.fake_openai import FakeOpenAIServer, Reply

MakeJudge = Callable[..., OpenAIJudge]

PASSAGES = ["The Eiffel Tower was completed in 1889. It is 330 metres tall."]
ANSWER = "The Eiffel Tower is 330 metres tall."


class ScriptedLocal:
    """A first judge whose claim confidence / verdict / failure each test chooses."""

    name = "local"

    def __init__(
        self,
        confidence: float | None,
        verdict: str = "supported",
        fail: bool = False,
    ) -> None:
        self.confidence = confidence
        self.verdict = verdict
        self.fail = fail
        self.calls = 0

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        self.calls += 1
        if self.fail:
            raise RuntimeError("local judge crashed")
        evidence = [Evidence(passage=0, start=40, end=62, quote=contexts[0].text[40:62])]
        return Judgement(
            claims=[
                Claim(
                    text=answer,
                    start=0,
                    end=len(answer),
                    verdict=self.verdict,  # type: ignore[arg-type]
                    evidence=evidence if self.verdict != "unsupported" else [],
                    confidence=self.confidence,
                )
            ]
        )


def _cascade(first: Any, then: OpenAIJudge, **kw: Any) -> CascadeJudge:
    return CascadeJudge(first=first, then=then, **kw)


def test_confident_local_answer_is_not_escalated(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    cascade = _cascade(ScriptedLocal(0.95), make_judge())
    ev = gw.evaluate(ANSWER, PASSAGES, judge=cascade)
    assert ev.label == "grounded" and ev.judge == "cascade(local,openai)"
    assert server.completions() == []
    assert (cascade.escalated, cascade.total) == (0, 1)


def test_unsure_local_answer_goes_to_the_llm_in_one_call(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    cascade = _cascade(ScriptedLocal(0.4), make_judge(model="gpt-judge"))
    answer = "The Eiffel Tower is 330 metres tall. It was painted gold in 2020."
    ev = gw.evaluate(answer, PASSAGES, judge=cascade)
    assert len(server.completions()) == 1  # the whole answer, one request
    assert ev.model == "gpt-judge" and ev.usage is not None and ev.usage.calls == 1
    assert [c.verdict for c in ev.claims] == ["supported", "unsupported"]  # the LLM's verdicts
    assert (cascade.escalated, cascade.total) == (1, 1)
    assert cascade.escalation_rate == 1.0


@pytest.mark.parametrize(
    ("confidence", "min_confidence", "escalate_unknown", "expected"),
    [
        (0.69, 0.7, True, True),
        (0.7, 0.7, True, False),
        (None, 0.7, True, True),
        (None, 0.7, False, False),
        (float("nan"), 0.7, True, True),  # NaN is no confidence at all, not a high one
        (0.99, 1.01, True, True),  # min_confidence above 1: always escalate
        (0.01, 0.0, True, False),  # 0: never on confidence
    ],
)
def test_escalation_rule_knobs(
    server: FakeOpenAIServer,
    make_judge: MakeJudge,
    confidence: float | None,
    min_confidence: float,
    escalate_unknown: bool,
    expected: bool,
) -> None:
    cascade = _cascade(
        ScriptedLocal(confidence),
        make_judge(),
        min_confidence=min_confidence,
        escalate_unknown=escalate_unknown,
    )
    gw.evaluate(ANSWER, PASSAGES, judge=cascade)
    assert cascade.escalated == int(expected)
    assert len(server.completions()) == int(expected)


def test_escalate_verdicts_sends_every_contradiction_to_the_llm(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    cascade = _cascade(
        ScriptedLocal(0.99, verdict="contradicted"),
        make_judge(),
        escalate_verdicts={"contradicted"},
    )
    ev = gw.evaluate(ANSWER, PASSAGES, judge=cascade)
    assert cascade.escalated == 1 and ev.label == "grounded"  # the LLM overruled it


def test_failing_first_judge_escalates(server: FakeOpenAIServer, make_judge: MakeJudge) -> None:
    cascade = _cascade(ScriptedLocal(0.99, fail=True), make_judge())
    ev = gw.evaluate(ANSWER, PASSAGES, judge=cascade)
    assert ev.label == "grounded" and cascade.escalated == 1


@pytest.mark.parametrize("fallback", [False, True])
def test_llm_failure_is_an_error_unless_fallback_to_first(
    server: FakeOpenAIServer, make_judge: MakeJudge, fallback: bool
) -> None:
    server.push(Reply(status=500))
    cascade = _cascade(ScriptedLocal(0.3), make_judge(max_attempts=1), fallback_to_first=fallback)
    ev = gw.evaluate(ANSWER, PASSAGES, judge=cascade)
    if fallback:
        assert ev.label == "grounded" and ev.claims[0].confidence == 0.3
        assert ev.usage is not None and ev.usage.calls == 1  # the failed call is still counted
    else:
        assert ev.label == "error" and ev.error_type == "http_500"


async def test_with_the_real_local_judge_async(
    server: FakeOpenAIServer, make_judge: MakeJudge
) -> None:
    cascade = _cascade(gw.LocalJudge(), make_judge())
    assert cascade.name == "cascade(local,openai)"
    ev = await gw.aevaluate(ANSWER, PASSAGES, judge=cascade)
    assert ev.label == "grounded"
    assert cascade.total == 1
    # Escalated exactly when the local judge was unsure of some claim.
    local = gw.LocalJudge().judge(ANSWER, [Passage(text=p) for p in PASSAGES], None)
    assert isinstance(local, Judgement)
    assert cascade.escalated == int(cascade.should_escalate(local))
    assert len(server.completions()) == cascade.escalated


def test_the_cascade_needs_no_telemetry_of_its_own(make_judge: MakeJudge) -> None:
    # Its counts are plain attributes; a monitor running it exports them (tests/runtime).
    cascade = CascadeJudge(first=ScriptedLocal(0.9), then=make_judge())
    assert gw.evaluate(ANSWER, PASSAGES, judge=cascade).label == "grounded"
    assert (cascade.escalated, cascade.total) == (0, 1)
