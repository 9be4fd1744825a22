"""Judge and score one answer: the one composition every path uses.

:func:`judge_and_score` calls the judge through the one judge-call adapter
(:func:`~.judges._base.judge_sync`) and scores its result (:func:`scored_judgement`); the
runtime's runners (a thread, the worker process) judge each prepared record with it, and
:func:`evaluate` / :func:`aevaluate` are it for one answer, after the same preparing
(:func:`groundwatch._shared.inputs.prepare`). An async judge on a runner is awaited under that
runner's deadline and watchdog, then scored with :func:`scored_judgement` as well.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._shared import guard
from .._shared.error_types import ERROR_INTERNAL
from .._shared.inputs import prepare
from ..types import Evaluation, Judgement, Passage
from . import scoring
from .judges._base import judge_async, judge_name, judge_sync
from .scoring import score_judgement

if TYPE_CHECKING:
    from .judges import Judge

_default_judge: Judge | None = None
_default_judge_lock = threading.Lock()


def default_judge() -> Judge:
    """The process-wide default judge (a :class:`LocalJudge`), built on first use."""
    global _default_judge
    with _default_judge_lock:
        if _default_judge is None:
            # Imported here: a runner that judges with another judge never loads this one.
            from .judges import LocalJudge

            _default_judge = LocalJudge()
        return _default_judge


def scored_judgement(
    judgement: Judgement,
    answer: str,
    passages: Sequence[Passage],
    judge: str,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
    *,
    truncated: bool = False,
    reraise: bool = False,
) -> Evaluation:
    """Score a judge's result for one prepared answer. Never raises (unless ``reraise`` and
    ``GROUNDWATCH_RAISE_INTERNAL_ERRORS``): whatever goes wrong while scoring (a bug of ours)
    fails this answer as ``internal``, not its batch nor the caller."""
    try:
        return score_judgement(judgement, answer, passages, judge, policy, truncated=truncated)
    except Exception as exc:
        guard.internal_error("scoring", exc, reraise=reraise)
        failed = Judgement(error=f"scoring failed: {type(exc).__name__}", error_type=ERROR_INTERNAL)
        return score_judgement(failed, answer, passages, judge, truncated=truncated)


def judge_and_score(
    judge: Any,
    answer: str,
    passages: Sequence[Passage],
    question: str | None,
    *,
    truncated: bool = False,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
    name: str | None = None,
    reraise: bool = False,
) -> Evaluation:
    """Judge one prepared answer with a sync judge on the calling thread (a runner's thread,
    the worker process, :func:`evaluate`) and score the result. Never raises (see
    :func:`scored_judgement`); ``name`` is the judge's name when the caller knows it."""
    judgement = judge_sync(judge, answer, passages, question)
    name = name if name is not None else judge_name(judge)
    return scored_judgement(
        judgement, answer, passages, name, policy, truncated=truncated, reraise=reraise
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
    return judge_and_score(
        judge, answer, passages, question, truncated=truncated, policy=policy, reraise=True
    )


async def aevaluate(
    answer: str,
    contexts: Sequence[Any],
    question: str | None = None,
    judge: Judge | None = None,
    *,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
) -> Evaluation:
    """Like :func:`evaluate`, for async code: async judges are awaited, sync judges run on a
    daemon thread so the event loop is not blocked."""
    answer, passages, question, truncated = prepare(answer, contexts, question)
    judge = judge if judge is not None else default_judge()
    judgement = await judge_async(judge, answer, passages, question)
    return scored_judgement(
        judgement, answer, passages, judge_name(judge), policy, truncated=truncated, reraise=True
    )
