"""``evaluate()`` and ``aevaluate()``: score one answer, synchronously or in an event loop."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Sequence
from typing import Any

from .._inputs import prepare
from ..types import Evaluation, Judgement, Passage
from . import scoring
from .judges import Judge, LocalJudge
from .judges._base import call_judge, judgement_from_error

_logger = logging.getLogger(__name__)

_default_judge: Judge | None = None
_default_judge_lock = threading.Lock()


def default_judge() -> Judge:
    """The process-wide default judge (a :class:`LocalJudge`), built on first use."""
    global _default_judge
    with _default_judge_lock:
        if _default_judge is None:
            _default_judge = LocalJudge()
        return _default_judge


def judge_name(judge: Any) -> str:
    return str(getattr(judge, "name", None) or type(judge).__name__)


def _run_coroutine_blocking(awaitable: Awaitable[Judgement]) -> Judgement:
    """Run an awaitable to completion from synchronous code, even inside a running loop."""

    async def _await() -> Judgement:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    # A loop is running on this thread (Jupyter, an async web handler): asyncio.run would
    # refuse, so run the judge's coroutine on a private loop in a helper thread.
    result: list[Judgement] = []
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


def score_judgement(
    judgement: Any,
    answer: str,
    passages: Sequence[Passage],
    judge_name: str,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
    truncated: bool = False,
) -> Evaluation:
    """Score what a judge returned for one prepared answer (anything but a ``Judgement`` is an
    ``invalid_judgement`` error). Shared by :func:`evaluate` and the runtime's runners."""
    if not isinstance(judgement, Judgement):
        judgement = Judgement(
            error=f"judge returned {type(judgement).__name__}, not a Judgement",
            error_type="invalid_judgement",
        )
    return scoring.score(
        judgement, answer, passages, judge_name=judge_name, policy=policy, truncated=truncated
    )


def evaluate(
    answer: str,
    contexts: Sequence[Any],
    question: str | None = None,
    judge: Judge | None = None,
    *,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
) -> Evaluation:
    """Score one answer against its retrieved passages.

    Synchronous; also safe to call where an event loop is running (Jupyter, async handlers).

    Args:
        answer: the generated answer.
        contexts: the retrieved passages: strings, :class:`Passage` objects, mappings with a
            ``text`` key, or LangChain / LlamaIndex documents and nodes.
        question: the user's question, if known.
        judge: the judge to use; the embedded :class:`LocalJudge` by default.
        policy: thresholds that turn scores into a label.

    Returns:
        An :class:`Evaluation`. A failing judge gives ``label == "error"``, never an exception.

    Raises:
        TypeError: ``answer`` is not a string, ``contexts`` is not a list of passages, or
            ``question`` is neither a string nor None.
    """
    answer, passages, question, truncated = prepare(answer, contexts, question)
    judge = judge if judge is not None else default_judge()
    try:
        judgement: Any = judge.judge(answer, passages, question)
        if inspect.isawaitable(judgement):
            judgement = _run_coroutine_blocking(judgement)
    except Exception as exc:
        _logger.debug("judge %s failed", judge_name(judge), exc_info=True)
        judgement = judgement_from_error(exc)
    return score_judgement(judgement, answer, passages, judge_name(judge), policy, truncated)


async def aevaluate(
    answer: str,
    contexts: Sequence[Any],
    question: str | None = None,
    judge: Judge | None = None,
    *,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
) -> Evaluation:
    """Like :func:`evaluate`, for async code: async judges are awaited, sync judges run in a
    thread so the event loop is not blocked."""
    answer, passages, question, truncated = prepare(answer, contexts, question)
    judge = judge if judge is not None else default_judge()
    try:
        judgement: Any = await call_judge(judge, answer, passages, question)
    except Exception as exc:
        _logger.debug("judge %s failed", judge_name(judge), exc_info=True)
        judgement = judgement_from_error(exc)
    return score_judgement(judgement, answer, passages, judge_name(judge), policy, truncated)
