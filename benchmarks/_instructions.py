"""Instruction counts of benchmark blocks under ``valgrind --tool=callgrind``.

Wall-clock and CPU-time ratios move with whatever else the machine runs; the number of
instructions a thread executes does not. A benchmark run with ``--instructions`` re-runs itself
under callgrind with collection off, and runs each measured block inside one call of
``functools.reduce`` (a C function the measured code does not call): callgrind switches
collection on when that function is entered and off when it returns, and dumps the counts
after it (``--toggle-collect``, ``--dump-after``). Collection is per thread, so a block's count is
the instructions of the calling (request) thread alone, as ``time.thread_time`` is its CPU time.
``PYTHONHASHSEED`` is fixed, so a repeated run gives the same counts to a few parts in 10,000.

Used by ``overhead_langchain.py`` and ``overhead_llamaindex.py``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

CHILD_FLAG = "--instructions-child"
"""Passed (with a directory) to the benchmark re-run under callgrind."""

_TOGGLE = "functools_reduce"


class Blocks:
    """The child's side: runs blocks so that callgrind counts each, and names them in order."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.blocks: list[tuple[str, int]] = []

    def run(self, name: str, block: Callable[[], object]) -> None:
        """Run ``block()`` counted, as block ``name``."""
        functools.reduce(lambda _a, _b: block(), (None, None))
        # Imports call functools.reduce too (each call dumps): this block's dump is the newest.
        self.blocks.append((name, max(_dumps(self.directory))))

    def close(self) -> None:
        (self.directory / "blocks.json").write_text(json.dumps(self.blocks))


def _dumps(directory: Path) -> dict[int, Path]:
    """Callgrind's numbered dump files in ``directory``, by number."""
    return {
        int(p.suffix[1:]): p for p in directory.glob("callgrind.out.*") if p.suffix[1:].isdigit()
    }


def child_directory(argv: Sequence[str]) -> str | None:
    """The directory after ``--instructions-child`` in ``argv``, if this is the child."""
    args = list(argv)
    if CHILD_FLAG in args:
        return args[args.index(CHILD_FLAG) + 1]
    return None


def run_counted(script: str, args: Sequence[str]) -> dict[str, list[int]]:
    """Run ``script args --instructions-child DIR`` under callgrind; instructions per block name
    (one entry per block of that name, in order)."""
    with tempfile.TemporaryDirectory(prefix="gw-callgrind-") as tmp:
        options = ["--collect-atstart=no", f"--toggle-collect={_TOGGLE}", f"--dump-after={_TOGGLE}"]
        _callgrind(Path(tmp), options, [script, *args, CHILD_FLAG, tmp])
        blocks: list[tuple[str, int]] = json.loads((Path(tmp) / "blocks.json").read_text())
        numbers = [number for _, number in blocks]
        if numbers != sorted(set(numbers)) or numbers[-1] - numbers[0] != len(numbers) - 1:
            # Something inside a block called functools.reduce and toggled collection off.
            raise SystemExit(f"blocks and callgrind dumps do not match: {numbers}")
        dumps = _dumps(Path(tmp))
        counts: dict[str, list[int]] = {}
        for name, number in blocks:
            counts.setdefault(name, []).append(_total(dumps[number]))
        return counts


def run_whole(script: str, args: Sequence[str]) -> int:
    """Instructions of every thread of ``script args`` under callgrind, start to end (child
    processes it starts are not counted)."""
    with tempfile.TemporaryDirectory(prefix="gw-callgrind-") as tmp:
        return _total(_callgrind(Path(tmp), [], [script, *args]))


def _callgrind(directory: Path, options: list[str], command: list[str]) -> Path:
    """Run this Python on ``command`` under callgrind, output in ``directory``; the output."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    out = directory / "callgrind.out"
    full = ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [*full, sys.executable, *command], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the benchmark under callgrind failed ({done.returncode})")
    return out


def _total(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


def print_table(
    counts: dict[str, list[int]], per_block: int, base: str, noop: str, unit: str
) -> None:
    """Median instructions per call of each block name, its ratio to ``base``, and its
    distance from ``noop`` in units of ``base``."""
    medians = {name: statistics.median(values) / per_block for name, values in counts.items()}
    base_value, noop_value = medians[base], medians[noop]
    print(f"| configuration | instructions per {unit} (request thread) | ratio | minus no-op |")
    print("|---|---|---|---|")
    for name, value in medians.items():
        spread = (max(counts[name]) - min(counts[name])) / per_block
        print(
            f"| {name} | {value:,.0f} (±{spread / 2:,.0f}) | {value / base_value:.3f}x "
            f"| {(value - noop_value) / base_value:+.3f}x |"
        )
