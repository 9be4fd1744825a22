"""Memory of ``groundwatch check`` on growing files: peak RSS must not grow with the rows.

Generates small JSONL golden sets (20,000 and 100,000 rows by default), runs
``python -m groundwatch check`` on each with every output turned on (``--json``, ``--junit``,
``--html``), and prints the peak resident memory of each run next to the interpreter's baseline
(``import groundwatch`` alone), measured with ``os.wait4`` on the child process.

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


def measure(args: list[str]) -> tuple[float, int, int]:
    """Run ``python ARGS``; return (seconds, peak RSS in KiB, exit code)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss, proc.returncode


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [20_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        _, baseline_kib, _ = measure(["-c", "import groundwatch, groundwatch.check.cli"])
        print(
            f"{'rows':>8} {'input MB':>9} {'outputs MB':>11} {'seconds':>8} {'rows/s':>7} "
            f"{'peak RSS MB':>12} {'over baseline MB':>17}"
        )
        print(
            f"{'(import)':>8} {'':>9} {'':>11} {'':>8} {'':>7} {baseline_kib / 1024:>12.1f} "
            f"{0:>17.1f}"
        )
        for n in sizes:
            data = base / f"rows_{n}.jsonl"
            write_rows(data, n)
            outs = [base / f"out_{n}.{ext}" for ext in ("jsonl", "xml", "html")]
            seconds, peak_kib, code = measure(
                [
                    "-m",
                    "groundwatch",
                    "check",
                    str(data),
                    "--progress",
                    "none",
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
                f"{peak_kib / 1024:>12.1f} {(peak_kib - baseline_kib) / 1024:>17.1f}"
            )
            for p in [data, *outs]:
                p.unlink()


if __name__ == "__main__":
    main()
