"""instrument() / uninstrument(): one handler on every callback manager, never twice."""

from __future__ import annotations

import logging

import groundwatch_langchain
import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.callbacks import BaseCallbackManager

from groundwatch.testing import RecordingMonitor
from testkit.chains import CASES, build, run


@pytest.mark.parametrize("case_name", CASES)
@pytest.mark.parametrize("mode", ["invoke", "abatch", "astream"])
def test_instrument_records_every_run_once(
    case_name: str, mode: str, monitor: RecordingMonitor
) -> None:
    case = build(case_name)
    assert groundwatch_langchain.instrument(monitor, route="global") is monitor
    assert isinstance(groundwatch_langchain.instrumented_handler(), GroundwatchCallbackHandler)
    run(case.chain, [case.make_input("What is the refund policy?")], mode, {})
    (record,) = monitor.records
    assert record["question"] == "What is the refund policy?"
    assert record["answer"] == case.answer
    assert record["route"] == "global"


def test_instrument_twice_keeps_the_first(
    monitor: RecordingMonitor, caplog: pytest.LogCaptureFixture
) -> None:
    first = groundwatch_langchain.instrument(monitor)
    handler = groundwatch_langchain.instrumented_handler()
    with caplog.at_level(logging.WARNING):
        second = groundwatch_langchain.instrument(RecordingMonitor())
    assert second is first is monitor
    assert groundwatch_langchain.instrumented_handler() is handler
    assert "already instrumented" in caplog.text
    build("lcel").chain.invoke("q?")
    assert len(monitor.records) == 1


def test_explicit_handler_wins_over_the_global_one(monitor: RecordingMonitor) -> None:
    global_monitor = RecordingMonitor()
    groundwatch_langchain.instrument(global_monitor)
    explicit = GroundwatchCallbackHandler(monitor)
    build("nested").chain.invoke("q?", {"callbacks": [explicit]})
    assert len(monitor.records) == 1
    assert global_monitor.records == []


def test_uninstrument_restores_langchain(monitor: RecordingMonitor) -> None:
    original = BaseCallbackManager.__init__
    groundwatch_langchain.instrument(monitor)
    assert BaseCallbackManager.__init__ is not original
    groundwatch_langchain.uninstrument()
    assert BaseCallbackManager.__init__ is original
    assert groundwatch_langchain.instrumented_handler() is None
    build("lcel").chain.invoke("q?")
    assert monitor.records == []
    groundwatch_langchain.uninstrument()  # a second call is harmless


def test_uninstrument_under_another_instrumentation_leaves_it_working(
    monitor: RecordingMonitor,
) -> None:
    """Another library wraps __init__ on top of ours: uninstrument must not unwrap it."""
    original = BaseCallbackManager.__init__
    groundwatch_langchain.instrument(monitor)
    ours = BaseCallbackManager.__init__
    calls = []

    def theirs(self: BaseCallbackManager, *args: object, **kwargs: object) -> None:
        ours(self, *args, **kwargs)  # type: ignore[arg-type]
        calls.append(1)

    BaseCallbackManager.__init__ = theirs  # type: ignore[method-assign]
    try:
        groundwatch_langchain.uninstrument()
        assert BaseCallbackManager.__init__ is theirs
        build("lcel").chain.invoke("q?")
        assert calls and monitor.records == []  # theirs still runs, ours is off
        # Instrumenting again reuses our wrapper still in the chain: one handler, not two.
        groundwatch_langchain.instrument(monitor)
        build("lcel").chain.invoke("q?")
        assert len(monitor.records) == 1
    finally:
        groundwatch_langchain.uninstrument()
        BaseCallbackManager.__init__ = original  # type: ignore[method-assign]
        groundwatch_langchain._attach._wrapper = None
        groundwatch_langchain._attach._original_init = None
