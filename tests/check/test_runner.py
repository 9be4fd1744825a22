"""The streaming runner: bounded concurrency, input order, flat memory."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch.check import stream as check_stream
from groundwatch.check.cli import GateOptions, run_check
from groundwatch.check.rows import Row
from groundwatch.check.stream import check_rows
from groundwatch.check.summary import CheckSummary
from groundwatch.types import Claim, Evaluation, Judgement, Passage


class SlowAsyncJudge:
    """An async judge (like the LLM judge) that answers after a delay inversely related to the
    row, so results complete out of order; it records the most calls in flight at once."""

    name = "slow-async"

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001 * (10 - int(answer.split()[-1]) % 10))
            return Judgement(
                claims=[Claim(text=answer, start=0, end=len(answer), verdict="unsupported")]
            )
        finally:
            self.in_flight -= 1


class Collect:
    def __init__(self) -> None:
        self.rows: list[int] = []

    def add(self, row: Row, ev: Evaluation, seconds: float) -> None:
        self.rows.append(row.number)

    def add_invalid(self, bad: object) -> None:
        raise AssertionError("no invalid rows here")

    def close(self, *args: object) -> None:
        pass


def test_concurrency_is_bounded_and_results_keep_input_order() -> None:
    judge = SlowAsyncJudge()
    rows = (Row(n, None, None, ["ctx"], f"answer number {n}", None) for n in range(1, 61))
    sink = Collect()
    summary = CheckSummary()
    asyncio.run(check_rows(rows, judge, summary, [sink], concurrency=3))
    assert judge.max_in_flight == 3
    assert sink.rows == list(range(1, 61))
    assert summary.rows == 60 and summary.scored == 60


def test_rows_are_pulled_lazily_within_a_bounded_window() -> None:
    pulled: list[int] = []
    seen_when_first_emitted: list[int] = []

    def rows() -> Iterator[Row]:
        for n in range(1, 101):
            pulled.append(n)
            yield Row(n, None, None, ["ctx"], f"answer number {n}", None)

    class Watch(Collect):
        def add(self, row: Row, ev: Evaluation, seconds: float) -> None:
            if not self.rows:
                seen_when_first_emitted.append(len(pulled))
            super().add(row, ev, seconds)

    asyncio.run(check_rows(rows(), SlowAsyncJudge(), CheckSummary(), [Watch()], concurrency=2))
    # With 2 workers the window is 8 rows: the first result is handed on before row 9 is read.
    assert seen_when_first_emitted == [8]


def _small_rows(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            ok = i % 3 != 0
            row = {
                "id": f"r{i}",
                "question": "How tall is the tower?",
                "contexts": [f"The tower stands {i} metres tall."],
                "answer": f"The tower stands {i} metres tall."
                if ok
                else f"It is made of {i} bars.",
                "label": "faithful" if ok else "hallucinated",
            }
            f.write(json.dumps(row) + "\n")
    return path


def _peak_bytes(tmp_path: Path, n: int) -> int:
    data = _small_rows(tmp_path / f"rows{n}.jsonl", n)
    outs = {
        "json_out": tmp_path / f"o{n}.jsonl",
        "junit_out": tmp_path / f"o{n}.xml",
        "html_out": tmp_path / f"o{n}.html",
    }
    judge = gw.LocalJudge()
    tracemalloc.start()
    try:
        code, summary, _ = run_check(
            data, judge, GateOptions(max_flag_share=1.0), concurrency=4, **outs
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0 and summary.rows == n
    return peak


def test_memory_does_not_grow_with_the_number_of_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both runs judge in 4 worker processes (the host's per-process pipes and threads are the
    # same), so any difference is per row.
    monkeypatch.setattr(check_stream, "ROWS_PER_PROCESS", 10)
    # Warm up (imports, caches) so both measured runs start from the same state.
    _peak_bytes(tmp_path, 100)
    small = _peak_bytes(tmp_path, 200)
    large = _peak_bytes(tmp_path, 1000)
    # 5x the rows; anything kept per row (a list of evaluations, the HTML in memory) would
    # add its size times 800 rows. Allow noise (measured: about 186 kB vs 203 kB), not growth:
    # 60 kB over 800 more rows is 75 bytes a row, less than any evaluation's footprint.
    print(f"tracemalloc peak: 200 rows {small} B, 1000 rows {large} B")
    assert large - small < 60_000, (small, large)
