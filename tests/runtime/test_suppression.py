"""A judge's own instrumented calls stay out of the user's traces (real OpenInference)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groundwatch import Judgement, Passage
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge

fake_llms = pytest.importorskip("langchain_core.language_models.fake")
oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")


class LangChainCallingJudge(EchoJudge):
    """Calls a (fake) LangChain LLM, as an LLM judge would, then judges like EchoJudge."""

    name = "lc-judge"

    def __init__(self) -> None:
        super().__init__()
        self.llm = fake_llms.FakeListLLM(responses=["ok"] * 100)

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        self.llm.invoke("Is this grounded?")
        return super().judge(answer, contexts, question)


def test_instrumented_calls_inside_the_judge_make_no_spans(capgw: GroundwatchTelemetry) -> None:
    instrumentor = oi_langchain.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=capgw.tracer_provider)
    try:
        judge = LangChainCallingJudge()
        judge.llm.invoke("a call of the app itself")  # the control: this one is traced
        monitor = capgw.monitor(judge=judge)
        for _ in range(3):
            monitor.record(question="q", contexts=["It is 3 m."], answer="It is 3 m.")
        assert [e.label for e in capgw.evaluations()] == ["grounded"] * 3
        names = [span.name for span in capgw.spans(name=None)]
    finally:
        instrumentor.uninstrument()
    assert names.count("groundwatch.evaluation") == 3
    assert len([n for n in names if n != "groundwatch.evaluation"]) == 1, names
