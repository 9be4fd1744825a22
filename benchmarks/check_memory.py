"""Memory of ``groundwatch check`` on growing files: peak RSS must not grow with the rows.

Generates small JSONL golden sets (20,000 and 100,000 rows by default), runs
``python -m groundwatch check`` on each with every output turned on (``--json``, ``--junit``,
``--html``) at the default ``--concurrency`` (4 worker processes for the local judge), and
prints the peak resident memory of the check process next to the interpreter's baseline
(``import groundwatch`` alone, measured with ``os.wait4``), and the peak of the whole process
tree (check and its worker processes), both sampled from /proc every 50 ms.

Run: PYTHONPATH=src python benchmarks/check_memory.py [ROWS ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from check_concurrency import PeakRss

SRC = Path(__file__).resolve().parents[1] / "src"


def write_rows(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            ok = i % 4 != 0
            zh = i % 5 == 0
            context = f"埃菲尔铁塔高{i}米。" if zh else f"The tower stands {i} metres tall."
            answer = (
                context
                if ok
                else (f"铁塔由{i}根金条制成。" if zh else f"It is made of {i} gold bars.")
            )
            row = {
                "id": f"r{i}",
                "question": "How tall is the tower?",
                "contexts": [context],
                "answer": answer,
                "label": "faithful" if ok else "hallucinated",
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def measure(args: list[str]) -> tuple[float, int, int, int]:
    """Run ``python ARGS``; return (seconds, peak RSS of the process and of its process tree
    in KiB, exit code)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    peak = PeakRss(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    peak.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is the largest single process of the tree (a worker process, here): the check
    # process's own peak is the sampled one, or ru_maxrss when it ran too briefly to sample.
    own = peak.own_kib or usage.ru_maxrss
    return time.perf_counter() - start, own, max(peak.tree_kib, own), proc.returncode


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [20_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        _, baseline_kib, _, _ = measure(
            ["-c", "import groundwatch, groundwatch.check.cli, time; time.sleep(0.3)"]
        )
        print(
            f"{'rows':>8} {'input MB':>9} {'outputs MB':>11} {'seconds':>8} {'rows/s':>7} "
            f"{'peak RSS MB':>12} {'over baseline MB':>17} {'with workers MB':>16}"
        )
        print(
            f"{'(import)':>8} {'':>9} {'':>11} {'':>8} {'':>7} {baseline_kib / 1024:>12.1f} "
            f"{0:>17.1f}"
        )
        for n in sizes:
            data = base / f"rows_{n}.jsonl"
            write_rows(data, n)
            outs = [base / f"out_{n}.{ext}" for ext in ("jsonl", "xml", "html")]
            seconds, peak_kib, tree_kib, code = measure(
                [
                    "-m",
                    "groundwatch",
                    "check",
                    str(data),
                    "--progress",
                    "none",
                    # The rows hold hallucinated answers on purpose: measure, do not gate.
                    "--max-flag-share",
                    "1",
                    "--json",
                    str(outs[0]),
                    "--junit",
                    str(outs[1]),
                    "--html",
                    str(outs[2]),
                ]
            )
            assert code == 0, f"check exited {code}"
            in_mb = data.stat().st_size / 1e6
            out_mb = sum(p.stat().st_size for p in outs) / 1e6
            print(
                f"{n:>8} {in_mb:>9.1f} {out_mb:>11.1f} {seconds:>8.1f} {n / seconds:>7.0f} "
                f"{peak_kib / 1024:>12.1f} {(peak_kib - baseline_kib) / 1024:>17.1f} "
                f"{tree_kib / 1024:>16.1f}"
            )
            for p in [data, *outs]:
                p.unlink()


if __name__ == "__main__":
    main()
