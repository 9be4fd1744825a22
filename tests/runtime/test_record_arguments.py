"""``Monitor.record`` never raises, whatever it is called with, and counts every call once.

The rule for a value of the wrong type (docs/runtime.md "What record() accepts"): it is never
coerced or guessed at; the call is counted ``groundwatch.records{groundwatch.decision="error",
error.type="invalid_input"}`` with one rate-limited warning naming the argument. A missing
``answer`` or ``contexts`` is the same; a missing ``question`` is ``None`` (it is optional).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.trace import SpanContext

from groundwatch import Passage, RatioSampler
from groundwatch._shared import guard
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge
from .test_faults import assert_identity
from .test_lifecycle import decisions, finished

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."
GOOD = "The Eiffel Tower stands 330 metres tall."

INVALID: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    # missing arguments
    ("no arguments", (), {}),
    ("answer only", (), {"answer": GOOD}),
    ("no answer", (), {"question": "q", "contexts": [PASSAGE]}),
    ("no contexts", (), {"question": "q", "answer": GOOD}),
    # positional use
    ("positional", ("q", [PASSAGE], GOOD), {}),
    ("one positional", (GOOD,), {"contexts": [PASSAGE]}),
    # a misspelt keyword
    ("unknown keyword", (), {"answer": GOOD, "context": [PASSAGE]}),
    # wrong types, each argument
    ("answer int", (), {"answer": 42, "contexts": [PASSAGE]}),
    ("answer None", (), {"answer": None, "contexts": [PASSAGE]}),
    ("question int", (), {"question": 123, "answer": GOOD, "contexts": [PASSAGE]}),
    ("contexts str", (), {"answer": GOOD, "contexts": PASSAGE}),
    ("contexts dict", (), {"answer": GOOD, "contexts": {"text": PASSAGE}}),
    ("contexts int", (), {"answer": GOOD, "contexts": 7}),
    ("contexts [None]", (), {"answer": GOOD, "contexts": [None]}),
    ("contexts [1]", (), {"answer": GOOD, "contexts": [PASSAGE, 1]}),
    ("contexts [bytes]", (), {"answer": GOOD, "contexts": [PASSAGE.encode()]}),
    ("route int", (), {"answer": GOOD, "contexts": [PASSAGE], "route": 5}),
    ("attributes list", (), {"answer": GOOD, "contexts": [PASSAGE], "attributes": [1]}),
    ("span_context str", (), {"answer": GOOD, "contexts": [PASSAGE], "span_context": "x"}),
    ("decision bogus", (), {"answer": GOOD, "contexts": [PASSAGE], "decision": "maybe"}),
]


@pytest.mark.parametrize(("args", "kwargs"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
@pytest.mark.parametrize("sampled", [True, False], ids=["sampled", "not_sampled"])
def test_every_misuse_is_one_invalid_input_decision_never_an_exception(
    capgw: GroundwatchTelemetry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    sampled: bool,
) -> None:
    """The same outcome whether or not the sampler would have picked the record (a mistake in
    the call is visible at any sampling rate), except for the passages inside ``contexts``:
    they are read only for a record that is scored."""
    monkeypatch.setattr(guard, "_last_logged", {})
    monitor = capgw.monitor(judge=EchoJudge(), sampler=RatioSampler(1.0 if sampled else 0.0))
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        monitor.record(*args, **kwargs)  # type: ignore[misc,arg-type]
        monitor.record(*args, **kwargs)  # type: ignore[misc,arg-type]
    if not sampled and _passage_case(kwargs):
        assert decisions(capgw) == {"not_sampled": 2}
        return
    assert decisions(capgw) == {"error/invalid_input": 2}
    assert finished(capgw) == (0, 0, 0)
    assert capgw.spans() == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # rate-limited
    assert "Monitor.record" in warnings[0] and "invalid_input" in warnings[0]


def _passage_case(kwargs: dict[str, Any]) -> bool:
    contexts = kwargs.get("contexts")
    return isinstance(contexts, list) and any(not isinstance(c, str) for c in contexts)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"answer": GOOD}, "contexts"),
        ({"contexts": [PASSAGE]}, "answer"),
        ({"question": 123, "answer": GOOD, "contexts": [PASSAGE]}, "question"),
        ({"answer": GOOD, "contexts": [None]}, "contexts[0]"),
        ({"answer": GOOD, "contexts": [PASSAGE], "route": 5}, "route"),
        ({"answer": GOOD, "contexts": [PASSAGE], "context": []}, "context"),
    ],
)
def test_the_warning_names_the_argument(
    capgw: GroundwatchTelemetry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, Any],
    names: str,
) -> None:
    monkeypatch.setattr(guard, "_last_logged", {})
    monitor = capgw.monitor(judge=EchoJudge())
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        monitor.record(**kwargs)
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert names in message, message


def test_positional_use_says_so(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "_last_logged", {})
    monitor = capgw.monitor(judge=EchoJudge())
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        monitor.record("q", [PASSAGE], GOOD)  # type: ignore[misc]
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "keyword" in message, message


def test_what_is_optional_has_a_safe_default(capgw: GroundwatchTelemetry) -> None:
    """question, span_context, route, attributes, always_score, decision may all be left out."""
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(contexts=[PASSAGE], answer=GOOD)
    monitor.record(contexts=[Passage(text=PASSAGE)], answer=GOOD, question=None, route=None)
    monitor.record(contexts=(), answer="")  # empty is valid: nothing to check
    monitor.record(contexts=iter([PASSAGE]), answer=GOOD, span_context=SpanContext(0, 0, False))
    assert decisions(capgw) == {"sampled": 4}
    assert finished(capgw) == (4, 0, 0)


def test_the_books_balance_over_a_mix_of_good_and_bad_calls(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    for _, args, kwargs in INVALID:
        monitor.record(*args, **kwargs)  # type: ignore[misc,arg-type]
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    seen = assert_identity(capgw, 2 * len(INVALID))
    assert seen == {"error/invalid_input": len(INVALID), "sampled": len(INVALID)}


def test_the_recording_monitor_takes_record_calls_as_the_monitor_does() -> None:
    from groundwatch.testing import RecordingMonitor

    recording = RecordingMonitor()
    recording.record(answer="a")  # every argument optional, as in Monitor.record
    recording.record()
    assert [(r["question"], r["contexts"], r["answer"]) for r in recording.records] == [
        (None, [], "a"),
        (None, [], None),
    ]
