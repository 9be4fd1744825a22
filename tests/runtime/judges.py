"""Fast judges for runtime tests: real classes implementing the Judge protocol."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Sequence

from groundwatch import Claim, Evidence, Judgement, Passage, Usage


class EchoJudge:
    """Each answer sentence is `supported` when it occurs verbatim in a passage, else
    `contradicted` when the answer says "not", else `unsupported`. Microseconds per call."""

    name = "echo"

    def __init__(self, delay_s: float = 0.0, model: str | None = None) -> None:
        self.delay_s = delay_s
        self.model = model
        self.calls = 0
        self.threads: list[str] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        with self._lock:
            self.calls += 1
            self.threads.append(threading.current_thread().name)
        if self.delay_s:
            time.sleep(self.delay_s)
        claims = []
        pos = 0
        for sentence in [s for s in answer.split(".") if s.strip()]:
            text = sentence.strip() + "."
            start = answer.index(text, pos) if text in answer[pos:] else None
            end = None if start is None else start + len(text)
            pos = end or pos
            found = [(i, p.text.find(text)) for i, p in enumerate(contexts) if text in p.text]
            if found:
                i, s = found[0]
                claims.append(
                    Claim(
                        text=text,
                        start=start,
                        end=end,
                        verdict="supported",
                        evidence=[Evidence(passage=i, start=s, end=s + len(text), quote=text)],
                    )
                )
            else:
                claims.append(Claim(text=text, start=start, end=end, verdict="unsupported"))
        return Judgement(
            claims=claims,
            model=self.model,
            usage=Usage(input_tokens=len(answer), output_tokens=len(claims), calls=1),
        )


class AsyncEchoJudge(EchoJudge):
    name = "async-echo"

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(0.0)
        self.async_delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0

    async def judge(  # type: ignore[override]
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.async_delay_s)
            return EchoJudge.judge(self, answer, contexts, question)
        finally:
            self.in_flight -= 1


class RaisingJudge:
    name = "raising"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        raise RuntimeError("judge exploded")


class HangingJudge:
    """Blocks until released (or 30 s): a judge that never answers."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        self.release.wait(30)
        return Judgement(claims=[])


class PidJudge(EchoJudge):
    """Reports the process it ran in as its model name (picklable: for executor="process")."""

    name = "pid"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        result = super().judge(answer, contexts, question)
        return result.model_copy(update={"model": f"pid-{os.getpid()}"})


class SuppressionProbe(EchoJudge):
    """Records whether OpenTelemetry instrumentation was suppressed while it judged."""

    name = "probe"

    def __init__(self) -> None:
        super().__init__()
        self.suppressed: list[bool] = []

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        self.suppressed.append(_suppressed())
        return super().judge(answer, contexts, question)


class AsyncSuppressionProbe(SuppressionProbe):
    async def judge(  # type: ignore[override]
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        await asyncio.sleep(0)
        return SuppressionProbe.judge(self, answer, contexts, question)


def _suppressed() -> bool:
    from opentelemetry import context
    from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

    return bool(context.get_value(_SUPPRESS_INSTRUMENTATION_KEY)) and bool(
        context.get_value("suppress_instrumentation")
    )


class SleepJudge:
    """Sleeps ``seconds`` (picklable, unlike a judge holding an Event): a hanging judge for
    the process executor."""

    name = "sleep"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        time.sleep(self.seconds)
        return Judgement(claims=[])


class TriggerJudge(EchoJudge):
    """EchoJudge, except that an answer containing "SLOW" sleeps 30 s and one containing
    "BOOM" raises (picklable: one bad record inside a batch sent to the worker process)."""

    name = "trigger"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        if "SLOW" in answer:
            time.sleep(30)
        if "BOOM" in answer:
            raise RuntimeError("judge exploded")
        return super().judge(answer, contexts, question)


_BASE_EXCEPTIONS: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
}


