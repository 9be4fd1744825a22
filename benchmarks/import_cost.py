"""What importing groundwatch costs an application at start-up, beside its own dependencies.

Each statement runs in a fresh interpreter that times only the statement
(``time.perf_counter`` around it, so the interpreter's own start is left out); the statements
take turns, round after round, so that load on a shared machine falls on all of them alike.
Prints the median of each, as a ratio of its baseline:

- ``import groundwatch`` and ``from groundwatch import Monitor`` against importing groundwatch's
  two dependencies as an application does, exactly
  ``import pydantic, opentelemetry.trace, opentelemetry.metrics, opentelemetry._logs``: the
  ratio is ``median(from groundwatch import Monitor) / median(that statement)``, each in fresh
  interpreters. Target: at most 1.5x. (``import pydantic`` loads its model machinery only when
  a model is first used, so neither side pays for it unless groundwatch does.)
- ``import groundwatch_langchain`` and ``import groundwatch_llamaindex`` after their framework,
  against the framework alone: what adding the integration adds to an application that uses
  the framework. The framework's import is what a RAG application needs of it at the least:
  LangChain's callbacks, documents and runnables (a chain), ``llama_index.core`` (an index and
  its query engine). Target: at most 1.3x. A row for information times the integration against
  ``BaseCallbackHandler`` alone, the one LangChain class its handler subclasses.

And, for information, what the integrations import from the core
(``groundwatch.integration``, ``groundwatch.telemetry.semconv``) against the first baseline.

Usage::

    python benchmarks/import_cost.py [--rounds 21] [--cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys

DEPENDENCIES = "import pydantic, opentelemetry.trace, opentelemetry.metrics, opentelemetry._logs"
LANGCHAIN = (
    "from langchain_core.callbacks import BaseCallbackHandler\n"
    "from langchain_core.documents import Document\n"
    "from langchain_core.runnables import RunnableLambda"
)
LANGCHAIN_CALLBACKS = "from langchain_core.callbacks import BaseCallbackHandler"
LLAMAINDEX = "import llama_index.core"

BASELINES = {
    "baseline: pydantic + opentelemetry-api": DEPENDENCIES,
    "baseline: langchain-core (chain)": LANGCHAIN,
    "baseline: BaseCallbackHandler alone": LANGCHAIN_CALLBACKS,
    "baseline: llama_index.core": LLAMAINDEX,
}

# name -> (statement, its baseline, the target ratio or None for information)
ROWS: dict[str, tuple[str, str, float | None]] = {
    "import groundwatch": (
        "import groundwatch",
        "baseline: pydantic + opentelemetry-api",
        1.5,
    ),
    "from groundwatch import Monitor": (
        "from groundwatch import Monitor",
        "baseline: pydantic + opentelemetry-api",
        1.5,
    ),
    "the integrations' core import": (
        "import groundwatch.integration\nfrom groundwatch.telemetry import semconv",
        "baseline: pydantic + opentelemetry-api",
        None,
    ),
    "+ import groundwatch_langchain": (
        f"{LANGCHAIN}\nimport groundwatch_langchain",
        "baseline: langchain-core (chain)",
        1.3,
    ),
    "import groundwatch_langchain": (
        "import groundwatch_langchain",
        "baseline: BaseCallbackHandler alone",
        None,
    ),
    "+ import groundwatch_llamaindex": (
        f"{LLAMAINDEX}\nimport groundwatch_llamaindex",
        "baseline: llama_index.core",
        1.3,
    ),
}

_TIMED = "import time\nt0 = time.{clock}()\n{stmt}\nprint(time.{clock}() - t0)\n"


def cost_s(stmt: str, clock: str = "perf_counter") -> float:
    """Seconds ``stmt`` takes in a fresh interpreter (wall clock, or CPU time)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    done = subprocess.run(
        [sys.executable, "-c", _TIMED.format(stmt=stmt, clock=clock)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{stmt!r} failed: {last}")
    return float(done.stdout.split()[-1])


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="fresh interpreters per row")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time the process's CPU (time.process_time) instead of the wall clock: steadier "
        "on a machine that other work keeps busy",
    )
    args = parser.parse_args()
    clock = "process_time" if args.cpu else "perf_counter"

    # A framework that is not installed leaves out its rows (the core's are always there).
    missing = [m for m in ("langchain_core", "llama_index.core") if not _installed(m)]
    baselines = {n: s for n, s in BASELINES.items() if not any(m in s for m in missing)}
    rows = {n: r for n, r in ROWS.items() if r[1] in baselines}
    if missing:
        print(f"not installed, their rows left out: {', '.join(missing)}")
    statements = {**baselines, **{name: row[0] for name, row in rows.items()}}
    for stmt in statements.values():  # once untimed: the bytecode caches are written
        cost_s(stmt, clock)
    times: dict[str, list[float]] = {name: [] for name in statements}
    for _ in range(args.rounds):
        for name, stmt in statements.items():
            times[name].append(cost_s(stmt, clock))

    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(
        f"python {sys.version.split()[0]}, {args.rounds} rounds, median of fresh interpreters "
        f"({'CPU time' if args.cpu else 'wall clock'})"
    )
    for name in baselines:
        print(f"  {name:<42} {medians[name] * 1e3:7.1f} ms")
    verdicts = []
    for name, (_, baseline, target) in rows.items():
        ratio = medians[name] / medians[baseline]
        goal = "" if target is None else f"  (target {target}x)"
        print(f"  {name:<42} {medians[name] * 1e3:7.1f} ms  {ratio:5.2f}x {baseline}{goal}")
        if target is not None:
            verdicts.append(f"{name}: {'within' if ratio <= target else 'OVER'}")
    monitor = "from groundwatch import Monitor"
    if monitor in rows:
        ratio = medians[monitor] / medians["baseline: pydantic + opentelemetry-api"]
        print(
            f"the target's ratio: median({monitor}) / median({DEPENDENCIES}) = {ratio:.2f} "
            f"(at most 1.5)"
        )
    print("; ".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
