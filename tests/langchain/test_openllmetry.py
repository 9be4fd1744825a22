"""Side by side with OpenLLMetry's LangChain instrumentation (opentelemetry-instrumentation-
langchain), which makes its spans current while a run is going on."""

from __future__ import annotations

import groundwatch_langchain
import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from opentelemetry.instrumentation.langchain import LangchainInstrumentor

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import build, run


@pytest.mark.parametrize("attach", ["instrument_first", "instrument_last", "handler"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "astream"])
def test_evaluation_sits_in_the_openllmetry_trace(
    capgw: GroundwatchTelemetry, attach: str, mode: str, pristine_callback_manager: None
) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    config = {}
    if attach == "instrument_first":
        groundwatch_langchain.instrument(monitor)
    LangchainInstrumentor().instrument(tracer_provider=capgw.tracer_provider)
    try:
        if attach == "instrument_last":
            groundwatch_langchain.instrument(monitor)
        elif attach == "handler":
            config = {"callbacks": [GroundwatchCallbackHandler(monitor)]}
        run(build("lcel").chain, ["What is the refund policy?"], mode, config)  # type: ignore[arg-type]
        (evaluation_span,) = capgw.spans()
    finally:
        LangchainInstrumentor().uninstrument()
        groundwatch_langchain.uninstrument()

    theirs = [s for s in capgw.spans(None) if s.name != sc.SPAN_EVALUATION]
    their_roots = [s for s in theirs if s.parent is None]
    assert len(their_roots) == 1, [s.name for s in theirs]
    # No span was current when the run started: the evaluation joins their trace, under their
    # span for the run.
    assert evaluation_span.context.trace_id == their_roots[0].context.trace_id
    assert evaluation_span.parent is not None
    assert evaluation_span.parent.span_id == their_roots[0].context.span_id
