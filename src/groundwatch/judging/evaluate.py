"""``evaluate()`` and ``aevaluate()``: score one answer, synchronously or in an event loop."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .._error_types import ERROR_INTERNAL
from .._inputs import prepare
from ..types import VERDICTS, Claim, Evaluation, Evidence, Judgement, Passage, Usage
from . import scoring
from .judges import Judge, LocalJudge
from .judges._base import as_judgement, judge_async, judge_name, judge_sync

_default_judge: Judge | None = None
_default_judge_lock = threading.Lock()


def default_judge() -> Judge:
    """The process-wide default judge (a :class:`LocalJudge`), built on first use."""
    global _default_judge
    with _default_judge_lock:
        if _default_judge is None:
            _default_judge = LocalJudge()
        return _default_judge


def score_judgement(
    judgement: Judgement,
    answer: str,
    passages: Sequence[Passage],
    judge_name: str,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
    truncated: bool = False,
) -> Evaluation:
    """Score a judge's judgement of one prepared answer (a ``Judgement`` built past validation
    with fields of the wrong shape is an ``internal`` error). The scoring step of
    :func:`evaluate`, :func:`aevaluate` and every runner of the online runtime."""
    judgement = as_judgement(judgement)  # a caller's own flow may hand anything
    problem = malformed(judgement)
    if problem is not None:
        judgement = Judgement(
            error=f"judge returned a malformed Judgement: {problem}"[:500],
            error_type=ERROR_INTERNAL,
        )
    return scoring.score(
        judgement, answer, passages, judge_name=judge_name, policy=policy, truncated=truncated
    )


def _kind(value: Any) -> str:
    return type(value).__name__


def _claim_problem(claim: Any) -> str | None:
    if not isinstance(claim, Claim):
        return f"a claim is {_kind(claim)}, not a Claim"
    if not isinstance(claim.text, str):
        return f"claim text is {_kind(claim.text)}"
    if claim.verdict not in VERDICTS:
        return f"claim verdict {claim.verdict!r:.40} is not one of {', '.join(VERDICTS)}"
    for name in ("start", "end"):
        value = getattr(claim, name)
        if value is not None and (type(value) is not int):
            return f"claim {name} is {_kind(value)}"
    if not isinstance(claim.reason, str):
        return f"claim reason is {_kind(claim.reason)}"
    confidence = claim.confidence
    if confidence is not None and type(confidence) not in (float, int):
        return f"claim confidence is {_kind(confidence)}"
    if type(claim.evidence) is not list:
        return f"claim evidence is {_kind(claim.evidence)}, not a list"
    for evidence in claim.evidence:
        if not isinstance(evidence, Evidence):
            return f"evidence is {_kind(evidence)}, not an Evidence"
        for name in ("passage", "start", "end"):
            value = getattr(evidence, name)
            if type(value) is not int:
                return f"evidence {name} is {_kind(value)}"
        if not isinstance(evidence.quote, str):
            return f"evidence quote is {_kind(evidence.quote)}"
    return None


def malformed(judgement: Judgement) -> str | None:
    """What is wrong with a ``Judgement`` whose fields do not have their declared types (one
    built with ``model_construct``, or changed after validation), or ``None`` when it is well
    formed. Checked field by field (microseconds), not by validating it again: this runs for
    every evaluation, on the worker's thread in the host's interpreter."""
    claims = judgement.claims
    if type(claims) is not list:
        return f"claims is {_kind(claims)}, not a list"
    for name in ("model", "error", "error_type"):
        value = getattr(judgement, name)
        if value is not None and not isinstance(value, str):
            return f"{name} is {_kind(value)}, not a string"
    usage = judgement.usage
    if usage is not None and not (
        isinstance(usage, Usage)
        and all(type(getattr(usage, n)) is int for n in ("input_tokens", "output_tokens", "calls"))
    ):
        return f"usage is {_kind(usage)} with fields of the wrong type"
    for claim in claims:
        problem = _claim_problem(claim)
        if problem is not None:
            return problem
    return None


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
