"""The judge protocol, and the one adapter every caller of a judge goes through.

A judge's ``judge()`` may be a plain method or a coroutine function, may return an awaitable
from a plain method, may raise, and may return something that is not a
:class:`~groundwatch.Judgement`. :func:`judge_sync` and :func:`judge_async` are the only places
that call ``judge()``: ``evaluate``, ``aevaluate``, :class:`~groundwatch.CascadeJudge`'s
stages, every runner of the online runtime, the worker process and the Redis consumer all go
through them, so a judge behaves the same under every entry point. Both never raise (except
``asyncio.CancelledError`` out of :func:`judge_async`): whatever goes wrong is a ``Judgement``
with ``error`` set.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..._shared.daemon_threads import DaemonThreads
from ..._shared.error_types import ERROR_INTERNAL, documented_error_type
from ...types import Judgement, Passage

_logger = logging.getLogger(__name__)

T = TypeVar("T")

INVALID_JUDGEMENT = "invalid_judgement"
"""The cause of a judge that returned something other than a ``Judgement`` (reported under a
documented ``error.type``, with this cause in the message)."""

StepDriver = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]
"""Drives a judge's coroutine step by step (the async runner's loop-lag watchdog)."""


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


def judge_name(judge: Any) -> str:
    """The name a judge's evaluations carry: its ``name``, else its class name."""
    return str(getattr(judge, "name", None) or type(judge).__name__)


def is_async_judge(judge: Any) -> bool:
    """Whether ``judge.judge`` is a coroutine function (it runs on an event loop)."""
    return inspect.iscoroutinefunction(getattr(judge, "judge", None))


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


def as_judgement(value: Any) -> Judgement:
    """``value`` if the judge returned a ``Judgement``, else an ``invalid_judgement`` error."""
    if isinstance(value, Judgement):
        return value
    return Judgement(
        error=f"judge returned {type(value).__name__}, not a Judgement",
        error_type=INVALID_JUDGEMENT,
    )


def judge_sync(
    judge: Any, answer: str, passages: Sequence[Passage], question: str | None
) -> Judgement:
    """Call ``judge`` from synchronous code (a runner's thread, the worker process,
    ``evaluate``). A coroutine it returns runs to completion here: on a fresh loop, or, when a
    loop already runs on this thread (Jupyter, an async handler calling ``evaluate``), on a
    private loop in a helper thread. Never raises."""
    try:
        result: Any = judge.judge(answer, passages, question)
        if inspect.isawaitable(result):
            result = _run_blocking(result)
    except BaseException as exc:
        _logger.debug("judge %s failed", judge_name(judge), exc_info=True)
        return judgement_from_error(exc)
    return as_judgement(result)


_SYNC_JUDGE_THREADS = DaemonThreads("groundwatch-judge")
"""Where :func:`judge_async` runs a sync judge called from async code (``aevaluate``, a
cascade's sync stage called directly): daemon threads, so a judge that hangs never holds up the
interpreter's exit, as ``asyncio.to_thread``'s pool would."""


async def judge_async(
    judge: Any,
    answer: str,
    passages: Sequence[Passage],
    question: str | None,
    *,
    drive: StepDriver | None = None,
) -> Judgement:
    """Call ``judge`` from async code: a coroutine function is awaited on this loop (through
    ``drive`` when given, which times its steps); a sync judge runs on a daemon thread so that
    the loop is not blocked, and an awaitable it returns is awaited. Never raises, except
    ``asyncio.CancelledError``."""
    try:
        if is_async_judge(judge):
            coroutine = judge.judge(answer, passages, question)
            result: Any = await (drive(coroutine) if drive is not None else coroutine)
        else:
            result = await _SYNC_JUDGE_THREADS.run(lambda: judge.judge(answer, passages, question))
            if inspect.isawaitable(result):
                result = await result
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        # Caught inside the task: asyncio re-raises SystemExit and KeyboardInterrupt out of the
        # event loop, which would end the caller's worker.
        _logger.debug("judge %s failed", judge_name(judge), exc_info=True)
        return judgement_from_error(exc)
    return as_judgement(result)


def _run_blocking(awaitable: Awaitable[T]) -> T:
    """Run an awaitable to completion from synchronous code, even inside a running loop."""

    async def _await() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    # A loop is running on this thread: asyncio.run would refuse, so run the coroutine on a
    # private loop in a helper thread.
    result: list[T] = []
    error: list[BaseException] = []

    def _target() -> None:
        try:
            result.append(asyncio.run(_await()))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=_target, name="groundwatch-evaluate", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


__all__ = [
    "INVALID_JUDGEMENT",
    "Judge",
    "StepDriver",
    "as_judgement",
    "is_async_judge",
    "judge_async",
    "judge_name",
    "judge_sync",
    "judgement_from_error",
]
