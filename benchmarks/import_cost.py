"""What ``import groundwatch`` costs an application at start-up, beside its own dependencies.

Each statement runs in a fresh interpreter that times only the statement
(``time.perf_counter`` around it, so the interpreter's own start is left out); the statements
take turns, round after round, so that load on a shared machine falls on all of them alike.
Prints the median of each, and ``import groundwatch`` as a ratio of the baseline: importing
groundwatch's two dependencies, pydantic (with ``BaseModel``, what defining a model needs) and
the OpenTelemetry API (trace, metrics, logs, context). The target is at most 1.5x.

Further rows, for information: what an application pays when it first uses the monitor
(``from groundwatch import Monitor``) and what the LangChain and LlamaIndex integrations import
when they are imported (``groundwatch.integration``, ``groundwatch.telemetry.semconv``).

Usage::

    python benchmarks/import_cost.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

TARGET = 1.5

BASELINE = (
    "from pydantic import BaseModel\nfrom opentelemetry import _logs, context, metrics, trace"
)
GROUNDWATCH = "import groundwatch"
OTHERS = {
    "from groundwatch import Monitor": "from groundwatch import Monitor",
    "integrations' import": (
        "import groundwatch.integration\nfrom groundwatch.telemetry import semconv"
    ),
}

_TIMED = "import time\nt0 = time.perf_counter()\n{stmt}\nprint(time.perf_counter() - t0)\n"


def cost_s(stmt: str) -> float:
    """Seconds ``stmt`` takes in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    done = subprocess.run(
        [sys.executable, "-c", _TIMED.format(stmt=stmt)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{stmt!r} failed: {last}")
    return float(done.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="fresh interpreters per row")
    args = parser.parse_args()

    rows = {"baseline: pydantic + opentelemetry-api": BASELINE, GROUNDWATCH: GROUNDWATCH, **OTHERS}
    for stmt in rows.values():  # once untimed: the bytecode caches are written
        cost_s(stmt)
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, stmt in rows.items():
            times[name].append(cost_s(stmt))

    medians = {name: statistics.median(ts) for name, ts in times.items()}
    base = medians["baseline: pydantic + opentelemetry-api"]
    print(f"python {sys.version.split()[0]}, {args.rounds} rounds, median of fresh interpreters")
    for name, median in medians.items():
        print(f"  {name:<42} {median * 1e3:7.1f} ms  {median / base:5.2f}x baseline")
    ratio = medians[GROUNDWATCH] / base
    verdict = "within" if ratio <= TARGET else "OVER"
    print(f"import groundwatch: {ratio:.2f}x the baseline ({verdict} the {TARGET}x target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