class ExitJudge(EchoJudge):
    """EchoJudge, except that an answer containing "EXIT" raises a ``BaseException`` that is
    not an ``Exception`` (picklable: for executor="process" too)."""

    name = "exit"

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        if "EXIT" in answer:
            raise _BASE_EXCEPTIONS[self.kind]()
        return super().judge(answer, contexts, question)


class AsyncExitJudge(ExitJudge):
    name = "async-exit"

    async def judge(  # type: ignore[override]
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        await asyncio.sleep(0)
        return ExitJudge.judge(self, answer, contexts, question)


class RaisingFieldDocument:
    """A LangChain-like document whose ``raising`` field raises when read."""

    def __init__(self, text: str, raising: str) -> None:
        self._text = text
        self._raising = raising

    def _read(self, field: str, value: object) -> object:
        if field == self._raising:
            raise RuntimeError(f"{field} cannot be read")
        return value

    @property
    def page_content(self) -> object:
        return self._read("page_content", self._text)

    @property
    def metadata(self) -> object:
        return self._read("metadata", {"source": "wiki"})


def _malformed(kind: str) -> Judgement:
    """A ``Judgement`` built past validation (``model_construct``), as a buggy judge makes one."""
    claim = {"text": "The Eiffel Tower stands 330 metres tall.", "verdict": "supported"}
    if kind == "claims-not-a-list":
        return Judgement.model_construct(claims="supported")
    if kind == "claims-none":
        return Judgement.model_construct(claims=None)
    if kind == "claim-a-dict":
        return Judgement.model_construct(claims=[claim])
    if kind == "claim-wrong-types":
        return Judgement.model_construct(claims=[Claim.model_construct(text=5, verdict="maybe")])
    if kind == "evidence-not-a-list":
        return Judgement.model_construct(claims=[Claim.model_construct(**claim, evidence="p0")])
    if kind == "evidence-wrong-types":
        bad = Evidence.model_construct(passage="0", start=None, end=3.5, quote=7)
        return Judgement.model_construct(claims=[Claim.model_construct(**claim, evidence=[bad])])
    if kind == "fields-wrong-types":
        return Judgement.model_construct(claims=[], model=5, usage="lots", error_type=7)
    if kind == "error-wrong-types":
        return Judgement.model_construct(claims=[], error=RuntimeError("x"), error_type=7)
    raise AssertionError(kind)


MALFORMED_KINDS = (
    "claims-not-a-list",
    "claims-none",
    "claim-a-dict",
    "claim-wrong-types",
    "evidence-not-a-list",
    "evidence-wrong-types",
    "fields-wrong-types",
    "error-wrong-types",
)


class MalformedJudge(EchoJudge):
    """EchoJudge, except that an answer ``"BAD <kind>"`` gets a malformed ``Judgement`` of that
    kind (see :data:`MALFORMED_KINDS`; picklable: for executor="process" too)."""

    name = "malformed"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        if answer.startswith("BAD "):
            return _malformed(answer[4:])
        return super().judge(answer, contexts, question)


class AsyncMalformedJudge(MalformedJudge):
    name = "async-malformed"

    async def judge(  # type: ignore[override]
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        await asyncio.sleep(0)
        return MalformedJudge.judge(self, answer, contexts, question)


def known_probability(answer: str) -> float:
    """The probability :class:`ProbabilityJudge` gives an answer: one that differs from
    answer to answer (so that a value carried onto another record's span would show), and
    that no scoring rule would compute from the claims."""
    digest = hashlib.blake2b(answer.encode(), digest_size=4).digest()
    return round(int.from_bytes(digest, "big") / 2**32, 6)


class ProbabilityJudge(EchoJudge):
    """EchoJudge that sets the judge's own ``hallucination_probability`` on its judgement
    (:func:`known_probability`); picklable, for executor="process" too."""

    name = "probability"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        result = super().judge(answer, contexts, question)
        return result.model_copy(update={"hallucination_probability": known_probability(answer)})
