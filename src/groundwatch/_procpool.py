"""Scoring sync judges in a worker process (``Monitor(executor="process")``)."""

from __future__ import annotations

from typing import Any


class ProcessJudge:
    @classmethod
    def wrap(cls, judge: Any) -> ProcessJudge:
        raise NotImplementedError("executor='process' lands in the next commit")
