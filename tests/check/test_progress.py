"""Progress on stderr: a redrawn bar on a terminal, rare plain lines on CI logs."""

from __future__ import annotations

import io

import pytest

from groundwatch.check import progress as check_progress
from groundwatch.check.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(check_progress.time, "monotonic", lambda: now[0])
    return now


def test_bar_on_a_terminal_is_redrawn_in_place_and_throttled(clock: list[float]) -> None:
    out = Terminal()
    progress = Progress(out, total=100, mode="auto")
    for done in range(1, 101):
        clock[0] += 0.01  # 100 updates over one second: about 10 redraws
        progress.update(done)
    progress.finish()
    text = out.getvalue()
    assert "\n" not in text
    assert 8 <= text.count("\r") <= 13
    assert "100/100 rows" in text and "█" * 30 in text
    assert text.endswith("\r\x1b[K")  # the bar is cleared before the summary


def test_plain_lines_on_a_pipe_every_30_seconds(clock: list[float]) -> None:
    out = io.StringIO()
    progress = Progress(out, total=None, mode="auto")
    for done in range(1, 601):
        clock[0] += 0.25  # 600 rows over 150 s
        progress.update(done)
    progress.finish(600)
    lines = out.getvalue().splitlines()
    assert len(lines) == 6
    assert lines[0] == "groundwatch check: 120 rows, 4 rows/s"
    assert lines[-1] == "groundwatch check: done, 600 rows in 150 s"
    assert "\r" not in out.getvalue()


def test_none_is_silent(clock: list[float]) -> None:
    out = Terminal()
    progress = Progress(out, total=10, mode="none")
    for done in range(10):
        clock[0] += 100
        progress.update(done)
    progress.finish()
    assert out.getvalue() == ""
