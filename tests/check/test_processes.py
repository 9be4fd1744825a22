"""``--concurrency N`` means N worker processes for a CPU-bound (sync) judge, so a local judge
uses N cores; an async judge (an LLM over the network) keeps N calls in flight on one loop."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from groundwatch.check import stream as check_stream
from groundwatch.check.cli import GateOptions, run_check

from .conftest import CONTEXT, GROUNDED, INVENTED
from .process_judges import AsyncPidJudge, PidJudge


def _rows(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            base = GROUNDED if i % 3 else INVENTED
            f.write(json.dumps({**base, "id": f"r{i}", "contexts": [CONTEXT]}) + "\n")
    return path


def _models(out: Path) -> list[tuple[str, str]]:
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    return [(x["id"], x["evaluation"]["model"]) for x in lines if x["kind"] == "evaluation"]


def test_a_sync_judge_runs_in_n_worker_processes_in_input_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small files stay in this process (an interpreter's start costs more than they do).
    monkeypatch.setattr(check_stream, "ROWS_PER_PROCESS", 10)
    data = _rows(tmp_path / "rows.jsonl", 120)
    out = tmp_path / "out.jsonl"
    code, summary, _ = run_check(
        data, PidJudge(), GateOptions(max_flag_share=1.0), json_out=out, concurrency=2
    )
    assert code == 0 and summary.rows == 120
    assert summary.labels["hallucinated"] == 40 and summary.labels["grounded"] == 80
    models = _models(out)
    assert [name for name, _ in models] == [f"r{i}" for i in range(120)]
    pids = {model.split()[0] for _, model in models}
    assert len(pids) == 2, pids
    assert f"pid-{os.getpid()}" not in pids
    # The judging is check's own work, not background work: the worker processes keep this
    # process's priority (a Monitor's lower theirs, for the app's requests).
    assert {model.split()[1] for _, model in models} == {f"nice-{os.nice(0)}"}


def test_concurrency_1_and_small_files_judge_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_stream, "ROWS_PER_PROCESS", 10)
    data = _rows(tmp_path / "rows.jsonl", 30)
    for concurrency, rows in ((1, 30), (4, 5)):
        small = _rows(tmp_path / f"rows{rows}.jsonl", rows) if rows != 30 else data
        out = tmp_path / f"out{concurrency}.jsonl"
        gate = GateOptions(max_flag_share=1.0)
        run_check(small, PidJudge(), gate, json_out=out, concurrency=concurrency)
        assert {model for _, model in _models(out)} == {f"pid-{os.getpid()} nice-{os.nice(0)}"}


def test_an_async_judge_stays_on_this_process_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_stream, "ROWS_PER_PROCESS", 10)
    data = _rows(tmp_path / "rows.jsonl", 40)
    out = tmp_path / "out.jsonl"
    gate = GateOptions(max_flag_share=1.0)
    code, summary, _ = run_check(data, AsyncPidJudge(), gate, json_out=out, concurrency=4)
    # No answer flagged among the 40 judged ones: the flag-share gate passes.
    assert summary.rows == 40 and summary.labels["no_claims"] == 40 and code == 0
    assert {model for _, model in _models(out)} == {f"pid-{os.getpid()} nice-{os.nice(0)}"}


def test_default_concurrency_is_the_usable_cores_for_a_sync_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # More worker processes than cores cost memory (one interpreter each) and buy nothing.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert check_stream.default_concurrency(PidJudge()) == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert check_stream.default_concurrency(PidJudge()) == check_stream.DEFAULT_CONCURRENCY
    # An async judge waits on the network: its calls in flight do not need cores.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert check_stream.default_concurrency(AsyncPidJudge()) == check_stream.DEFAULT_CONCURRENCY
