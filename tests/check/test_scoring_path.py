"""``groundwatch check`` scores through the runtime's one scoring path: the pipeline prepares
each row (with check's caps), drives the runner as for a monitor (instrumentation suppressed,
``start`` before ``run``), and the runner judges and scores with the same composition as
``groundwatch.evaluate``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from groundwatch import LocalJudge, evaluate
from groundwatch.check import stream as check_stream
from groundwatch.check.cli import GateOptions, run_check
from groundwatch.integration import suppressed
from groundwatch.judging import evaluate as evaluate_module
from groundwatch.judging.judges import Judge
from groundwatch.judging.scoring import score_judgement as real
from groundwatch.runtime.runners.contract import Prepared, Runner, RunnerResult
from groundwatch.types import Judgement, Passage

from .conftest import CONTEXT, GOLDEN_SET, GROUNDED, INVENTED, write_jsonl

OPEN_GATE = GateOptions(max_flag_share=1.0, max_errors=100)


class SuppressionWatchingJudge(LocalJudge):
    """The local judge, noting for each call whether instrumentation was suppressed (a judge's
    own HTTP or LLM calls must not create spans in the user's traces)."""

    name = "watching"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        self.seen.append(suppressed())
        return super().judge(answer, contexts, question)


class AsyncSuppressionWatchingJudge:
    """An async judge (an LLM judge's shape) noting the same."""

    name = "async-watching"

    def __init__(self) -> None:
        self.seen: list[bool] = []

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        self.seen.append(suppressed())
        return Judgement(claims=[])


def _rows(tmp_path: Path, n: int) -> Path:
    rows = [{**(GROUNDED if i % 2 else INVENTED), "id": f"r{i}"} for i in range(n)]
    return write_jsonl(tmp_path / "rows.jsonl", rows)


@pytest.mark.parametrize("judge_kind", ["sync", "async"])
def test_the_judge_runs_with_instrumentation_suppressed(tmp_path: Path, judge_kind: str) -> None:
    judge: Any = (
        SuppressionWatchingJudge() if judge_kind == "sync" else AsyncSuppressionWatchingJudge()
    )
    _, summary, _ = run_check(_rows(tmp_path, 6), judge, OPEN_GATE, concurrency=1)
    assert summary.rows == 6 and summary.labels["error"] == 0
    assert judge.seen == [True] * 6


class RecordingRunner:
    """A real runner, with the calls the check made on it noted in order."""

    def __init__(self, inner: Runner, calls: list[str]) -> None:
        self.inner = inner
        self.calls = calls
        self.name = inner.name
        self.concurrency = inner.concurrency

    def batch_size(self) -> int:
        return self.inner.batch_size()

    async def start(self) -> None:
        self.calls.append("start")
        await self.inner.start()

    async def run(
        self, items: Sequence[Prepared], policy: Any, timeout_s: float
    ) -> list[RunnerResult]:
        self.calls.append(f"run {len(items)}")
        return await self.inner.run(items, policy, timeout_s)

    def flush(self, timeout_s: float) -> bool:
        return self.inner.flush(timeout_s)

    def at_fork_reinit(self) -> None:
        self.inner.at_fork_reinit()

    def close(self) -> None:
        self.calls.append("close")
        self.inner.close()


def test_each_batch_starts_the_runner_before_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # start() is where a worker process starts, outside every evaluation deadline; the check
    # awaits it before each batch as the monitor's worker does.
    calls: list[str] = []
    real = check_stream.check_runner

    def recording(judge: Judge, concurrency: int, processes: int) -> Runner:
        return RecordingRunner(real(judge, concurrency, processes), calls)

    monkeypatch.setattr(check_stream, "check_runner", recording)
    _, summary, _ = run_check(_rows(tmp_path, 5), LocalJudge(), OPEN_GATE, concurrency=1)
    assert summary.rows == 5
    runs = [c for c in calls if c.startswith("run")]
    assert sum(int(c.split()[1]) for c in runs) == 5
    assert calls[-1] == "close"
    for i, call in enumerate(calls):
        if call.startswith("run"):
            assert calls[i - 1] == "start", calls


def test_a_row_gets_the_evaluation_evaluate_gives(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run_check(GOLDEN_SET, LocalJudge(), OPEN_GATE, json_out=out, concurrency=1)
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    checked = [x for x in lines if x["kind"] == "evaluation"]
    rows = [json.loads(x) for x in GOLDEN_SET.read_text(encoding="utf-8").splitlines() if x]
    assert len(checked) == len(rows) > 5
    for row, line in zip(rows, checked, strict=True):
        alone = evaluate(row["answer"], row["contexts"], row.get("question"), LocalJudge())
        got = line["evaluation"]
        assert (got["label"], got["faithfulness"], got["groundedness"]) == (
            alone.label,
            alone.faithfulness,
            alone.groundedness,
        ), row["id"]
        assert [c["verdict"] for c in got["claims"]] == [c.verdict for c in alone.claims]


def test_a_scoring_failure_is_the_same_error_evaluation_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug of ours while scoring fails that answer as ``internal``, whoever asked: the check
    # (through a runner) and evaluate() compose judge → score in one place.
    def broken(judgement: Judgement, *args: Any, **kwargs: Any) -> Any:
        if judgement.error is None:  # the failed judgement that replaces it still scores
            raise ZeroDivisionError("a scoring bug")
        return real(judgement, *args, **kwargs)

    monkeypatch.delenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS", raising=False)
    monkeypatch.setattr(evaluate_module, "score_judgement", broken)
    alone = evaluate(str(GROUNDED["answer"]), [CONTEXT], str(GROUNDED["question"]), LocalJudge())
    assert (alone.label, alone.error_type) == ("error", "internal")
    out = tmp_path / "out.jsonl"
    code, summary, _ = run_check(
        _rows(tmp_path, 3), LocalJudge(), GateOptions(), json_out=out, concurrency=1
    )
    assert summary.labels["error"] == 3 and code == 1
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    errors = {x["evaluation"]["error_type"] for x in lines if x["kind"] == "evaluation"}
    assert errors == {"internal"}
