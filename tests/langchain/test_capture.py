"""What the handler captures from real LangChain chains, for every way a chain can run."""

from __future__ import annotations

import asyncio
import logging
from operator import itemgetter
from typing import Any

import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda
from opentelemetry.trace import Tracer

from groundwatch import Decision
from groundwatch.testing import RecordingMonitor
from testkit.chains import (
    ANSWER,
    CASES,
    MODES,
    FailingRetriever,
    build,
    chat_model,
    format_docs,
    run,
    vector_store,
)
from testkit.chains import PROMPT as PROMPT_

QUESTIONS = ["What is the refund policy?", "How long does shipping take?"]


def _docs(record: dict[str, Any]) -> list[tuple[str | None, str]]:
    return sorted((p["id"], p["text"]) for p in record["contexts"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case_name", CASES)
def test_one_record_per_top_level_run(
    case_name: str, mode: str, monitor: RecordingMonitor, tracer: Tracer
) -> None:
    case = build(case_name)
    handler = GroundwatchCallbackHandler(monitor, route="support")
    with tracer.start_as_current_span("request") as request:
        outputs = run(
            case.chain, [case.make_input(q) for q in QUESTIONS], mode, {"callbacks": [handler]}
        )

    assert len(outputs) == len(QUESTIONS)
    assert len(monitor.records) == len(QUESTIONS), monitor.records
    assert monitor.failures == []
    # batch modes may finish in any order; match records to questions by the question.
    by_question = {r["question"]: r for r in monitor.records}
    assert sorted(by_question) == sorted(QUESTIONS)
    for question in QUESTIONS:
        record = by_question[question]
        # Streaming modes too: the whole answer, not the last chunk.
        assert record["answer"] == case.answer
        assert type(record["answer"]) is str
        assert _docs(record) == case.expected_docs(question)
        assert record["route"] == "support"
        # Parent of the evaluation = the span current when the run started, in every mode
        # (batch runs in a thread pool, async callbacks run inline on the loop).
        assert record["span_context"] == request.get_span_context()
        assert record["attributes"]["groundwatch.langchain.run_id"]
    assert len({r["attributes"]["groundwatch.langchain.run_id"] for r in monitor.records}) == len(
        QUESTIONS
    )
    # Nothing is left behind, and nothing of ours failed.
    assert handler.active_runs == 0
    assert handler._owner == {}
    assert handler.counts["internal_errors"] == 0
    assert handler.counts["records"] == len(QUESTIONS)


def test_retriever_inside_a_tool_counts(monitor: RecordingMonitor) -> None:
    """Agents retrieve through tools: the documents still belong to the top-level run."""
    from langchain_core.tools import create_retriever_tool

    tool = create_retriever_tool(
        vector_store().as_retriever(search_kwargs={"k": 2}), "policies", "Search the policies."
    )
    chain = (
        RunnableLambda(lambda q: {"context": tool.invoke(q), "question": q})
        | PROMPT_
        | chat_model("list")
        | StrOutputParser()
    )
    handler = GroundwatchCallbackHandler(monitor)
    chain.invoke("What is the refund policy?", {"callbacks": [handler]})
    (record,) = monitor.records
    assert len(record["contexts"]) == 2
    assert record["answer"] == ANSWER
    assert handler.active_runs == 0 and handler._owner == {}


def test_documents_carry_id_metadata_and_score(monitor: RecordingMonitor) -> None:
    case = build("two_retrievers")
    case.chain.invoke(
        "What is the refund policy?", {"callbacks": [GroundwatchCallbackHandler(monitor)]}
    )
    (record,) = monitor.records
    scored = [p for p in record["contexts"] if p["score"] is not None]
    unscored = [p for p in record["contexts"] if p["score"] is None]
    # The ScoredRetriever keeps the vector store's score in metadata; VectorStoreRetriever does not.
    assert len(scored) == 1 and len(unscored) == 2
    assert scored[0]["score"] == scored[0]["metadata"]["score"]
    for p in record["contexts"]:
        assert p["id"] == f"doc-{p['metadata']['topic']}"


def test_no_span_means_no_parent(monitor: RecordingMonitor) -> None:
    build("lcel").chain.invoke("q?", {"callbacks": [GroundwatchCallbackHandler(monitor)]})
    # An explicit "no parent" (not None, which would mean "whatever is current at record time").
    assert not monitor.records[0]["span_context"].is_valid


def test_route_from_run_metadata(monitor: RecordingMonitor) -> None:
    handler = GroundwatchCallbackHandler(monitor, route="default")
    chain = build("lcel").chain
    chain.invoke("q?", {"callbacks": [handler], "metadata": {"groundwatch_route": "billing"}})
    chain.invoke("q?", {"callbacks": [handler]})
    assert [r["route"] for r in monitor.records] == ["billing", "default"]


def test_extractor_hooks(monitor: RecordingMonitor) -> None:
    retriever = vector_store().as_retriever(search_kwargs={"k": 1})
    chain = (
        RunnableLambda(
            lambda x: {
                "context": format_docs(retriever.invoke(x["ask"][0])),
                "question": x["ask"][0],
            }
        )
        | PROMPT_
        | chat_model("list")
        | (lambda m: {"reply": {"text": m.content}})
    )
    handler = GroundwatchCallbackHandler(
        monitor,
        question_extractor=lambda inputs: inputs["ask"][0],
        answer_extractor=lambda outputs: outputs["reply"]["text"],
    )
    chain.invoke({"ask": ["Where are the stores?"]}, {"callbacks": [handler]})
    (record,) = monitor.records
    assert record["question"] == "Where are the stores?"
    assert record["answer"] == ANSWER
    assert len(record["contexts"]) == 1


def test_unrecognised_answer_is_counted_not_recorded(monitor: RecordingMonitor) -> None:
    retriever = vector_store().as_retriever(search_kwargs={"k": 1})
    chain = (
        {"context": retriever | format_docs, "question": lambda q: q}
        | PROMPT_
        | chat_model("list")
        | (lambda m: {"reply": m.content})  # not a key the default extractor knows
    )
    handler = GroundwatchCallbackHandler(monitor, route="r")
    assert chain.invoke("q", {"callbacks": [handler]}) == {"reply": ANSWER}
    assert monitor.records == []
    # A model answered: the operator must hear that the answer could not be read.
    assert monitor.failures == [("no_answer", "r")]
    assert handler.counts["no_answer"] == 1


def test_retrieval_only_run_is_ignored(monitor: RecordingMonitor) -> None:
    """A search endpoint (retrieve, no model) is neither a record nor a failure."""
    retriever = vector_store().as_retriever(search_kwargs={"k": 1})
    chain = retriever | (lambda docs: {"n_docs": len(docs)})
    handler = GroundwatchCallbackHandler(monitor)
    assert chain.invoke("q", {"callbacks": [handler]}) == {"n_docs": 1}
    assert monitor.records == [] and monitor.failures == []
    assert handler.active_runs == 0


def test_failing_extractor_never_reaches_the_host(monitor: RecordingMonitor) -> None:
    def boom(_: Any) -> str:
        raise KeyError("question")

    handler = GroundwatchCallbackHandler(monitor, question_extractor=boom)
    assert build("lcel").chain.invoke("q?", {"callbacks": [handler]}) == ANSWER
    assert monitor.records == []
    assert monitor.failures == [("extractor_error", None)]  # the run's one decision
    assert handler.counts["extractor_errors"] == 1
    assert handler.active_runs == 0


class _UnreadableOutput:
    """A chain's output whose every attribute raises as it is read."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # Python's own look-ups (pytest's ids, copies)
            raise AttributeError(name)
        raise RuntimeError(f"{name} cannot be read")


@pytest.mark.parametrize(
    "output", [_UnreadableOutput(), {"answer": _UnreadableOutput()}], ids=["object", "in_dict"]
)
def test_an_output_that_raises_as_it_is_read_still_ends_the_run_in_one_decision(
    monitor: RecordingMonitor, output: Any
) -> None:
    chain = build("lcel").chain | RunnableLambda(lambda _: output)
    handler = GroundwatchCallbackHandler(monitor)
    assert chain.invoke("q?", {"callbacks": [handler]}) is output
    assert monitor.records == [] and monitor.decisions == []
    assert monitor.failures == [("extractor_error", None)]
    assert handler.active_runs == 0


@pytest.mark.parametrize("question", [42, {"text": "q?"}])
def test_a_question_that_is_not_a_string_is_said_and_counted_not_dropped_silently(
    monitor: RecordingMonitor,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    question: Any,
) -> None:
    from groundwatch._shared import guard

    monkeypatch.setattr(guard, "_last_logged", {})  # the warning is rate-limited
    retriever = vector_store().as_retriever(search_kwargs={"k": 2})
    chain = (
        {
            "context": itemgetter("topic") | retriever | format_docs,
            "question": itemgetter("question"),
        }
        | PROMPT_
        | chat_model("list")
        | StrOutputParser()
    )
    handler = GroundwatchCallbackHandler(monitor)
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        chain.invoke({"question": question, "topic": "refunds"}, {"callbacks": [handler]})
    [record] = monitor.records  # scored all the same, without a question
    assert record["question"] is None
    assert handler.counts["questions_unreadable"] == 1
    words = f"the run's question is a {type(question).__name__}, not a string"
    assert any(words in r.getMessage() for r in caplog.records), caplog.text


def test_internal_error_is_swallowed_and_counted(
    monitor: RecordingMonitor, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch._shared import guard as guard

    monkeypatch.delenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS")  # production behaviour

    class BrokenMonitor(RecordingMonitor):
        def record(self, **kwargs: Any) -> None:  # type: ignore[override]
            raise RuntimeError("bug in the runtime")

    handler = GroundwatchCallbackHandler(BrokenMonitor())
    chain = build("lcel").chain
    before = guard.errors[("langchain.on_chain_end", "RuntimeError")]
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert chain.invoke("q?", {"callbacks": [handler]}) == ANSWER
    assert handler.counts["internal_errors"] == 3
    # Counted where the groundwatch.errors metric reads it, logged at most once a minute.
    assert guard.errors[("langchain.on_chain_end", "RuntimeError")] == before + 3
    ours = [r for r in caplog.records if "langchain.on_chain_end" in r.getMessage()]
    assert len(ours) <= 1
    # LangChain itself never saw an error from us (it would log "Error in ... callback").
    assert not [
        r for r in caplog.records if "Error in GroundwatchCallbackHandler" in r.getMessage()
    ]


def test_internal_error_fails_loudly_in_strict_mode(monitor: RecordingMonitor) -> None:
    class BrokenMonitor(RecordingMonitor):
        def record(self, **kwargs: Any) -> None:  # type: ignore[override]
            raise RuntimeError("bug in the runtime")

    with pytest.raises(RuntimeError, match="bug in the runtime"):
        build("lcel").chain.invoke(
            "q?", {"callbacks": [GroundwatchCallbackHandler(BrokenMonitor())]}
        )


# -- runs that must not produce a record ---------------------------------------------------------

ERROR_MODES = ["invoke", "ainvoke", "stream", "astream"]


def _run_expecting_error(chain: Any, mode: str, handler: GroundwatchCallbackHandler) -> None:
    with pytest.raises(Exception):  # noqa: B017 - each chain raises its own error
        run(chain, ["What is the refund policy?"], mode, {"callbacks": [handler]})


def _failing_llm(_: Any) -> Any:
    raise RuntimeError("model overloaded")


@pytest.mark.parametrize("mode", ERROR_MODES)
def test_retriever_error_is_counted(mode: str, monitor: RecordingMonitor) -> None:
    chain = (
        {"context": FailingRetriever() | format_docs, "question": lambda q: q}
        | PROMPT_
        | chat_model("list")
    )
    handler = GroundwatchCallbackHandler(monitor, route="r")
    _run_expecting_error(chain, mode, handler)
    assert monitor.records == []
    assert monitor.failures == [("retriever_error", "r")]
    assert handler.active_runs == 0 and handler._owner == {}


@pytest.mark.parametrize("mode", ERROR_MODES)
def test_llm_error_is_counted(mode: str, monitor: RecordingMonitor) -> None:
    retriever = vector_store().as_retriever(search_kwargs={"k": 2})
    # error_on_chunk_number fails the model's stream; invoke fails through a model that raises.
    llm = chat_model("list")
    if mode in ("stream", "astream"):
        llm.error_on_chunk_number = 3
    else:
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        class Overloaded(FakeListChatModel):
            def _call(self, *args: Any, **kwargs: Any) -> str:
                raise RuntimeError("model overloaded")

        llm = Overloaded(responses=["unused"])
    chain = {"context": retriever | format_docs, "question": lambda q: q} | PROMPT_ | llm
    handler = GroundwatchCallbackHandler(monitor)
    _run_expecting_error(chain, mode, handler)
    assert monitor.records == []
    assert monitor.failures == [("llm_error", None)]
    assert handler.active_runs == 0 and handler._owner == {}


@pytest.mark.parametrize("mode", ERROR_MODES)
def test_chain_error_after_retrieval_is_counted(mode: str, monitor: RecordingMonitor) -> None:
    def parse(_: Any) -> str:
        raise ValueError("unparseable")

    chain = build("lcel").chain | parse
    handler = GroundwatchCallbackHandler(monitor)
    _run_expecting_error(chain, mode, handler)
    assert monitor.records == []
    assert monitor.failures == [("chain_error", None)]
    assert handler.active_runs == 0


def test_fallback_after_retriever_error_records_what_was_retrieved(
    monitor: RecordingMonitor,
) -> None:
    retriever = FailingRetriever().with_fallbacks(
        [vector_store().as_retriever(search_kwargs={"k": 1})]
    )
    chain = (
        {"context": retriever | format_docs, "question": lambda q: q} | PROMPT_ | chat_model("list")
    )
    handler = GroundwatchCallbackHandler(monitor)
    chain.invoke("q?", {"callbacks": [handler]})
    assert monitor.failures == []
    (record,) = monitor.records
    assert len(record["contexts"]) == 1


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_retriever_alone_is_not_recorded(mode: str, monitor: RecordingMonitor) -> None:
    retriever = vector_store().as_retriever(search_kwargs={"k": 2})
    handler = GroundwatchCallbackHandler(monitor)
    run(retriever, ["What is the refund policy?"], mode, {"callbacks": [handler]})
    assert monitor.records == [] and monitor.failures == []
    assert handler.active_runs == 0 and handler._owner == {}


def test_chain_without_retrieval_is_ignored(monitor: RecordingMonitor) -> None:
    handler = GroundwatchCallbackHandler(monitor)
    chain = PROMPT_ | chat_model("list")
    chain.invoke({"context": "", "question": "hi"}, {"callbacks": [handler]})
    assert monitor.records == [] and monitor.failures == []
    assert handler.counts["no_retrieval"] == 1


def test_cancelled_run_is_counted_and_cleaned_up(monitor: RecordingMonitor) -> None:
    from testkit.chains import TopicRetriever, documents

    retriever = TopicRetriever(docs=documents(), pause=5.0)
    chain = (
        {"context": retriever | format_docs, "question": lambda q: q} | PROMPT_ | chat_model("list")
    )
    handler = GroundwatchCallbackHandler(monitor)

    async def main() -> None:
        task = asyncio.create_task(chain.ainvoke("refund?", {"callbacks": [handler]}))
        await asyncio.sleep(0.05)
        assert handler.active_runs == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert monitor.records == []
    assert monitor.failures == [("cancelled", None)]
    assert handler.active_runs == 0 and handler._owner == {}


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_stream_stopped_early_is_not_recorded(mode: str, monitor: RecordingMonitor) -> None:
    """A consumer that stops reading leaves a partial answer: counted, never scored."""
    chain = build("lcel").chain
    handler = GroundwatchCallbackHandler(monitor)
    config: Any = {"callbacks": [handler]}
    if mode == "stream":
        stream = chain.stream("refund?", config)
        for i, _ in enumerate(stream):
            if i == 4:
                break
        stream.close()
    else:

        async def main() -> None:
            stream = chain.astream("refund?", config)
            i = 0
            async for _ in stream:
                i += 1
                if i == 4:
                    break
            await stream.aclose()

        asyncio.run(main())
    assert monitor.records == []
    assert monitor.failures == [("cancelled", None)]
    assert handler.active_runs == 0 and handler._owner == {}


def test_async_callbacks_run_inline_on_the_event_loop(monitor: RecordingMonitor) -> None:
    """run_inline: no thread-pool hop per callback in async runs (LangChain's default for sync
    handlers), so capture runs on the loop thread, in the caller's context."""
    import threading

    seen: list[int] = []

    class ThreadSpy(RecordingMonitor):
        def record(self, **kwargs: Any) -> None:  # type: ignore[override]
            seen.append(threading.get_ident())

    handler = GroundwatchCallbackHandler(ThreadSpy())
    asyncio.run(build("lcel").chain.ainvoke("q?", {"callbacks": [handler]}))
    assert seen == [threading.get_ident()]  # asyncio.run runs the loop on this thread


# -- bounded state -------------------------------------------------------------------------------


def test_a_monitor_that_raises_still_ends_each_run_with_one_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exactly one terminal call per run, even when handing the record over fails: the run is
    reported as an ``internal`` failure (as the LlamaIndex integration does)."""
    monkeypatch.delenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS")  # production behaviour

    class BrokenMonitor(RecordingMonitor):
        def record(self, **kwargs: Any) -> None:  # type: ignore[override]
            raise RuntimeError("bug in the runtime")

    monitor = BrokenMonitor()
    handler = GroundwatchCallbackHandler(monitor, route="r")
    for _ in range(2):
        assert build("lcel").chain.invoke("q?", {"callbacks": [handler]}) == ANSWER
    assert monitor.failures == [("internal", "r")] * 2
    assert handler.counts["failures"] == 2 and handler.counts["records"] == 0


def test_a_forked_child_starts_with_no_runs_and_a_free_lock(monitor: RecordingMonitor) -> None:
    """A handler shared by a pre-forking server: the child must not inherit the parent's runs
    nor a lock another thread held at the fork (as the LlamaIndex integration does)."""
    import os
    import uuid

    handler = GroundwatchCallbackHandler(monitor)
    handler.on_chain_start({}, {"question": "q"}, run_id=uuid.uuid4())
    assert handler.active_runs == 1
    with handler._tracker.lock:  # held by this thread while forking
        pid = os.fork()
        if pid == 0:  # child: must not deadlock, must not see the parent's run
            ok = handler.active_runs == 0 and handler._tracker.lock.acquire(timeout=1)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert handler.active_runs == 1


def test_documents_are_capped_and_the_cut_is_marked(monitor: RecordingMonitor) -> None:
    retriever = vector_store().as_retriever(search_kwargs={"k": 5})
    chain = (
        {"context": retriever | format_docs, "question": lambda q: q} | PROMPT_ | chat_model("list")
    )
    handler = GroundwatchCallbackHandler(monitor, max_documents=2)
    chain.invoke("q?", {"callbacks": [handler]})
    (record,) = monitor.records
    assert len(record["contexts"]) == 2
    assert record["attributes"]["groundwatch.contexts.dropped"] == 3
    assert handler.counts["documents_dropped"] == 3


def test_abandoned_runs_are_evicted_beyond_the_limit(monitor: RecordingMonitor) -> None:
    chain = build("lcel").chain
    handler = GroundwatchCallbackHandler(monitor, max_active_runs=2)
    # Streams started and never finished nor closed: their root runs never end.
    streams = [chain.stream(f"q{i}?", {"callbacks": [handler]}) for i in range(3)]
    for s in streams:
        next(s)
    assert handler.active_runs == 2
    assert handler.counts["evicted"] == 1
    # The evicted run had retrieved (the stream got past the retriever): it is reported.
    assert monitor.failures == [("evicted", None)]
    # The runs still tracked finish normally.
    for s in streams[1:]:
        list(s)
    assert len(monitor.records) == 2
    assert handler.active_runs == 0 and handler._owner == {}
    # The evicted stream finishing late is ignored, not recorded twice or raised.
    list(streams[0])
    assert len(monitor.records) == 2 and handler.counts["internal_errors"] == 0


def test_stale_runs_are_evicted_by_age(monitor: RecordingMonitor) -> None:
    import time

    chain = build("lcel").chain
    handler = GroundwatchCallbackHandler(monitor, max_run_age_seconds=0.05)
    stale = chain.stream("old?", {"callbacks": [handler]})
    next(stale)
    time.sleep(0.1)
    chain.invoke("new?", {"callbacks": [handler]})
    assert handler.counts["evicted"] == 1
    assert [r["question"] for r in monitor.records] == ["new?"]
    assert handler.active_runs == 0
    stale.close()


def test_invalid_limits_are_rejected(monitor: RecordingMonitor) -> None:
    with pytest.raises(ValueError):
        GroundwatchCallbackHandler(monitor, max_active_runs=0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case_name", CASES)
def test_a_run_the_sampler_declines_keeps_no_documents_and_is_counted_once(
    case_name: str, mode: str, tracer: Tracer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = RecordingMonitor(decision=Decision.NOT_SAMPLED)
    case = build(case_name)
    handler = GroundwatchCallbackHandler(monitor, route="support")
    kept: list[int] = []
    real_end = GroundwatchCallbackHandler.on_retriever_end

    def spy(self: Any, documents: Any, **kwargs: Any) -> None:
        real_end(self, documents, **kwargs)
        kept.extend(len(root.documents) for root in self._tracker.runs())

    monkeypatch.setattr(GroundwatchCallbackHandler, "on_retriever_end", spy)
    with tracer.start_as_current_span("request") as request:
        run(case.chain, [case.make_input(q) for q in QUESTIONS], mode, {"callbacks": [handler]})
    # Decided once per run, when its retrieval started, with the run's trace and route.
    assert len(monitor.decided) == len(QUESTIONS)
    assert monitor.decided == [(request.get_span_context(), "support")] * len(QUESTIONS)
    assert monitor.records == [] and monitor.failures == []
    assert monitor.decisions == [(Decision.NOT_SAMPLED, "support")] * len(QUESTIONS)
    assert set(kept) <= {0}, "documents kept for a run that will not be scored"
    assert handler.counts["not_sampled"] == len(QUESTIONS)
    assert handler.active_runs == 0


def test_a_sampled_run_is_not_asked_twice(monitor: RecordingMonitor) -> None:
    case = build(CASES[0])
    handler = GroundwatchCallbackHandler(monitor)
    run(case.chain, [case.make_input(QUESTIONS[0])], MODES[0], {"callbacks": [handler]})
    [record] = monitor.records
    assert record["decision"] is Decision.SAMPLED and len(monitor.decided) == 1
    assert len(record["contexts"]) > 0
