"""What ``Monitor.feedback()`` costs the caller's thread, and that its memory stays flat.

Run (about half a minute)::

    python benchmarks/feedback.py            # --calls 20000 for a quick run

The monitor first scores ``--memory`` answers (10,000 by default: its verdict memory is full),
each under a span context of its own, with a judge that does nothing. Then ``--calls`` feedback
calls (100,000 by default), half on traces it remembers, half on traces it never scored
(counted ``unknown``), each timed alone with ``perf_counter_ns``; the log records go to the
SDK's batch processor in front of an exporter that drops them (``_discard.py``), as in
production minus the network (in so tight a loop its 2048-record queue overflows: the SDK's
"Queue full, dropping Log." line, not groundwatch's). Beside them, in alternating rounds,
``record()`` of an answer the sampler leaves out: the cheapest call groundwatch has on the
request path, as a yardstick.

Memory: the process's resident set and Python's traced allocations (``tracemalloc``, in a
second pass: tracing slows every call) after each tenth of the calls; flat means the last
tenth ends where the first did, give or take the allocator's noise.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(1, str(Path(__file__).resolve().parent))

from _discard import InstantJudge, discarding_providers
from _stats import percentile
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import SpanContext, TraceFlags

import groundwatch as gw


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--memory", type=int, default=10_000)
    args = parser.parse_args()

    reader = InMemoryMetricReader()
    monitor = gw.Monitor(
        judge=InstantJudge(),
        sampler=gw.RatioSampler(0.0),
        meter_provider=MeterProvider(metric_readers=[reader]),
        executor="thread",
        feedback_memory=args.memory,
        max_queue_size=args.memory,
        shutdown_on_exit=False,
        **discarding_providers(),
    )
    flags = TraceFlags(TraceFlags.SAMPLED)
    for i in range(args.memory):
        ctx = SpanContext(i + 1, 1, is_remote=True, trace_flags=flags)
        monitor.record(
            question="q", contexts=["c"], answer="a", span_context=ctx, always_score=True
        )
    assert monitor.force_flush(120_000)
    remembered = len(monitor._feedback.memory)
    print(f"verdict memory: {remembered:,} traces remembered (capacity {args.memory:,})")

    # Half on remembered traces, half on traces never scored; labels alternate.
    traces = [(i % args.memory) + 1 if i % 2 == 0 else 10**9 + i for i in range(args.calls)]
    labels = ("hallucinated", "hallucinated", "grounded", "grounded")
    feedback = monitor.feedback
    record = monitor.record
    tenth = max(1, args.calls // 10)

    # Preallocated: the timings' own storage must not read as growth.
    fb_ns = array("q", bytes(8 * args.calls))
    rec_ns = array("q", bytes(8 * args.calls))
    gc.collect()
    rss = [rss_mib()]
    clock = time.perf_counter_ns
    for start in range(0, args.calls, tenth):
        for i in range(start, min(args.calls, start + tenth)):
            t0 = clock()
            feedback(label=labels[i & 3], trace_id=traces[i])
            t1 = clock()
            record(question="q", contexts=["c"], answer="a")
            t2 = clock()
            fb_ns[i] = t1 - t0
            rec_ns[i] = t2 - t1
        rss.append(rss_mib())
    assert monitor.force_flush(60_000)

    # Second pass under tracemalloc: Python's own allocations after each tenth.
    gc.collect()
    tracemalloc.start()
    traced = [tracemalloc.get_traced_memory()[0] / 2**20]
    for start in range(0, args.calls, tenth):
        for i in range(start, min(args.calls, start + tenth)):
            feedback(label=labels[i & 3], trace_id=traces[i])
        traced.append(tracemalloc.get_traced_memory()[0] / 2**20)
    tracemalloc.stop()
    assert monitor.force_flush(60_000)

    def us(values: array[int], q: float) -> float:
        return percentile([v / 1000 for v in values], q)

    fb_med, rec_med = statistics.median(fb_ns) / 1000, statistics.median(rec_ns) / 1000
    print(f"\n{args.calls:,} feedback() calls, each timed alone on the caller's thread (us):")
    print(f"{'call':<32}{'median':>8}{'p90':>8}{'p99':>8}")
    print(f"{'feedback()':<32}{fb_med:>8.2f}{us(fb_ns, 0.9):>8.2f}{us(fb_ns, 0.99):>8.2f}")
    print(
        f"{'record(), not sampled':<32}{rec_med:>8.2f}{us(rec_ns, 0.9):>8.2f}"
        f"{us(rec_ns, 0.99):>8.2f}"
    )
    print(f"ratio feedback / record (medians, side by side): {fb_med / rec_med:.2f}x")
    print(f"target: median <= 10 us -> {'met' if fb_med <= 10 else 'NOT met'}")

    print("\nmemory after each tenth of the calls (MiB):")
    print("  RSS:    " + " ".join(f"{x:.1f}" for x in rss))
    print("  traced: " + " ".join(f"{x:.2f}" for x in traced))
    print(
        f"  RSS grew {rss[-1] - rss[1]:+.1f} MiB from the first tenth to the last; traced "
        f"{traced[-1] - traced[1]:+.2f} MiB"
    )
    print(f"  verdict memory: {len(monitor._feedback.memory):,} traces (capacity {args.memory:,})")
    data = reader.get_metrics_data()
    points: dict[str, float] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name != "groundwatch.feedback":
                    continue
                for p in m.data.data_points:
                    attrs = dict(p.attributes or {})
                    judge = attrs.get("groundwatch.label")
                    key = f"{judge}/{attrs.get('groundwatch.feedback.label')}"
                    if getattr(p, "value", 0):
                        points[key] = getattr(p, "value", 0)
    print(f"groundwatch.feedback by judge/person: {dict(sorted(points.items()))}")
    monitor.shutdown(10_000)


if __name__ == "__main__":
    main()
