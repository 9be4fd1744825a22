"""``evaluate()`` and ``aevaluate()``: score one answer, synchronously or in an event loop."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .._inputs import prepare
from ..types import Evaluation
from . import scoring
from .judges import Judge, LocalJudge
from .judges._base import judge_async, judge_name, judge_sync
from .scoring import score_judgement

_default_judge: Judge | None = None
_default_judge_lock = threading.Lock()


def default_judge() -> Judge:
    """The process-wide default judge (a :class:`LocalJudge`), built on first use."""
    global _default_judge
    with _default_judge_lock:
        if _default_judge is None:
            _default_judge = LocalJudge()
        return _default_judge


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
    judgement = judge_sync(judge, answer, passages, question)
    return score_judgement(judgement, answer, passages, judge_name(judge), policy, truncated)


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
    return score_judgement(judgement, answer, passages, judge_name(judge), policy, truncated)
