"""Distributed scoring, measured: the app's cost with ``RedisQueue`` against in-process
scoring, throughput against the number of ``groundwatch worker`` processes, the delay from
``record()`` to the evaluation span, and memory under a burst past the backlog cap.

Everything is real: a ``redis-server`` on a free loopback port (persistence off), worker
processes running the ``groundwatch worker`` command (``tests/distributed/worker_main.py``
writes their spans to files), the OpenTelemetry SDK in the app with discarding exporters, and
for the I/O-bound judge ``OpenAIJudge`` against a local fake OpenAI endpoint that replies
after 200 ms (``testkit/fake_openai.py``).

Run: python benchmarks/distributed.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "src", ROOT / "integrations" / "langchain" / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

import groundwatch as gw  # noqa: E402
from benchmarks._discard import DiscardLogs, DiscardSpans  # noqa: E402
from benchmarks._redis import REDIS_SERVER, RedisServer, free_port  # noqa: E402
from benchmarks.overhead_langchain import build_chain  # noqa: E402
from groundwatch.telemetry import semconv as sc  # noqa: E402
from testkit.fake_openai import FakeOpenAIServer  # noqa: E402

HARNESS = ROOT / "tests" / "distributed" / "worker_main.py"
"""Runs ``groundwatch worker`` with the OpenTelemetry SDK's exporters writing spans to files."""
STREAM = "groundwatch:records"
ANSWER = "Refunds are accepted within 30 days of purchase with a receipt."
PASSAGES = [
    {
        "text": f"Policy on topic {i}: refunds are accepted within 30 days of purchase with a "
        "receipt; our staff answer questions within two business days.",
        "id": f"doc-{i}",
        "metadata": {"topic": f"topic-{i}"},
    }
    for i in range(4)
]


def providers() -> tuple[TracerProvider, MeterProvider, LoggerProvider, InMemoryMetricReader]:
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(BatchSpanProcessor(DiscardSpans()))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    lp = LoggerProvider(shutdown_on_exit=False)
    lp.add_log_record_processor(BatchLogRecordProcessor(DiscardLogs()))
    return tp, mp, lp, reader


def metric_total(reader: InMemoryMetricReader, name: str, **attrs: str) -> float:
    total = 0.0
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    for p in m.data.data_points:
                        if all(p.attributes.get(k) == v for k, v in attrs.items()):
                            total += getattr(p, "value", 0)
    return total


def rss_mb(pid: int | None = None) -> float:
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def monitor(queue: Any | None, **kwargs: Any) -> tuple[gw.Monitor, InMemoryMetricReader]:
    tp, mp, lp, reader = providers()
    m = gw.Monitor(
        gw.LocalJudge(),
        gw.RatioSampler(1.0),
        tracer_provider=tp,
        meter_provider=mp,
        logger_provider=lp,
        shutdown_on_exit=False,
        queue=queue,
        **kwargs,
    )
    return m, reader


# --- 1. the app's CPU per sampled record ---------------------------------------------------------


def app_cpu(url: str, records: int, executor: str) -> dict[str, float]:
    """Process CPU (all the app's threads; not the judge's child process, not redis-server)
    per sampled record, recording in bursts the background keeps up with."""
    out: dict[str, float] = {}
    for name in ("in-process", "queue"):
        redis_client(url).delete(STREAM)
        queue = gw.RedisQueue(url, max_backlog=10**7) if name == "queue" else None
        m, reader = monitor(queue, executor=executor)
        # Warm up: the worker thread, the judge's process, the Redis connection.
        for _ in range(50):
            m.record(question="q", contexts=PASSAGES, answer=ANSWER)
        m.force_flush(60_000)
        cpu0 = time.process_time()
        for i in range(records):
            m.record(question=f"question {i}", contexts=PASSAGES, answer=ANSWER)
            if i % 50 == 49:
                m.force_flush(60_000)
        m.force_flush(60_000)
        cpu = time.process_time() - cpu0
        dropped = metric_total(reader, sc.METRIC_DROPPED)
        full = metric_total(reader, sc.METRIC_RECORDS, **{sc.GROUNDWATCH_DECISION: "queue_full"})
        m.shutdown(10_000)
        assert dropped == 0 and full == 0, (dropped, full)
        out[name] = cpu / records * 1000
    return out


