from __future__ import annotations

from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."


def test_record_is_scored_in_the_callers_trace(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    with capgw.tracer.start_as_current_span("request") as request:
        monitor.record(
            question="How tall?",
            contexts=[PASSAGE],
            answer="The Eiffel Tower stands 330 metres tall.",
        )
    [(record, evaluation)] = capgw.results()
    assert evaluation.label == "grounded"
    assert record.contexts[0].text == PASSAGE
    [span] = capgw.spans()
    assert span.parent is not None
    assert span.parent.span_id == request.get_span_context().span_id
    assert span.context.trace_id == request.get_span_context().trace_id
