"""Throughput of ``groundwatch check --concurrency N``: rows per second side by side, and memory.

The local judge is CPU-bound, so ``--concurrency N`` judges in N worker processes; this prints
the rows per second of ``--concurrency 1`` (judged in the check process) and of each other N
asked for, measured in the same run, alternating the runs (1, 2, 2, 1, ...) so that a change in
the machine's load meets every N alike. Each figure is the median of the rounds; the ratio is
that of the medians. Also per run: CPU seconds over wall seconds (the cores it used) and the
peak RSS of the whole process tree (check and its worker processes, sampled every 50 ms), on a
generated file of about 20 MB and on one a tenth of it: memory stays flat when the two peaks
match.

Rows are RAG-shaped: a question, three passages of about 300-450 characters each, and an answer
of two or three sentences (about 1.1 kB a row; a quarter contradict or invent a fact).

The load of the machine (``/proc/loadavg``) is printed before and after: other work on the
cores lowers every figure, and a ratio measured under load says less than one on idle cores.

Run: PYTHONPATH=src python benchmarks/check_concurrency.py [--mb 20] [--rounds 2] [N ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CITIES = ["Lyon", "Porto", "Kraków", "Ghent", "Turin", "Bergen", "Utrecht", "Graz", "Malmö"]
THINGS = ["bridge", "library", "museum", "station", "tower", "market hall", "theatre"]


def _passage(rng: random.Random, city: str, thing: str, year: int, height: int) -> str:
    sentences = [
        f"The {thing} of {city} was completed in {year} after {rng.randint(3, 12)} years of work.",
        f"It is {height} metres tall and was designed by the architect {rng.choice(NAMES)}.",
        f"About {rng.randint(2, 90) * 1000:,} people visit it every year, most of them in summer.",
        f"The city council restored its facade in {year + rng.randint(40, 110)}.",
        f"Guided tours start every {rng.choice([15, 20, 30, 45])} minutes from the main entrance.",
        f"Tickets cost {rng.randint(4, 25)} euros for adults and half that for students.",
    ]
    rng.shuffle(sentences)
    return " ".join(sentences[: rng.randint(3, 5)])


NAMES = ["Ana Ortega", "Jan de Vries", "Marta Nowak", "Luis Ferreira", "Ingrid Berg"]


def row(i: int, rng: random.Random) -> dict[str, object]:
    city, thing = rng.choice(CITIES), rng.choice(THINGS)
    year, height = rng.randint(1850, 1990), rng.randint(20, 180)
    contexts = [_passage(rng, city, thing, year, height)]
    for _ in range(2):
        contexts.append(
            _passage(rng, rng.choice(CITIES), rng.choice(THINGS), year + 7, height + 11)
        )
    rng.shuffle(contexts)
    answer = f"The {thing} of {city} was completed in {year}. It is {height} metres tall."
    bad = i % 4 == 0
    if bad:
        answer = f"The {thing} of {city} was completed in {year + 3}. It is made of gold."
    elif i % 3 == 0:
        answer += " It was designed by the architect Ana Ortega."
    return {
        "id": f"r{i}",
        "question": f"When was the {thing} of {city} completed and how tall is it?",
        "contexts": contexts,
        "answer": answer,
        "label": "hallucinated" if bad else "faithful",
    }


def write_file(path: Path, megabytes: float) -> int:
    """A JSONL file of about ``megabytes`` MB; returns its row count."""
    rng = random.Random(26)
    target = int(megabytes * 1_000_000)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        while f.tell() < target:
            f.write(json.dumps(row(n, rng), ensure_ascii=False) + "\n")
            n += 1
    return n


def tree_rss_kib(pid: int) -> tuple[int, int]:
    """RSS of ``pid`` alone and of ``pid`` with its descendants, from /proc (Linux), in KiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, pages = int(fields[1]), int(fields[21])
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return rss.get(pid, 0), total


class PeakRss:
    """Samples the RSS of a process and of its tree every 50 ms until :meth:`stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.own_kib = self.tree_kib = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.05):
            own, tree = tree_rss_kib(self.pid)
            self.own_kib, self.tree_kib = max(self.own_kib, own), max(self.tree_kib, tree)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def run_check(path: Path, concurrency: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = [sys.executable, "-m", "groundwatch", "check", str(path), "--progress", "none"]
    args += ["--max-flag-share", "1", "--concurrency", str(concurrency)]
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = PeakRss(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    peak.stop()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --concurrency {concurrency} exited {proc.returncode}: {err!r}")
    rows = next(
        int(line.split()[2]) for line in out.decode().splitlines() if line.startswith("rows ")
    )
    return {"wall": wall, "rows": rows, "peak_tree_kib": peak.tree_kib}


def run_timed(path: Path, concurrency: int) -> dict[str, float]:
    """:func:`run_check` with the CPU time of the process and its waited children."""
    before = os.times()
    result = run_check(path, concurrency)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    result["cpu"] = cpu
    return result


def loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("concurrency", nargs="*", type=int, default=[2])
    parser.add_argument("--mb", type=float, default=20.0, help="size of the large file")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    levels = [1, *[n for n in args.concurrency if n != 1]]
    print(f"cores: {os.cpu_count()}  load average (1, 5, 15 min) before: {loadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big.jsonl", Path(tmp) / "small.jsonl"
        n_big, n_small = write_file(big, args.mb), write_file(small, args.mb / 10)
        size = big.stat().st_size / n_big
        print(
            f"file: {n_big:,} rows, {big.stat().st_size / 1e6:.1f} MB "
            f"({size:,.0f} bytes a row); small file: {n_small:,} rows"
        )
        results: dict[int, list[dict[str, float]]] = {n: [] for n in levels}
        for r in range(args.rounds):
            order = levels if r % 2 == 0 else levels[::-1]
            for n in order:
                results[n].append(run_timed(big, n))
        print(
            f"\n{'concurrency':>11} {'rows/s':>8} {'x of 1':>7} {'wall s':>7} {'cpu/wall':>8} "
            f"{'peak tree MB':>12} {'small file peak MB':>18}"
        )
        base = statistics.median(n_big / x["wall"] for x in results[1])
        for n in levels:
            rates = [n_big / x["wall"] for x in results[n]]
            rate = statistics.median(rates)
            wall = statistics.median(x["wall"] for x in results[n])
            cores = statistics.median(x["cpu"] / x["wall"] for x in results[n])
            peak = max(x["peak_tree_kib"] for x in results[n]) / 1024
            small_peak = run_timed(small, n)["peak_tree_kib"] / 1024
            print(
                f"{n:>11} {rate:>8.0f} {rate / base:>7.2f} {wall:>7.1f} {cores:>8.2f} "
                f"{peak:>12.1f} {small_peak:>18.1f}"
            )
            print(f"{'':>11} rounds: " + ", ".join(f"{x:.0f}" for x in rates) + " rows/s")
    print(f"\nload average after: {loadavg()}")


if __name__ == "__main__":
    main()