# --- 2. the request path at sampling 1 -----------------------------------------------------------


def request_path(url: str, calls: int, rounds: int) -> tuple[dict[str, float], float]:
    """Median per-call time of the LangChain chain with the callback at sampling 1, scoring in
    process (executor=process) or sending to the Redis queue, over the chain alone, in paired
    interleaved blocks. Returns ({variant: ratio}, chain-alone ms)."""
    from groundwatch_langchain import GroundwatchCallbackHandler

    chain = build_chain()
    variants = {
        "in-process": monitor(None, executor="process")[0],
        "queue": monitor(gw.RedisQueue(url, max_backlog=10**7))[0],
    }
    handlers = {name: GroundwatchCallbackHandler(m) for name, m in variants.items()}
    question = "How long do I have to return an item?"
    for handler in handlers.values():
        for _ in range(50):
            chain.invoke(question, {"callbacks": [handler]})
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    bases: list[float] = []
    for _ in range(rounds):
        for name, handler in handlers.items():
            times: dict[str, list[float]] = {"none": [], name: []}
            for block in ("none", name, name, "none"):
                config: Any = {"callbacks": [handler]} if block == name else {}
                for _ in range(calls):
                    t0 = time.perf_counter()
                    chain.invoke(question, config)
                    times[block].append(time.perf_counter() - t0)
            variants[name].force_flush(60_000)
            ratios[name].append(statistics.median(times[name]) / statistics.median(times["none"]))
            bases.append(statistics.median(times["none"]) * 1000)
    for m in variants.values():
        m.shutdown(10_000)
    return {name: statistics.median(r) for name, r in ratios.items()}, statistics.median(bases)


# --- 3. throughput and delay against workers -----------------------------------------------------


