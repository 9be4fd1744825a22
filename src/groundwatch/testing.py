"""Helpers for users' own test suites: pytest fixtures and assertions.

Import in a ``conftest.py``::

    from groundwatch.testing import *  # noqa: F403
"""

from __future__ import annotations

__all__: list[str] = []

# --- in-memory telemetry fixture (runtime) -------------------------------------------------------

# --- assertions (offline gate) -------------------------------------------------------------------

# Imported here, aliased, so this section merges with the fixture section above without clashes
# (E402: fixture code precedes these imports once that section is filled).
import re as _re  # noqa: E402, RUF100
from collections.abc import Sequence as _Sequence  # noqa: E402, RUF100
from typing import Any as _Any  # noqa: E402, RUF100

from ._evaluate import evaluate as _evaluate  # noqa: E402, RUF100
from ._inputs import to_passage as _to_passage  # noqa: E402, RUF100
from .judges import Judge as _Judge  # noqa: E402, RUF100
from .types import Claim as _Claim  # noqa: E402, RUF100
from .types import Evaluation as _Evaluation  # noqa: E402, RUF100
from .types import Passage as _Passage  # noqa: E402, RUF100

__all__ += ["assert_grounded"]


_SENTENCE = _re.compile(r"[^.!?。！？；\n]+[.!?。！？；]?")
_TOKEN = _re.compile(r"[^\W_]+|[\u3400-\u9fff]")


def _closest_sentence(claim: str, passages: _Sequence[_Passage]) -> tuple[int, str] | None:
    """The passage sentence sharing most words with the claim: a pointer for the reader of a
    failure message when the judge gave no evidence (it is not evidence itself)."""
    words = {t.lower() for t in _TOKEN.findall(claim)}
    best: tuple[float, int, str] | None = None
    for index, passage in enumerate(passages):
        for m in _SENTENCE.finditer(passage.text):
            shared = len(words & {t.lower() for t in _TOKEN.findall(m.group(0))})
            if shared and (best is None or shared > best[0]):
                best = (shared, index, m.group(0).strip())
    return None if best is None else (best[1], best[2])


def _evidence_text(claim: _Claim, passages: _Sequence[_Passage]) -> str:
    if claim.evidence:
        ev = claim.evidence[0]
        return f'best evidence: passage {ev.passage + 1} [{ev.start}:{ev.end}]: "{ev.quote}"'
    text = "no evidence" + (f" ({claim.reason})" if claim.reason else "")
    closest = _closest_sentence(claim.text, passages)
    if closest is not None:
        text += f'; closest passage text: passage {closest[0] + 1}: "{closest[1][:300]}"'
    return text


def assert_grounded(
    answer: str,
    contexts: _Sequence[_Any],
    *,
    min_groundedness: float = 1.0,
    allow_contradicted: int = 0,
    judge: _Judge | None = None,
    question: str | None = None,
) -> _Evaluation:
    """Assert that ``answer`` is backed by ``contexts``; for use in any pytest suite.

    Scores the answer with ``judge`` (the embedded :class:`~groundwatch.LocalJudge` by default)
    and fails when its groundedness is below ``min_groundedness`` or more than
    ``allow_contradicted`` claims contradict the context. An answer with no checkable claim
    fails unless ``min_groundedness`` is 0; a judge failure always fails.

    Example::

        from groundwatch.testing import assert_grounded

        def test_refund_answer(rag_app):
            question = "Can I get my money back?"
            result = rag_app.ask(question)
            assert_grounded(result.answer, result.contexts, question=question)

    Args:
        answer: the generated answer.
        contexts: the retrieved passages (strings, passages, mappings, documents).
        min_groundedness: the least share of claims that must be supported or inferred.
        allow_contradicted: how many contradicted claims are tolerated.
        judge: the judge to use; the embedded local judge by default.
        question: the question, when the judge can use it.

    Returns:
        The :class:`~groundwatch.Evaluation`, for further assertions.

    Raises:
        AssertionError: the answer is not grounded enough; the message lists every unsupported
            and contradicted claim with its best evidence.
    """
    ev = _evaluate(answer, contexts, question=question, judge=judge)
    if ev.label == "error":
        raise AssertionError(
            f"groundwatch could not check the answer: judge {ev.judge!r} failed: {ev.error}"
        )
    if ev.groundedness is None:
        if min_groundedness > 0:
            raise AssertionError(
                f"answer is not grounded: it makes no checkable claim ({ev.explanation}): "
                f"{answer!r}"
            )
        return ev
    contradicted = [c for c in ev.claims if c.verdict == "contradicted"]
    problems: list[str] = []
    if ev.groundedness < min_groundedness - 1e-12:
        problems.append(f"groundedness {ev.groundedness:.2f} < required {min_groundedness:.2f}")
    if len(contradicted) > allow_contradicted:
        n = len(contradicted)
        problems.append(
            f"{n} contradicted claim{'' if n == 1 else 's'} (allowed {allow_contradicted})"
        )
    if not problems:
        return ev
    lines = [f"answer is not grounded: {'; '.join(problems)} [{ev.explanation}]"]
    if ev.label == "insufficient_context":
        lines.append("  the retrieved context has nothing substantive on the question")
    passages = [_to_passage(item, i) for i, item in enumerate(contexts)]
    for claim in contradicted + [c for c in ev.claims if c.verdict == "unsupported"]:
        lines.append(f"  [{claim.verdict}] {claim.text!r}")
        lines.append(f"      {_evidence_text(claim, passages)}")
    raise AssertionError("\n".join(lines))
