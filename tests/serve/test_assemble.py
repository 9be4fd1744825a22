"""Trace assembly: completion on root + quiet period, orphans, caps with counted evictions,
late spans; extraction of interactions per trace and per retriever + LLM pair."""

from __future__ import annotations

from typing import Any

from groundwatch.serve import SpanData, TraceAssembler, interactions
from groundwatch.serve._tally import Skips


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def span(
    trace: int,
    sid: int,
    parent: int = 0,
    *,
    start: int = 0,
    end: int = 1,
    name: str = "s",
    **attributes: Any,
) -> SpanData:
    return SpanData(
        trace.to_bytes(16, "big"),
        sid.to_bytes(8, "big"),
        parent.to_bytes(8, "big") if parent else b"",
        name,
        start,
        end,
        {k.replace("__", "."): v for k, v in attributes.items()},
        [],
        "svc",
    )


def retriever(trace: int, sid: int, parent: int, text: str, **kw: Any) -> SpanData:
    attrs = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": text,
    }
    s = span(trace, sid, parent, **kw)
    s.attributes.update(attrs)
    return s


def llm(trace: int, sid: int, parent: int, answer: str, **kw: Any) -> SpanData:
    s = span(trace, sid, parent, **kw)
    s.attributes.update(
        {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": answer}
    )
    return s


def assembler(clock: Clock, **kw: Any) -> TraceAssembler:
    kw.setdefault("quiet_s", 10)
    kw.setdefault("orphan_s", 60)
    kw.setdefault("max_traces", 100)
    kw.setdefault("max_spans", 100)
    return TraceAssembler(clock=clock, **kw)


def test_complete_after_root_and_quiet_period_not_before() -> None:
    clock = Clock()
    a = assembler(clock)
    a.add([retriever(1, 2, 1, "doc")])
    clock.now += 30
    assert a.due() == []  # no root yet: children end first, the root may still come
    a.add([span(1, 1)])
    clock.now += 9.9
    assert a.due() == []
    a.add([llm(1, 3, 1, "late child")])  # a late child restarts the quiet period
    clock.now += 9.9
    assert a.due() == []
    clock.now += 0.2
    ((root, spans, _),) = a.due()
    assert root.span_id == (1).to_bytes(8, "big")
    assert len(spans) == 3
    assert len(a) == 0
    assert a.counts.snapshot()[0] == {"accepted": 3}


def test_trace_without_root_is_assembled_after_the_orphan_timeout() -> None:
    clock = Clock()
    a = assembler(clock)
    a.add([retriever(1, 2, 99, "doc", start=5), llm(1, 3, 99, "x", start=7)])
    clock.now += 59
    assert a.due() == []
    clock.now += 2
    ((top, spans, _),) = a.due()
    assert top.span_id == (2).to_bytes(8, "big")  # the earliest stored span
    assert len(spans) == 2


def test_pending_traces_cap_evicts_the_oldest_and_counts_it() -> None:
    clock = Clock()
    a = assembler(clock, max_traces=3)
    for trace in range(1, 6):
        a.add([retriever(trace, 2, 1, "doc"), span(trace, 1)])
        clock.now += 1
    assert len(a) == 3
    spans, traces = a.counts.snapshot()
    assert traces == {"evicted": 2}
    assert spans == {"accepted": 10, "evicted": 4}
    clock.now += 20
    assert sorted(int.from_bytes(r.trace_id, "big") for r, *_ in a.due()) == [3, 4, 5]


def test_spans_per_trace_cap_evicts_the_oldest_and_keeps_the_root() -> None:
    clock = Clock()
    a = assembler(clock, max_spans=2)
    a.add([span(1, 1)])
    a.add([retriever(1, i, 1, f"doc {i}") for i in range(2, 7)])
    clock.now += 11
    ((root, spans, _),) = a.due()
    assert root.span_id == (1).to_bytes(8, "big")
    assert [s.attributes["retrieval.documents.0.document.content"] for s in spans[1:]] == [
        "doc 5",
        "doc 6",
    ]
    assert a.counts.snapshot()[0] == {"accepted": 6, "evicted": 3}


def test_spans_of_an_assembled_trace_are_counted_late() -> None:
    clock = Clock()
    a = assembler(clock)
    a.add([span(1, 1), retriever(1, 2, 1, "doc")])
    clock.now += 11
    assert len(a.due()) == 1
    a.add([llm(1, 3, 1, "straggler")])
    assert len(a) == 0
    assert a.counts.snapshot()[0] == {"accepted": 2, "late": 1}


def test_drain_returns_every_pending_trace() -> None:
    clock = Clock()
    a = assembler(clock)
    a.add([span(1, 1), retriever(2, 2, 7, "doc")])
    assert len(a.drain()) == 2
    assert len(a) == 0


def test_memory_stays_bounded_under_many_traces() -> None:
    clock = Clock()
    a = assembler(clock, max_traces=50)
    for trace in range(1, 5001):
        a.add([retriever(trace, 2, 1, "doc")])
    assert len(a) == 50
    assert a.counts.snapshot()[1] == {"evicted": 4950}


# --- extraction ------------------------------------------------------------------------------


def test_one_interaction_per_trace_takes_every_retriever_and_the_last_answer() -> None:
    root = span(1, 1, name="agent", start=0, end=100, **{"input.value": "Where and when?"})
    spans = [
        root,
        retriever(1, 2, 1, "Paris is in France.", start=1, end=2),
        llm(1, 3, 1, "draft", start=3, end=4),
        retriever(1, 4, 1, "It opens at 9.", start=5, end=6),
        llm(1, 5, 1, "Paris, at 9.", start=7, end=8),
    ]
    (found,) = interactions(root, spans, per_pair=False, skips=Skips())
    assert [p.text for p in found.passages] == ["Paris is in France.", "It opens at 9."]
    assert found.answer == "Paris, at 9."
    assert found.question == "Where and when?"
    assert found.llm is not None and found.llm.span_id == (5).to_bytes(8, "big")


def test_one_interaction_per_retriever_and_llm_pair() -> None:
    root = span(1, 1, start=0, end=100, **{"input.value": "q"})
    spans = [
        root,
        retriever(1, 2, 1, "first doc", start=1, end=2),
        llm(1, 3, 1, "first answer", start=3, end=4),
        llm(1, 4, 1, "no retrieval before me", start=5, end=6),
        retriever(1, 5, 1, "second doc", start=7, end=8),
        llm(1, 6, 1, "second answer", start=9, end=10),
    ]
    found = interactions(root, spans, per_pair=True, skips=Skips())
    assert [(i.answer, [p.text for p in i.passages]) for i in found] == [
        ("first answer", ["first doc"]),
        ("second answer", ["second doc"]),
    ]


def test_openllmetry_attribute_styles() -> None:
    root = span(1, 1, **{"traceloop.span.kind": "workflow"})
    root.attributes["traceloop.entity.input"] = '{"inputs": {"question": "How tall?"}}'
    store = span(1, 2, 1, name="chroma.query", start=1, end=2)
    store.events.append(
        (
            "db.query.result",
            {
                "db.query.result.document": "It is 330 m tall.",
                "db.query.result.id": "e1",
                "db.query.result.score": 0.9,
            },
        )
    )
    model = span(1, 3, 1, start=3, end=4)
    model.attributes.update(
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "How tall?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "330 m.",
        }
    )
    (found,) = interactions(root, [root, store, model], per_pair=False, skips=Skips())
    assert found.question == "How tall?"
    assert [(p.text, p.id, p.score) for p in found.passages] == [("It is 330 m tall.", "e1", 0.9)]
    assert found.answer == "330 m."
    assert found.source == "openllmetry"


