"""Judges for the worker-process tests, in a module the worker processes can import."""

from __future__ import annotations

import os
from collections.abc import Sequence

from groundwatch import LocalJudge
from groundwatch.types import Judgement, Passage


class PidJudge(LocalJudge):
    """The local judge, with the id and the nice value of the process that judged in the
    judgement's model name (``pid-123 nice-0``)."""

    name = "pid"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        judgement = super().judge(answer, contexts, question)
        return judgement.model_copy(update={"model": f"pid-{os.getpid()} nice-{os.nice(0)}"})


class AsyncPidJudge:
    """An async judge (an LLM judge's shape): it stays on this process's event loop."""

    name = "async-pid"

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        return Judgement(claims=[], model=f"pid-{os.getpid()} nice-{os.nice(0)}")
