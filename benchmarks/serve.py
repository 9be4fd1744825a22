"""``groundwatch serve``, measured: spans per second decoded and assembled on one core, and
through the real receiver over OTLP/HTTP and OTLP/gRPC side by side; memory under a sustained
load past the pending-traces cap; and the delay from a trace's root span ending to its
evaluation span.

The spans are real: one run of the LCEL chain of ``testkit/chains.py`` under
OpenInference's LangChain instrumentor (9 spans: chain, retriever, prompt, LLM, parser, ...),
encoded by the SDK's OTLP encoder and copied under fresh trace ids into requests of 512 spans,
the batch size of a Collector's batch processor.

Run: python benchmarks/serve.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import groundwatch as gw  # noqa: E402
from groundwatch.serve import Receiver, TraceAssembler, TraceService  # noqa: E402
from groundwatch.serve._intake import IntakeSampler  # noqa: E402
from groundwatch.serve._otlp import PROTOBUF, parse_request, spans_of  # noqa: E402

BATCH = 512


def chain_trace() -> ExportTraceServiceRequest:
    """One trace of the LCEL chain under OpenInference, as an OTLP request."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from testkit.chains import build

    warnings.filterwarnings("ignore")
    exported = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(exported))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    try:
        build("lcel").chain.invoke("What is the refund policy?")
    finally:
        LangChainInstrumentor().uninstrument()
    return encode_spans(exported.get_finished_spans())