def test_no_documents_or_no_answer_is_no_interaction() -> None:
    root = span(1, 1)
    assert interactions(root, [root, llm(1, 2, 1, "a")], per_pair=False, skips=Skips()) == []
    empty = retriever(1, 3, 1, "")
    assert interactions(root, [root, empty, llm(1, 2, 1, "a")], per_pair=False, skips=Skips()) == []
    assert interactions(root, [root, retriever(1, 3, 1, "d")], per_pair=False, skips=Skips()) == []


def test_pending_spans_keep_only_what_extraction_reads() -> None:
    clock = Clock()
    a = assembler(clock)
    model = llm(1, 3, 1, "The answer.")
    model.attributes.update(
        {
            "input.value": '{"messages": ["...the whole prompt..."]}',
            "output.value": '{"generations": ["...the whole response..."]}',
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Context: the documents, again",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "The question?",
        }
    )
    store = retriever(1, 2, 1, "doc")
    store.attributes.update(
        {"gen_ai.task.output": "a copy", "traceloop.entity.output": '{"documents": []}'}
    )
    chain_step = span(1, 4, 1, **{"openinference.span.kind": "CHAIN", "input.value": "x"})
    a.add([span(1, 1, **{"input.value": "The question?"}), store, model, chain_step])
    clock.now += 11
    ((root, spans, _),) = a.due()
    assert [s.span_id for s in spans] == [root.span_id, store.span_id, model.span_id]
    assert sorted(model.attributes) == [
        "llm.input_messages.1.message.content",
        "llm.input_messages.1.message.role",
        "llm.output_messages.0.message.content",
        "openinference.span.kind",
    ]
    assert "gen_ai.task.output" not in store.attributes
    assert "retrieval.documents.0.document.content" in store.attributes
    (found,) = interactions(root, spans, per_pair=False, skips=Skips())
    assert (found.question, found.answer) == ("The question?", "The answer.")


