"""The judge protocol: anything that turns (answer, passages, question) into claim verdicts."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol, runtime_checkable

from ..types import Judgement, Passage


@runtime_checkable
class Judge(Protocol):
    """Finds an answer's claims and gives each a verdict with evidence.

    ``judge`` may be a plain method or a coroutine function. It should not raise: a failure is a
    ``Judgement`` with ``error`` set (the caller also guards against judges that do raise).
    Scores and labels are not the judge's business; :mod:`groundwatch.scoring` computes them.
    """

    name: str

    def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement | Awaitable[Judgement]: ...