class Worker:
    def __init__(self, out: Path, url: str, args: Sequence[str]) -> None:
        self.out = out
        self.port = free_port()
        self.log = open(out.with_suffix(".log"), "wb")  # noqa: SIM115
        argv = ["--redis", url, "--group", "bench", "--health-port", str(self.port), *args]
        self.proc = subprocess.Popen(
            [sys.executable, str(HARNESS), str(out), "worker", *argv],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def spans(self) -> list[dict[str, Any]]:
        path = self.out.with_suffix(".spans.jsonl")
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()


def throughput(
    url: str,
    workdir: Path,
    n_workers: int,
    records: int,
    judge_args: Sequence[str],
    pace_s: float = 0.0,
) -> dict[str, float]:
    """``records`` recorded into ``n_workers`` ready workers, at once (a burst) or one every
    ``pace_s``: records per second from the first ``record()`` to the last span, and each
    record's delay."""
    redis_client(url).flushall()
    run = len(list(workdir.glob("*.log")))
    pool = [Worker(workdir / f"run{run}-w{i}", url, judge_args) for i in range(n_workers)]
    deadline = time.monotonic() + 120
    while not all(w.ready() for w in pool):
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not become ready")
        time.sleep(0.1)
    m, _ = monitor(gw.RedisQueue(url, max_backlog=10**7), max_queue_size=records + 1000)

    def send(n: int, phase: str) -> None:
        for i in range(n):
            if pace_s:
                time.sleep(pace_s)
            m.record(
                question=f"question {i}",
                contexts=PASSAGES,
                answer=ANSWER,
                attributes={"bench.recorded_ns": time.time_ns(), "bench.phase": phase},
            )
        m.force_flush(60_000)

    def wait_spans(n: int) -> None:
        deadline = time.monotonic() + 600
        while sum(len(w.spans()) for w in pool) < n:
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not finish")
            time.sleep(0.05)

    # Warm-up: every worker's first judge call builds its client (imports, connections).
    warm = 4 * n_workers
    send(warm, "warm-up")
    wait_spans(warm)
    cpu0 = sum(cpu_seconds(w.proc.pid) for w in pool)
    start = time.time_ns()
    send(records, "measured")
    wait_spans(warm + records)
    cpu_s = sum(cpu_seconds(w.proc.pid) for w in pool) - cpu0
    spans = [s for w in pool for s in w.spans() if s["attributes"]["bench.phase"] == "measured"]
    rss = [rss_mb(w.proc.pid) for w in pool]
    for w in pool:
        w.stop()
    m.shutdown(10_000)
    end = max(s["end_ns"] for s in spans)
    delays = sorted((s["end_ns"] - s["attributes"]["bench.recorded_ns"]) / 1e6 for s in spans)
    assert len({s["attributes"][sc.GROUNDWATCH_RECORD_ID] for s in spans}) == records
    return {
        "per_s": records / ((end - start) / 1e9),
        "p50_ms": delays[len(delays) // 2],
        "p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))],
        "worker_rss_mb": max(rss),
        "worker_cpu_ms": cpu_s / records * 1000,
    }


def scaling(url: str, workdir: Path, judge: str, args: Sequence[str], records: int) -> None:
    base_rate = 0.0
    for workers in (1, 2, 4):
        r = throughput(url, workdir, workers, records, args)
        base_rate = base_rate or r["per_s"]
        print(
            f"{judge}: {workers} worker(s), {records} records at once: {r['per_s']:.1f} "
            f"records/s ({r['per_s'] / base_rate:.2f}x), record()->span p50 {r['p50_ms']:.0f} "
            f"ms p99 {r['p99_ms']:.0f} ms, worker CPU {r['worker_cpu_ms']:.1f} ms/record, "
            f"worker RSS {r['worker_rss_mb']:.0f} MB",
            flush=True,
        )


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- 4. memory under a burst past the cap --------------------------------------------------------


def burst(url: str, records: int, cap: int) -> dict[str, float]:
    redis_client(url).flushall()
    m, reader = monitor(gw.RedisQueue(url, max_backlog=cap))
    for _ in range(1000):
        m.record(question="warm", contexts=PASSAGES, answer=ANSWER)
    m.force_flush(60_000)
    redis_client(url).delete(STREAM)
    before = rss_mb()
    peak = before
    t0 = time.perf_counter()
    for i in range(records):
        m.record(question=f"question {i}", contexts=PASSAGES, answer=ANSWER)
        if i % 5000 == 0:
            peak = max(peak, rss_mb())
    elapsed = time.perf_counter() - t0
    m.force_flush(60_000)
    after = rss_mb()
    backlog = redis_client(url).xlen(STREAM)
    decided = {
        d: metric_total(reader, sc.METRIC_RECORDS, **{sc.GROUNDWATCH_DECISION: d})
        for d in ("sampled", "queue_full")
    }
    m.shutdown(10_000)
    return {
        "rss_before_mb": before,
        "rss_peak_mb": max(peak, after),
        "rss_after_mb": after,
        "backlog": backlog,
        "sampled": decided["sampled"] - 1000,
        "queue_full": decided["queue_full"],
        "record_us": elapsed / records * 1e6,
    }


def worker_memory(url: str, workdir: Path, backlog: int) -> list[float]:
    """One LocalJudge worker draining a backlog of ``backlog`` entries: its RSS (MB) at the
    start, every quarter of the way, and at the end."""
    from groundwatch.queue import stream_json
    from groundwatch.runtime.pipeline import prepare_record

    client = redis_client(url)
    client.flushall()
    now = time.time_ns()
    for start in range(0, backlog, 1000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(backlog, start + 1000)):
            record = gw.RagRecord(f"question {i}", PASSAGES, ANSWER, record_id=f"{i:016x}")
            prepare_record(record)
            pipe.xadd(STREAM, {stream_json.FIELD: stream_json.encode(record, 1.0, now)})
        pipe.execute()
    w = Worker(workdir / f"mem{backlog}", url, ["--judge", "local", "--executor", "thread"])
    samples: list[float] = []
    marks = [backlog - backlog * k // 4 for k in range(5)]  # entries left at each sample
    deadline = time.monotonic() + 900
    while marks:
        left = client.xlen(STREAM)
        if w.ready() and left <= marks[0]:
            samples.append(rss_mb(w.proc.pid))
            marks.pop(0)
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not drain the backlog")
        time.sleep(0.05)
    w.stop()
    return samples


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer records, fewer rounds")
    parser.add_argument("--only", choices=("cpu", "request", "llm", "local", "burst"))
    args = parser.parse_args(argv)
    if REDIS_SERVER is None:
        print("needs redis-server (Debian package redis-server)", file=sys.stderr)
        return 2
    q = args.quick
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = RedisServer(REDIS_SERVER, workdir)
        server.start()
        try:
            print(f"machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}")
            if args.only in (None, "cpu"):
                n = 1000 if q else 3000
                for executor in ("process", "thread"):
                    cpu = app_cpu(server.url, n, executor)
                    print(
                        f"app CPU per sampled record ({n} records, executor={executor}): "
                        f"in-process {cpu['in-process']:.3f} ms, queue {cpu['queue']:.3f} ms "
                        f"({cpu['queue'] / cpu['in-process']:.2f}x)"
                    )
            if args.only in (None, "request"):
                ratios, base = request_path(server.url, 100 if q else 200, 3 if q else 7)
                print(
                    "request path at sampling 1, LangChain chain + callback, median call over "
                    f"the chain alone ({base:.2f} ms): in-process scoring "
                    f"{ratios['in-process']:.3f}x, RedisQueue {ratios['queue']:.3f}x"
                )
            local_args = ["--judge", "local", "--executor", "thread"]
            if args.only in (None, "llm"):
                with FakeOpenAIServer(latency=0.2) as llm:
                    llm_args = [
                        "--judge", "openai", "--model", "fake", "--base-url", llm.url,
                        "--concurrency", "1",
                    ]  # fmt: skip
                    scaling(server.url, workdir, "OpenAIJudge, 200 ms replies", llm_args,
                            60 if q else 200)  # fmt: skip
            if args.only in (None, "local"):
                scaling(server.url, workdir, "LocalJudge", local_args, 1000 if q else 4000)
                r = throughput(server.url, workdir, 1, 300 if q else 1000, local_args, 0.01)
                print(
                    f"LocalJudge, 1 worker, steady 100 records/s: record()->span p50 "
                    f"{r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms"
                )
            if args.only in (None, "burst"):
                n = 20_000 if q else 100_000
                b = burst(server.url, n, cap=2000)
                print(
                    f"burst of {n} records, backlog cap 2000: app RSS {b['rss_before_mb']:.0f} "
                    f"-> peak {b['rss_peak_mb']:.0f} -> {b['rss_after_mb']:.0f} MB; stream "
                    f"{b['backlog']:.0f} entries; sampled {b['sampled']:.0f}, queue_full "
                    f"{b['queue_full']:.0f}; record() {b['record_us']:.1f} us each"
                )
            if args.only in (None, "burst"):
                n = 5000 if q else 20_000
                rss = worker_memory(server.url, workdir, n)
                print(
                    f"worker draining a backlog of {n}: RSS "
                    + " -> ".join(f"{x:.0f}" for x in rss)
                    + " MB (start, each quarter, end)"
                )
            redis_rss = rss_mb(server.proc.pid) if server.proc else float("nan")
            print(f"redis-server RSS at the end: {redis_rss:.0f} MB")
        finally:
            server.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process's peak RSS: {peak:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