def _agent_trace() -> list[SpanData]:
    """Spans shaped as OpenInference's LangChain instrumentor emits a two-step agent: each
    step a chain whose retriever sits under a parallel-inputs chain and whose LLM under the
    step itself."""
    chain = {"openinference.span.kind": "CHAIN"}
    return [
        retriever(1, 12, 11, "first doc", start=2, end=3),
        span(1, 11, 10, start=1, end=4, **chain),
        llm(1, 13, 10, "first answer", start=5, end=6),
        span(1, 10, 1, name="step one", start=1, end=7, **chain),
        retriever(1, 22, 21, "second doc", start=9, end=10),
        span(1, 21, 20, start=8, end=11, **chain),
        llm(1, 23, 20, "second answer", start=12, end=13),
        span(1, 20, 1, name="step two", start=8, end=14, **chain),
        span(1, 1, start=0, end=15, **{"input.value": "q"}),
    ]


def test_pair_mode_parents_each_pair_to_its_nearest_common_ancestor() -> None:
    clock = Clock()
    a = assembler(clock, keep_parents=True)
    a.add(_agent_trace())
    clock.now += 11
    ((root, spans, parents),) = a.due()
    found = interactions(root, spans, per_pair=True, skips=Skips(), parents=parents)
    assert [(i.answer, i.parent_id) for i in found] == [
        ("first answer", (10).to_bytes(8, "big")),
        ("second answer", (20).to_bytes(8, "big")),
    ]
    # One interaction per trace stays under the root.
    (whole,) = interactions(root, spans, per_pair=False, skips=Skips(), parents=parents)
    assert whole.parent_id == root.span_id


def test_pair_mode_falls_back_to_the_root_when_the_lineage_is_broken() -> None:
    clock = Clock()
    a = assembler(clock, keep_parents=True)
    # The second step's parallel-inputs span never arrived: its retriever's line stops there.
    a.add([s for s in _agent_trace() if s.span_id != (21).to_bytes(8, "big")])
    clock.now += 11
    ((root, spans, parents),) = a.due()
    found = interactions(root, spans, per_pair=True, skips=Skips(), parents=parents)
    assert [i.parent_id for i in found] == [(10).to_bytes(8, "big"), root.span_id]


def test_parent_links_are_kept_only_when_asked_and_capped() -> None:
    clock = Clock()
    a = assembler(clock)
    a.add(_agent_trace())
    clock.now += 11
    ((_, _, parents),) = a.due()
    assert parents == {}
    a = assembler(clock, keep_parents=True, max_spans=3)
    a.add(_agent_trace())
    clock.now += 11
    ((_, _, parents),) = a.due()
    assert len(parents) == 3


def _event(trace: int, sid: int, name: str, **attributes: Any) -> Any:
    from groundwatch.serve._otlp import LogEvent

    return LogEvent(trace.to_bytes(16, "big"), sid.to_bytes(8, "big"), name, attributes, "svc")


def test_log_events_join_their_span_whichever_comes_first() -> None:
    clock = Clock()
    a = assembler(clock, max_spans=3)
    chat = span(1, 3, 1, **{"gen_ai.operation.name": "chat"})
    # The events first (an SDK exports logs as they are emitted), then the spans.
    a.add_events([_event(1, 3, "gen_ai.user.message", content="Where?")])
    a.add([retriever(1, 2, 1, "Paris is in France."), chat, span(1, 1)])
    a.add_events([_event(1, 3, "gen_ai.choice", message={"content": "In France."})])
    a.add_events([_event(1, 9, "gen_ai.choice", message={"content": "a span never stored"})])
    clock.now += 11
    ((root, spans, _),) = a.due()
    (found,) = interactions(root, spans, per_pair=False, skips=Skips())
    assert (found.question, found.answer) == ("Where?", "In France.")
    assert a.counts.log_snapshot() == {"accepted": 3, "unmatched": 1}
    a.add_events([_event(1, 3, "gen_ai.choice", message={"content": "too late"})])
    assert a.counts.log_snapshot()["late"] == 1


def test_log_events_per_trace_are_capped_oldest_first() -> None:
    clock = Clock()
    a = assembler(clock, max_spans=2)
    a.add_events([_event(1, 3, "gen_ai.choice", message={"content": str(i)}) for i in range(5)])
    a.add([span(1, 1), llm(1, 3, 1, "")])
    clock.now += 11
    ((_, spans, _),) = a.due()
    assert [e[1]["message"]["content"] for e in spans[1].events] == ["3", "4"]
    assert a.counts.log_snapshot() == {"accepted": 5, "evicted": 3}
