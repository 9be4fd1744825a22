"""The judge protocol: anything that turns (answer, passages, question) into claim verdicts."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..._error_types import ERROR_INTERNAL, documented_error_type
from ...types import Judgement, Passage


@runtime_checkable
class Judge(Protocol):
    """Finds an answer's claims and gives each a verdict with evidence.

    ``judge`` may be a plain method or a coroutine function. It should not raise: a failure is a
    ``Judgement`` with ``error`` set (the caller also guards against judges that do raise).
    Scores and labels are not the judge's business; :mod:`groundwatch.judging.scoring` computes
    them.
    """

    name: str

    def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement | Awaitable[Judgement]: ...


async def call_judge(
    judge: Judge, answer: str, contexts: Sequence[Passage], question: str | None
) -> Any:
    """Await ``judge.judge`` from async code, whether it is a coroutine function or not.

    A synchronous judge (the CPU-bound LocalJudge) runs in a thread so that it does not block
    the event loop; an awaitable it returns is awaited. The result is what the judge returned,
    unchecked; exceptions propagate.
    """
    if inspect.iscoroutinefunction(judge.judge):
        return await judge.judge(answer, contexts, question)
    result = await asyncio.to_thread(judge.judge, answer, contexts, question)
    if inspect.isawaitable(result):
        result = await result
    return result


def judgement_from_error(exc: BaseException) -> Judgement:
    """What a judge that raised ``exc`` gave: an error named after the exception, or
    ``internal`` for a ``BaseException`` that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``), which the runtime catches so that it cannot end its worker."""
    if isinstance(exc, Exception):
        # The exception's class stays in the message; its type is one of the documented ones.
        return Judgement(
            error=f"{type(exc).__name__}: {exc}"[:500],
            error_type=documented_error_type(type(exc).__qualname__),
        )
    return Judgement(
        error=f"the judge raised {type(exc).__name__}"[:500], error_type=ERROR_INTERNAL
    )
