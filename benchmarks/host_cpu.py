"""Where the host's CPU goes per scored record, step by step, with either executor.

Records go straight to a ``Monitor`` (no framework), the real OpenTelemetry SDK behind it with
batch processors and discarding exporters, LocalJudge as the judge. The recording loop pauses
often enough that the judge keeps up (nothing is dropped, which the script checks). Printed per
scored record: the CPU time of each host thread (``/proc/self/task/<tid>/stat``) and how often
it blocked (its voluntary context switches: each wake-up takes the GIL again, a hand-off with
the request threads), and the thread CPU time spent inside the worker's steps
(``prepare_record``, ``Results.finish`` with the span attributes, events and metrics inside it,
the process runner's pipe thread).

Run: python benchmarks/host_cpu.py [--records 2000] [--executor process|thread] [--no-steps]
                                   [--burst 20] [--pause-ms 10] [--no-telemetry]
                                   [--export-from-worker]

``--instructions`` counts instead, under callgrind, the instructions of every host thread for
``--records`` and for three times as many records (``--no-steps --no-probe``), and prints the
difference per scored record: start-up and imports cancel out, and the figure does not move
with the machine's load (the worker process is not counted, as its CPU is not the host's).
Under callgrind the host runs about 50 times slower than the judge beside it, so batches form
differently than at full speed: the figure is for comparing versions, not a time.

``--no-telemetry`` replaces ``Telemetry.emit`` with a function that does nothing: the difference
to a run without it is what the span, the two events and the metric points cost the host (nearly
all of it the OpenTelemetry SDK's own work).

``--export-from-worker`` has the worker process export the spans and events itself
(``Monitor(export_from_worker=...)``, through the same discarding SDK set-up built out there);
the host keeps the metric points.

Records come in bursts of ``--burst`` with ``--pause-ms`` between them (``--burst 1 --pause-ms
50``: a quiet service, where every batch holds one record and per-batch costs count in full).

The step timers read a thread's CPU clock twice per step and record (a system call each), which
the host process's total then includes; ``--no-steps`` leaves them out and prints the totals only.

A probe thread stands for a request thread meanwhile: it sleeps 1 ms, over and over, and notes
how late each wake-up is. A wake-up waits for the GIL too, so the lateness shows how long the
worker's Python work holds it (``--no-pacing`` turns off the worker's rests between slices of
its work, for comparison; the machine's own load adds the same noise to both).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from _discard import (  # noqa: E402
    discarding_providers,
    discarding_worker_providers,
    without_pacing,
)
from _stats import percentile  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402

import groundwatch as gw  # noqa: E402
from groundwatch.runtime import pipeline, results  # noqa: E402
from groundwatch.runtime.runners import process_runner  # noqa: E402
from groundwatch.telemetry import _emitter  # noqa: E402

PASSAGES = [
    {
        "text": f"Policy on topic {i}: customers may ask in store or online; our staff answer "
        "questions within two business days.",
        "id": f"doc-{i}",
        "metadata": {"topic": f"topic-{i}"},
    }
    for i in range(4)
]
ANSWER = "Customers may ask in store or online. Our staff answer within two business days."


STEPS: dict[str, float] = defaultdict(float)


def timed(owner: Any, name: str, step: str) -> None:
    """Replace ``owner.name`` with a wrapper adding its thread CPU time to ``STEPS[step]``."""
    real: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            STEPS[step] += time.thread_time() - start

    setattr(owner, name, wrapper)


def thread_cpu() -> dict[str, tuple[float, int]]:
    """Per live thread: CPU seconds, and how often it blocked (voluntary context switches: a
    sleep, a system call that waits, a wait for the GIL). Each time a groundwatch thread blocks
    and wakes it takes the GIL again, a hand-off with the request threads."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[float, int]] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{thread.native_id}/status") as f:
                status = f.read()
        except OSError:
            continue
        switches = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
        out[thread.name] = ((int(fields[11]) + int(fields[12])) / ticks, switches)
    return out