def bodies(template: ExportTraceServiceRequest, n_batches: int) -> list[bytes]:
    """Requests of BATCH spans: the template's trace repeated under fresh trace ids."""
    spans = list(template.resource_spans[0].scope_spans[0].spans)
    per_trace = len(spans)
    out = []
    for _ in range(n_batches):
        request = ExportTraceServiceRequest()
        request.resource_spans.add().CopyFrom(template.resource_spans[0])
        scope = request.resource_spans[0].scope_spans[0]
        del scope.spans[:]
        for _ in range(BATCH // per_trace + 1):
            trace_id = os.urandom(16)
            for span in spans:
                copy = scope.spans.add()
                copy.CopyFrom(span)
                copy.trace_id = trace_id
                if len(scope.spans) == BATCH:
                    break
            if len(scope.spans) == BATCH:
                break
        out.append(request.SerializeToString())
    return out


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def throughput(payloads: list[bytes]) -> dict[str, float]:
    """Spans per second of decoding alone, and of decoding, copying out and assembling."""
    decode_s = best_of(lambda: [parse_request(b, PROTOBUF) for b in payloads])
    assembler = TraceAssembler(quiet_s=3600, orphan_s=3600, max_traces=10**9, max_spans=512)

    def full() -> None:
        for body in payloads:
            assembler.add(spans_of(parse_request(body, PROTOBUF)).spans)

    full_s = best_of(full)
    intake = IntakeSampler(gw.RatioSampler(0.1), route_attribute=None)
    sampled = TraceAssembler(
        quiet_s=3600, orphan_s=3600, max_traces=10**9, max_spans=512, admit=intake.sampled
    )

    def at_intake() -> None:
        for body in payloads:
            sampled.add(spans_of(parse_request(body, PROTOBUF)).spans)

    sampled_s = best_of(at_intake)
    n = len(payloads) * BATCH
    return {
        "decode": n / decode_s,
        "decode+assemble": n / full_s,
        "decode+assemble, sample rate 0.1 at intake": n / sampled_s,
    }


def best_of(fn: Any, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def memory(
    payloads: list[bytes], cap: int, rounds: int, rate: float = 1.0
) -> list[tuple[int, int, float]]:
    """(traces received, traces pending, RSS MB) after each round of a load past ``cap``,
    sampled at intake at ``rate``."""
    intake = IntakeSampler(gw.RatioSampler(rate), route_attribute=None)
    assembler = TraceAssembler(
        quiet_s=3600, orphan_s=3600, max_traces=cap, max_spans=512, admit=intake.sampled
    )
    received = 0
    rows = []
    per_request = BATCH // 9 + 1
    for _ in range(rounds):
        for body in payloads:
            # Fresh trace ids each round: the load never repeats a trace.
            request = parse_request(body, PROTOBUF)
            fresh: dict[bytes, bytes] = {}
            for span in request.resource_spans[0].scope_spans[0].spans:
                span.trace_id = fresh.setdefault(span.trace_id, os.urandom(16))
            assembler.add(spans_of(request).spans)
            received += per_request
        gc.collect()
        rows.append((received, len(assembler), rss_mb()))
    return rows


@contextlib.contextmanager
def running_receiver(
    assembler: TraceAssembler, poll_s: float, stop_ms: int, *, grpc: bool = False, **monitor: Any
) -> Iterator[Receiver]:
    """The real receiver on loopback ports, its loop on a thread, scoring every trace it
    completes with LocalJudge on the monitor's thread (``monitor``: more ``gw.Monitor``
    arguments); stopped within ``stop_ms`` on the way out."""
    service = TraceService(
        gw.Monitor(
            sampler=gw.RatioSampler(1.0),
            meter_provider=MeterProvider(),
            executor="thread",
            shutdown_on_exit=False,
            **monitor,
        ),
        assembler,
        max_body_bytes=8 << 20,
        max_queue_size=1024,
        meter_provider=MeterProvider(),
    )
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    receiver = Receiver(service, "127.0.0.1", 0, poll_s=poll_s, grpc_port=0 if grpc else None)
    asyncio.run_coroutine_threadsafe(receiver.start(), loop).result(10)
    try:
        yield receiver
    finally:
        asyncio.run_coroutine_threadsafe(receiver.stop(stop_ms), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)


def post(receiver: Receiver, body: bytes) -> None:
    """One OTLP/HTTP protobuf export, answered before it returns."""
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    request = urllib.request.Request(url, body, {"Content-Type": PROTOBUF}, method="POST")
    urllib.request.urlopen(request, timeout=30).read()


def transports(payloads: list[bytes]) -> dict[str, float]:
    """Spans per second through the real receiver, OTLP/HTTP and OTLP/gRPC side by side: the
    same requests sent one after another by a client in this process (on the same core), each
    answered before the next (every trace taken in and assembled, none completed in the
    run)."""
    import grpc

    from groundwatch.serve._grpc import TRACE_SERVICE

    # Every trace stays pending (the quiet period outlasts the run); at the stop the monitor
    # scores what its queue holds and counts the rest.
    assembler = TraceAssembler(quiet_s=3600, orphan_s=3600, max_traces=10**9, max_spans=512)
    with running_receiver(assembler, poll_s=60, stop_ms=1_000, grpc=True) as receiver:

        def over_http() -> None:
            for body in payloads:
                post(receiver, body)

        channel = grpc.insecure_channel(
            f"127.0.0.1:{receiver.grpc_port}",
            options=[("grpc.max_send_message_length", 8 << 20)],
        )
        export = channel.unary_unary(f"/{TRACE_SERVICE}/Export")

        def over_grpc() -> None:
            for body in payloads:
                export(body, timeout=30)

        n = len(payloads) * BATCH
        rates = {"OTLP/HTTP": n / best_of(over_http), "OTLP/gRPC": n / best_of(over_grpc)}
        channel.close()
    return rates


def delay(template: ExportTraceServiceRequest, traces: int, quiet_ms: int) -> list[float]:
    """Seconds from each trace's root span end to its evaluation span's end, through the
    real receiver (HTTP, assembly, the quiet period, LocalJudge, the emitter)."""
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    assembler = TraceAssembler(quiet_s=quiet_ms / 1000, orphan_s=60, max_traces=1000, max_spans=512)
    poll_s = min(0.5, quiet_ms / 4000)
    root_end: dict[int, int] = {}
    spans = list(template.resource_spans[0].scope_spans[0].spans)
    duration = {s.span_id: s.end_time_unix_nano - s.start_time_unix_nano for s in spans}
    with running_receiver(assembler, poll_s, 10_000, tracer_provider=provider) as receiver:
        for _ in range(traces):
            request = ExportTraceServiceRequest()
            request.CopyFrom(template)
            trace_id = os.urandom(16)
            now = time.time_ns()
            for span in request.resource_spans[0].scope_spans[0].spans:
                span.trace_id = trace_id
                # The trace ends now: an exporter sends a span right after it ends.
                span.end_time_unix_nano = now
                span.start_time_unix_nano = now - duration[span.span_id]
                if not span.parent_span_id:
                    root_end[int.from_bytes(trace_id, "big")] = now
            post(receiver, request.SerializeToString())
            time.sleep(0.05)
        deadline = time.monotonic() + quiet_ms / 1000 + 30
        while len(exported.get_finished_spans()) < traces and time.monotonic() < deadline:
            time.sleep(0.05)
    return [
        (s.end_time - root_end[s.context.trace_id]) / 1e9 for s in exported.get_finished_spans()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    template = chain_trace()
    per_trace = len(template.resource_spans[0].scope_spans[0].spans)
    payloads = bodies(template, 20 if args.quick else 100)
    rate = throughput(payloads)
    print(f"## Throughput on one core ({len(payloads)} requests of {BATCH} spans, "
          f"{per_trace} spans per trace, best of 3)\n")  # fmt: skip
    print("| step | spans/s |\n|---|---:|")
    for step, value in rate.items():
        print(f"| {step} | {value:,.0f} |")
    cap = 5_000 if args.quick else 50_000
    rounds = 4 if args.quick else 8
    load = bodies(template, cap // (BATCH // per_trace) // 2 + 1)
    # The sampled run first: RSS does not shrink back, the lower figure must come first.
    for rate in (0.1, 1.0):
        rows = memory(load, cap, rounds, rate)
        print(f"\n## Memory under sustained load, pending traces capped at {cap:,}, "
              f"sample rate {rate} (decided at intake)\n")  # fmt: skip
        print("| traces received | pending | RSS MB |\n|---:|---:|---:|")
        for received, pending, mb in rows:
            print(f"| {received:,} | {pending:,} | {mb:.0f} |")
    quiet_ms = 200 if args.quick else 1000
    delays = sorted(delay(template, 10 if args.quick else 40, quiet_ms))
    print(f"\n## Root span end to evaluation span end (quiet period {quiet_ms} ms, LocalJudge)\n")
    print("| traces | median s | p95 s | max s |\n|---:|---:|---:|---:|")
    p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
    print(f"| {len(delays)} | {statistics.median(delays):.3f} | {p95:.3f} | {delays[-1]:.3f} |")
    # Last: its pending traces stay in this process's memory (RSS does not shrink back).
    print(f"\n## Through the receiver ({len(payloads)} requests of {BATCH} spans, a client "
          "in the same process, best of 3)\n")  # fmt: skip
    print("| transport | spans/s |\n|---|---:|")
    for transport, value in transports(payloads).items():
        print(f"| {transport} | {value:,.0f} |")


if __name__ == "__main__":
    main()
