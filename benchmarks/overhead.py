"""What groundwatch costs the host: ``Monitor.record()`` on the caller's thread, and the host's
request latency while the judge is busy, with the judge on a thread vs in a worker process.

Run (about a minute)::

    python benchmarks/overhead.py            # --quick for a 15-second smoke run

Table 1: ``record()`` cost in microseconds (median, p99) at sampling rate 0 and 1, each call
made inside an active span (as an integration would), while the worker is kept busy scoring
with the default LocalJudge (a backlog of ``always_score`` records keeps it working throughout).

Table 0 (``--worker-cpu``, alone): the host CPU that background scoring takes per scored
record: CPU of the whole host process (every thread: the worker's loop, the pipe threads,
telemetry) while a burst of records is scored and the main thread waits in ``force_flush``,
divided by the records; and the worker thread's own share. The worker process's CPU is not
counted (it runs beside the host's interpreter, not in it). With the LocalJudge and with a
judge that does nothing (the pure hand-off and telemetry cost).

Table 2: a simulated host request: the host thread waits 2 ms off the GIL (as a server thread
waits on its socket), then does about 1 ms of pure-Python work and calls ``record()``; latency
runs from the end of the wait, so it includes taking the GIL back from a busy judge. Without
groundwatch, with the judge on a thread of the host's interpreter (``executor="thread"``), and
in a worker process (``executor="process"``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(1, str(Path(__file__).resolve().parent))

from _discard import InstantJudge
from _stats import percentile
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import groundwatch as gw

PASSAGES = [
    (
        f"Section {i}. The Harbour Bridge carries eight lanes of road traffic and two railway "
        f"tracks. It opened in 1932 after eight years of construction and cost about "
        f"{i + 4} million pounds. Its arch spans 503 metres and its top is 134 metres above "
        f"the harbour. Painting it takes about ten years and uses 80,000 litres of paint. "
    )
    * 3
    for i in range(6)
]
ANSWER = (
    "The Harbour Bridge opened in 1932 after eight years of construction. Its arch spans 503 "
    "metres. It carries eight lanes of road traffic and two railway tracks. Painting it takes "
    "about ten years. The bridge was designed by a Danish architect. "
) * 2
QUESTION = "Tell me about the Harbour Bridge."


PROCESS_FACTS: list[tuple[float, float | None]] = []


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process only, not its children
    return usage.ru_utime + usage.ru_stime


def worker_cpu(judge: Any, executor: str, n: int) -> tuple[float, float, float]:
    """(host CPU ms per record, worker thread CPU ms per record, wall ms per record)."""
    monitor = gw.Monitor(
        judge=judge,
        sampler=gw.RatioSampler(1.0),
        max_queue_size=n + 100,
        executor=executor,
        shutdown_on_exit=False,
        **providers(),
    )
    for _ in range(20):  # start the worker (and its process), warm everything up
        monitor.record(question=QUESTION, contexts=PASSAGES, answer=ANSWER)
    assert monitor.force_flush(60_000)
    thread = monitor._worker._thread  # type: ignore[union-attr]
    assert thread is not None and thread.ident is not None
    clock = time.pthread_getcpuclockid(thread.ident)
    for _ in range(n):  # record() itself is Table 1's business: not in these figures
        monitor.record(question=QUESTION, contexts=PASSAGES, answer=ANSWER)
    wall0, cpu0, thread0 = time.perf_counter(), _process_cpu_s(), time.clock_gettime(clock)
    assert monitor.force_flush(300_000)
    wall1, cpu1, thread1 = time.perf_counter(), _process_cpu_s(), time.clock_gettime(clock)
    decisions, dropped = monitor.stats.snapshot()
    assert decisions.get(("sampled", None)) == n + 20 and not dropped, (decisions, dropped)
    monitor.shutdown(5_000)
    return (cpu1 - cpu0) / n * 1e3, (thread1 - thread0) / n * 1e3, (wall1 - wall0) / n * 1e3


def worker_cpu_table(n: int) -> None:
    print(f"Table 0: host CPU per scored record (burst of {n}, sampling 1), ms")
    print(f"{'judge':<10} {'executor':<9} {'host CPU':>9} {'worker thread':>14} {'wall':>7}")
    instant = InstantJudge()
    for label, judge in (("LocalJudge", gw.LocalJudge()), ("instant", instant)):
        for executor in ("process", "thread"):
            host, worker, wall = worker_cpu(judge, executor, n)
            print(f"{label:<10} {executor:<9} {host:>9.3f} {worker:>14.3f} {wall:>7.3f}")


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def providers() -> dict[str, Any]:
    # Real SDK providers with no exporter: the cost of building spans and points is included,
    # the cost of any particular exporter is not.
    return {
        "tracer_provider": TracerProvider(shutdown_on_exit=False),
        "meter_provider": MeterProvider(shutdown_on_exit=False),
        "logger_provider": LoggerProvider(shutdown_on_exit=False),
    }


def busy_monitor(rate: float, executor: str, backlog: int, queue_room: int = 1000) -> gw.Monitor:
    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(rate),
        max_queue_size=backlog + queue_room,
        executor=executor,
        shutdown_on_exit=False,
        **providers(),
    )
    start = time.monotonic()
    for _ in range(backlog):  # keep the judge busy for the whole measurement
        monitor.record(question=QUESTION, contexts=PASSAGES, answer=ANSWER, always_score=True)
    if executor == "process":
        # Wait until the worker process has started, so its start-up is not in the figures.
        runner = monitor._worker.destination.runner  # type: ignore[attr-defined]
        while not runner.pids() and time.monotonic() < start + 30:
            time.sleep(0.01)
        PROCESS_FACTS.append((time.monotonic() - start, rss_mb(runner.pids()[0])))
    time.sleep(0.3)
    return monitor


def judge_ms() -> float:
    judge = gw.LocalJudge()
    gw.evaluate(ANSWER, PASSAGES, QUESTION, judge)
    start = time.perf_counter()
    n = 20
    for _ in range(n):
        gw.evaluate(ANSWER, PASSAGES, QUESTION, judge)
    return (time.perf_counter() - start) / n * 1000


def counter_add_us() -> float:
    counter = MeterProvider(shutdown_on_exit=False).get_meter("bench").create_counter("c")
    attrs = {"groundwatch.decision": "sampled"}
    n = 50_000
    start = time.perf_counter()
    for _ in range(n):
        counter.add(1, attrs)
    return (time.perf_counter() - start) / n * 1e6


def record_cost(rate: float, executor: str, n: int, backlog: int) -> tuple[float, float, str]:
    # Room for every measured record: at rate 1 each one takes the full sampled path.
    monitor = busy_monitor(rate, executor, backlog, queue_room=n + 1000)
    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("bench")
    costs: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(n):
        with tracer.start_as_current_span("request"):
            start = clock()
            monitor.record(question=QUESTION, contexts=PASSAGES, answer=ANSWER)
            costs.append((clock() - start) / 1000)
    busy = monitor._worker.queue  # type: ignore[union-attr]
    decisions, _ = monitor.stats.snapshot()
    still_busy = "yes" if len(busy) > 0 else "NO"
    monitor.shutdown(timeout_millis=100)
    decisions[("sampled", None)] = decisions.get(("sampled", None), 0) - backlog
    mix = ", ".join(f"{d}={c}" for (d, _e), c in sorted(decisions.items()) if c)
    return statistics.median(costs), percentile(costs, 0.99), f"{mix}; judge busy: {still_busy}"


def host_work(units: int) -> int:
    total = 0
    for i in range(units):
        total += i * i % 7
    return total


def calibrate(target_ms: float) -> int:
    """Units of host_work taking ``target_ms`` (best of several runs: the machine is shared)."""
    units = 20_000
    best = min(_timed(units) for _ in range(7))
    return max(1, int(units * target_ms / best))


def _timed(units: int) -> float:
    start = time.perf_counter()
    host_work(units)
    return (time.perf_counter() - start) * 1000


def host_latency(
    mode: str, requests: int, units: int, backlog: int, period_ms: float
) -> list[float]:
    """Each request: the host thread waits ``period`` off the GIL (as a server thread waits on
    its socket), then does its work and calls record(). Latency runs from the moment the wait
    ends to the end of the request, so it includes getting the GIL back from a busy judge."""
    monitor = None if mode == "none" else busy_monitor(0.0, mode, backlog)
    latencies: list[float] = []
    period = period_ms / 1000
    for _ in range(requests):
        ready = time.perf_counter() + period
        time.sleep(period)
        host_work(units)
        if monitor is not None:
            monitor.record(question=QUESTION, contexts=PASSAGES, answer=ANSWER)
        latencies.append((time.perf_counter() - ready) * 1000)
    if monitor is not None:
        assert len(monitor._worker.queue) > 0, "the judge went idle; raise --backlog"  # type: ignore[union-attr]
        monitor.shutdown(timeout_millis=100)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument(
        "--worker-cpu",
        action="store_true",
        help="print only Table 0: the host CPU the worker takes per scored record",
    )
    parser.add_argument("--records", type=int, default=1000, help="burst size for --worker-cpu")
    args = parser.parse_args()
    if args.worker_cpu:
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f}"
        )
        worker_cpu_table(args.records)
        return
    n = 3_000 if args.quick else 20_000
    requests = 600 if args.quick else 3_000
    backlog = 2_000 if args.quick else 5_000

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, switch interval {sys.getswitchinterval() * 1000:.0f} ms"
    )
    print(f"LocalJudge on this input: {judge_ms():.1f} ms per evaluation")
    print(
        f"for comparison, one OpenTelemetry SDK Counter.add(): {counter_add_us():.1f} us "
        "(why groundwatch.records is an observable counter)\n"
    )

    print("Table 1: Monitor.record() on the caller's thread, judge busy on the worker")
    print(f"{'executor':<9} {'rate':>4} {'median us':>10} {'p99 us':>8}  decisions")
    for executor in ("thread", "process"):
        for rate in (0.0, 1.0):
            med, p99, mix = record_cost(rate, executor, n, backlog)
            print(f"{executor:<9} {rate:>4.1f} {med:>10.1f} {p99:>8.1f}  {mix}")

    starts = sorted(t for t, _ in PROCESS_FACTS)
    sizes = [m for _, m in PROCESS_FACTS if m is not None]
    print(
        f"worker process: ready {statistics.median(starts):.2f} s after the first record "
        f"(median of {len(starts)})"
        + (f", resident memory {statistics.median(sizes):.0f} MB" if sizes else "")
    )

    units = calibrate(1.0)
    period = 2.0
    print(
        f"\nTable 2: host request latency, judge busy (wait {period:.0f} ms off the GIL, then "
        "1 ms of Python work + record(); measured from the end of the wait)"
    )
    print(f"{'scoring':<16} {'median ms':>10} {'p90 ms':>8} {'p99 ms':>8}")
    modes = (("none", "no groundwatch"), ("thread", "thread"), ("process", "process"))
    # Interleaved rounds, so that drift in the machine's load hits every mode alike.
    latencies: dict[str, list[float]] = {mode: [] for mode, _ in modes}
    rounds = 3
    for _ in range(rounds):
        for mode, _label in modes:
            latencies[mode] += host_latency(mode, requests // rounds, units, backlog, period)
    for mode, label in modes:
        values = latencies[mode]
        print(
            f"{label:<16} {statistics.median(values):>10.2f} {percentile(values, 0.9):>8.2f} "
            f"{percentile(values, 0.99):>8.2f}"
        )


if __name__ == "__main__":
    main()