def count_instructions(args: argparse.Namespace) -> int:
    import _instructions

    common = ["--no-steps", "--no-probe", "--executor", args.executor]
    common += ["--burst", str(args.burst), "--pause-ms", str(args.pause_ms)]
    if args.export_from_worker:
        common.append("--export-from-worker")
    few = _instructions.run_whole(__file__, [*common, "--records", str(args.records)])
    many = _instructions.run_whole(__file__, [*common, "--records", str(3 * args.records)])
    print(
        f"executor={args.executor}, bursts of {args.burst}, {args.pause_ms:g} ms apart: "
        f"{(many - few) / (2 * args.records):,.0f} instructions of the host process per "
        f"scored record ({args.records} and {3 * args.records} records under callgrind)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--executor", choices=("process", "thread"), default="process")
    parser.add_argument("--no-steps", action="store_true", help="no step timers, totals only")
    parser.add_argument("--no-probe", action="store_true", help="no probe thread")
    parser.add_argument("--burst", type=int, default=20, help="records sent back to back")
    parser.add_argument("--pause-ms", type=float, default=10.0, help="pause after each burst")
    parser.add_argument(
        "--no-pacing",
        action="store_true",
        help="the worker does not rest between slices of its work (runner.Pacer)",
    )
    parser.add_argument(
        "--no-telemetry",
        action="store_true",
        help="emit no span, events or metrics: what is left of the host's share without the "
        "OpenTelemetry SDK's work",
    )
    parser.add_argument(
        "--export-from-worker",
        action="store_true",
        help="the worker process exports the spans and events (process executor)",
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind"
    )
    args = parser.parse_args(argv)
    if args.instructions:
        return count_instructions(args)
    if args.no_telemetry:

        def emit_nothing(self: _emitter.Telemetry, *args: Any, **kwargs: Any) -> None:
            pass

        _emitter.Telemetry.emit = emit_nothing  # type: ignore[method-assign]

    if not args.no_steps:
        timed(pipeline, "prepare_record", "prepare_record")
        timed(results.Results, "finish", "Results.finish")
        timed(_emitter.Telemetry, "_span_attributes", "  span attributes")
        timed(_emitter.Telemetry, "_emit_events", "  two log events")
        timed(_emitter.Telemetry, "_record_metrics", "  metric points")
        timed(process_runner.ProcessRunner, "_batch_blocking", "pipe thread (send, receive)")

    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        executor=args.executor,
        meter_provider=MeterProvider(),
        **discarding_providers(),
        max_queue_size=args.records + 1,
        shutdown_on_exit=False,
        export_from_worker=discarding_worker_providers if args.export_from_worker else False,
    )
    if args.no_pacing:
        without_pacing(monitor)
    monitor.record(question="q", contexts=PASSAGES, answer=ANSWER)  # start the worker (process)
    assert monitor.force_flush(60_000)
    STEPS.clear()
    lateness: list[float] = []
    probe_cpu: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        cpu = time.thread_time()
        while not stop.is_set():
            start = time.perf_counter()
            time.sleep(0.001)
            lateness.append(time.perf_counter() - start - 0.001)
        probe_cpu.append(time.thread_time() - cpu)

    probe_thread = threading.Thread(target=probe, name="probe")
    before = thread_cpu()
    process_start = time.process_time()
    if not args.no_probe:
        probe_thread.start()
    for i in range(args.records):
        monitor.record(question="How long do answers take?", contexts=PASSAGES, answer=ANSWER)
        if i % args.burst == args.burst - 1:
            time.sleep(args.pause_ms / 1000)  # let the judge keep up: a steady stream
    assert monitor.force_flush(120_000)
    stop.set()
    if not args.no_probe:
        probe_thread.join()
    else:
        probe_cpu.append(0.0)
    after = thread_cpu()
    process_cpu = time.process_time() - process_start - probe_cpu[0]
    decisions, dropped = monitor.stats.snapshot()
    monitor.shutdown()
    n = args.records
    assert decisions.get(("sampled", None)) == n + 1 and not dropped, (decisions, dropped)

    steps = "no step timers" if args.no_steps else "with step timers"
    telemetry = ", no telemetry" if args.no_telemetry else ""
    if args.export_from_worker:
        telemetry += ", spans and events exported by the worker process"
    print(
        f"{n} records, executor={args.executor}, {steps}{telemetry}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"host process CPU (every thread but the probe, short-lived ones too): "
        f"{process_cpu / n * 1e3:.3f} ms"
    )
    if lateness:
        p50, p99 = percentile(lateness, 0.5), percentile(lateness, 0.99)
        pacing = "off" if args.no_pacing else "on"
        print(
            f"probe thread's 1 ms sleeps, late by (pacing {pacing}, {len(lateness)} "
            f"wake-ups): median {p50 * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms, "
            f"max {max(lateness) * 1e3:.3f} ms"
        )
    print(
        "\n| host thread | CPU per scored record | times it blocked, per scored record |"
        "\n|---|---|---|"
    )
    for name in sorted(after):
        cpu, switches = after[name]
        cpu0, switches0 = before.get(name, (0.0, 0))
        print(f"| {name} | {(cpu - cpu0) / n * 1e3:.3f} ms | {(switches - switches0) / n:.2f} |")
    if STEPS:
        print("\n| step (thread CPU inside it) | per scored record |\n|---|---|")
    for step, seconds in STEPS.items():
        print(f"| {step} | {seconds / n * 1e3:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
