"""What watching a LangChain RAG chain costs the request: groundwatch vs a no-op callback vs
OpenInference, measured side by side in one process on the same chain.

The chain is the LangChain RAG tutorial's shape on an in-memory vector store (20 documents,
k=4), a prompt, LangChain's fake chat model and an output parser: about 1.6 ms a call on an idle
machine, so any per-run cost of a callback shows. Every variant runs in blocks of ``--block``
calls; each round runs one block of every variant in a fresh random order, so drift in machine
load hits all of them alike. A variant's figures are medians over rounds of its block divided by
the no-callback block of the same round: of the blocks' median call (robust to the calls a busy
machine deschedules), of their total time (the mean call), and of the CPU time of the calling
thread (it leaves out time lost to other processes, and also the waits for the GIL held by a
scoring thread, which the first two include).

Variants:
    none           no callback
    noop           a callback handler that does nothing (LangChain's own dispatch cost)
    gw s=0         groundwatch, sampling 0: capture + sampler decision only
    gw s=1 thread  groundwatch, every run scored by LocalJudge on the monitor's worker thread
    gw s=1 process the same, the judge in a worker process (when the runtime has it)
    gw s=1 process, worker exports
                   the same, the worker process exporting the spans and events itself
                   (``export_from_worker``, to the same discarding SDK set-up built there)
    ..., no pacing the same two with the worker's pacing off (``runner.Pacer``: slices of
                   work with rests between), to show what pacing trades
    --breakdown    adds judges that do nothing, sleep or spin 1 ms; a thread judge with no
                   SDK; and a control that captures and samples every run but throws the record
                   away before the worker's queue (what sampling 1 costs the request thread
                   itself, with no background work at all)
    openinference  OpenInference's LangChain instrumentor, spans to a discarding exporter
                   (instrumented before its block, uninstrumented after)

After each scoring block the monitor is flushed (untimed), so scoring never leaks into another
variant's block; at the end every sampled record must have been scored (queue_full drops and
unscored records are reported). A block is 400 calls (about a second) by default: the worker
lets records gather for up to ``BATCH_DELAY_S`` (0.2 s) before it scores them, and a block much
shorter than that would leave the scoring to the untimed flush.

Run: python benchmarks/overhead_langchain.py [--rounds 20] [--block 400] [--think-ms 0]
                                            [--breakdown] [--pipeline chain|agent]
     python benchmarks/overhead_langchain.py --instructions [--rounds 3] [--block 10]
                                            [--pipeline chain|agent]

``--pipeline agent`` measures a LangGraph ReAct agent instead of the chain: LangChain's fake
chat model scripted to call one tool (the store's policy) and then answer, so each run is a
model call, a tool call and a second model call, and groundwatch records the tool's output.

``--instructions`` counts the calling thread's instructions per call under callgrind instead of
timing (see ``_instructions.py``): the same figure whatever else the machine runs. It covers what
runs on the calling thread (for sampling 1 with the judge in a worker process: the capture and
the hand-off, not the worker thread's telemetry).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _instructions
from _discard import (
    BusyJudge,
    InstantJudge,
    capture_only,
    discarding_providers,
    discarding_worker_providers,
    without_pacing,
)
from _stats import counter_totals, p99, spread
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "src", ROOT / "integrations" / "langchain" / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from groundwatch_langchain import GroundwatchCallbackHandler  # noqa: E402

import groundwatch as gw  # noqa: E402

TOPICS = [
    "refunds", "shipping", "warranty", "returns", "support", "stores", "payments", "gift cards",
    "loyalty points", "price matching", "repairs", "installation", "delivery slots", "recycling",
    "student discounts", "business accounts", "order tracking", "cancellations", "exchanges",
    "accessibility",
]  # fmt: skip
ANSWER = "Refunds are accepted within 30 days of purchase with a receipt."
QUESTION = "How long do I have to return an item for a refund?"


POLICY = "Refund policy: refunds are accepted within 30 days of purchase with a receipt."
PIPELINES = ("chain", "agent")
# What each call is given: the question (the chain), or agent state (the agent).
_input: Any = QUESTION


class NoOpHandler(BaseCallbackHandler):
    """Does nothing: what LangChain's callback dispatch alone costs."""


def build_chain() -> Runnable[str, str]:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [
            Document(
                page_content=f"Policy on {topic}: customers may ask in store or online; "
                f"our staff answer questions about {topic} within two business days.",
                id=f"doc-{i}",
                metadata={"topic": topic},
            )
            for i, topic in enumerate(TOPICS)
        ]
    )
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context only.\n\n{context}"), ("human", "{question}")]
    )
    return (
        {
            "context": store.as_retriever(search_kwargs={"k": 4})
            | (lambda docs: "\n\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )


def build_agent() -> Runnable[Any, Any]:
    """A LangGraph ReAct agent over a fake chat model that calls one tool, then answers."""
    import itertools

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    class ToolCallingFake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
            return self

    @tool
    def lookup_policy(topic: str = "refunds") -> str:
        """Look up the store's policy on a topic."""
        return POLICY

    script = [
        AIMessage(
            content="",
            tool_calls=[{"name": "lookup_policy", "args": {"topic": "refunds"}, "id": "c1"}],
        ),
        AIMessage(content=ANSWER),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent: deprecated for create_agent
        from langgraph.prebuilt import create_react_agent

        agent: Runnable[Any, Any] = create_react_agent(
            ToolCallingFake(messages=itertools.cycle(script)), [lookup_policy]
        )
    return agent


class Variant:
    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        before: Callable[[], None] | None = None,
        after: Callable[[], None] | None = None,
        monitor: gw.Monitor | None = None,
        handler: GroundwatchCallbackHandler | None = None,
    ) -> None:
        self.name, self.config, self.before, self.after = name, config, before, after
        self.monitor, self.handler = monitor, handler
        self.ratios: list[float] = []  # block mean call / no-callback block mean call
        self.median_ratios: list[float] = []  # block median call / no-callback block median
        self.p99_ratios: list[float] = []  # block p99 call / no-callback block p99
        self.cpu_ratios: list[float] = []
        self.block_calls: list[float] = []  # the calls of the current block
        self.per_call: list[float] = []
        self.reader: InMemoryMetricReader | None = None  # a groundwatch monitor's metrics
        self.called_back = 0  # with no SDK: what on_result saw
        self.control = False  # nothing is scored on purpose: left out of the final check

    def on_result(self, record: Any, evaluation: Any) -> None:
        self.called_back += 1

    def scored(self) -> int:
        if self.reader is None:
            return self.called_back
        labels = counter_totals(self.reader, "groundwatch.evaluations", "groundwatch.label")
        return sum(labels.values())


class _StubMonitor:
    def decide(self, **kwargs: Any) -> gw.Decision:
        return gw.Decision.SAMPLED

    def record(self, **kwargs: Any) -> None:
        pass

    def record_decision(self, decision: gw.Decision, *, route: str | None = None) -> None:
        pass

    def record_failure(self, error_type: str, *, route: str | None = None) -> None:
        pass


def handler_cost(chain: Runnable[str, str], repeats: int = 2000) -> tuple[int, float]:
    """CPU microseconds the handler itself spends per run: one run's callbacks, recorded as
    LangChain delivers them, replayed on a handler whose monitor does nothing."""
    events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    class Recorder(GroundwatchCallbackHandler):
        pass

    names = [n for n in dir(GroundwatchCallbackHandler) if n.startswith("on_")]
    for name in names:
        setattr(
            Recorder,
            name,
            lambda self, *a, _n=name, **kw: events.append((_n, a, kw)),
        )
    chain.invoke(_input, {"callbacks": [Recorder(_StubMonitor())]})
    handler = GroundwatchCallbackHandler(_StubMonitor())
    calls = [(getattr(handler, name), a, kw) for name, a, kw in events]
    start = time.thread_time()
    for _ in range(repeats):
        for method, a, kw in calls:
            method(*a, **kw)
    assert handler.counts["records"] == repeats
    return len(events), (time.thread_time() - start) / repeats * 1e6


def run_block(
    chain: Runnable[str, str], variant: Variant, n: int, think: float = 0.0
) -> tuple[float, float]:
    """Run ``n`` calls, ``think`` seconds apart (not timed); returns (wall seconds, CPU seconds
    of this thread) spent in the calls."""
    if variant.before:
        variant.before()
    invoke, config, calls = chain.invoke, variant.config, variant.block_calls
    calls.clear()
    clock = time.perf_counter
    cpu = 0.0
    for _ in range(n):
        if think:
            time.sleep(think)
        c0 = time.thread_time()
        t0 = clock()
        invoke(_input, config)
        calls.append(clock() - t0)
        cpu += time.thread_time() - c0
    elapsed = sum(calls)
    variant.per_call.extend(calls)
    if variant.after:
        variant.after()
    if variant.monitor is not None:
        variant.monitor.force_flush(60_000)  # untimed: no scoring leaks into the next block
    return elapsed, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="add sampling-1 variants with a judge that does nothing, with and without an "
        "OpenTelemetry SDK (what the worker's hand-off and telemetry cost without scoring), and "
        "with one that takes 1 ms per answer asleep or on the CPU (what the worker process's CPU "
        "use costs), and a control that throws sampled records away before the queue",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="pause between calls (not timed), as a server between requests: background "
        "scoring can then use the gaps instead of the next request's time",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the calling thread's instructions under callgrind instead of timing",
    )
    parser.add_argument(
        "--pipeline",
        choices=PIPELINES,
        default="chain",
        help="the RAG chain (default), or a LangGraph agent that calls one tool then answers",
    )
    parser.add_argument(_instructions.CHILD_FLAG, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.instructions:
        given = argv or sys.argv
        rounds = args.rounds if "--rounds" in given else 3
        block = args.block if "--block" in given else 10  # callgrind is ~50 times slower
        counts = _instructions.run_counted(
            __file__,
            ["--rounds", str(rounds), "--block", str(block), "--pipeline", args.pipeline],
        )
        what = "RAG chain" if args.pipeline == "chain" else "LangGraph agent (one tool call)"
        print(f"LangChain {what} under callgrind: {rounds} blocks x {block} calls\n")
        _instructions.print_table(counts, block, "none", "noop callback", "call")
        return 0
    global _input
    if args.pipeline == "agent":
        _input = {"messages": [("user", QUESTION)]}
    # OpenInference calls a LangChain API that LangChain deprecated: not ours to fix, not news.
    warnings.filterwarnings("ignore", module="openinference")
    rng = random.Random(args.seed)

    providers = discarding_providers()
    tracer_provider, logger_provider = providers["tracer_provider"], providers["logger_provider"]

    def groundwatch(
        name: str,
        rate: float,
        executor: str,
        judge: Any = None,
        sdk: bool = True,
        pacing: bool = True,
        control: Callable[[Any], None] | None = None,
        **monitor_kwargs: Any,
    ) -> Variant | None:
        variant = Variant(name, {})
        reader = InMemoryMetricReader() if sdk else None
        try:
            monitor = gw.Monitor(
                judge,
                sampler=gw.RatioSampler(rate),
                executor=executor,
                max_queue_size=4096,
                shutdown_on_exit=False,
                # Its own metric reader counts what was scored. No on_result callback: that
                # would make every evaluation a full pydantic object on the host, which the
                # default does not do. Without the SDK only the callback can count.
                **(
                    {**providers, "meter_provider": MeterProvider(metric_readers=[reader])}
                    if reader is not None
                    else {"on_result": variant.on_result}
                ),
                **monitor_kwargs,
            )
        except (NotImplementedError, ValueError, TypeError) as exc:
            print(f"({name}: not available: {exc})")
            return None
        if not pacing:
            without_pacing(monitor)
        if control is not None:
            control(monitor)
            variant.control = True
        handler = GroundwatchCallbackHandler(monitor)
        variant.config = {"callbacks": [handler]}
        variant.monitor, variant.handler, variant.reader = monitor, handler, reader
        return variant

    from openinference.instrumentation.langchain import LangChainInstrumentor

    oi = LangChainInstrumentor()
    variants = [
        v
        for v in (
            Variant("none", {}),
            Variant("noop callback", {"callbacks": [NoOpHandler()]}),
            groundwatch("groundwatch s=0", 0.0, "thread"),
            groundwatch("groundwatch s=1 thread", 1.0, "thread"),
            groundwatch("groundwatch s=1 process", 1.0, "process"),
            groundwatch("groundwatch s=1 process, no pacing", 1.0, "process", pacing=False),
            groundwatch(
                "groundwatch s=1 process, worker exports",
                1.0,
                "process",
                export_from_worker=discarding_worker_providers,
            ),
            groundwatch(
                "groundwatch s=1 process, worker exports, no pacing",
                1.0,
                "process",
                pacing=False,
                export_from_worker=discarding_worker_providers,
            ),
            *(
                (
                    groundwatch("s=1 thread, judge does nothing", 1.0, "thread", InstantJudge()),
                    groundwatch("s=1 process, judge does nothing", 1.0, "process", InstantJudge()),
                    groundwatch(
                        "s=1 process, judge sleeps 1 ms", 1.0, "process", BusyJudge(1, sleep=True)
                    ),
                    groundwatch("s=1 process, judge spins 1 ms", 1.0, "process", BusyJudge(1)),
                    groundwatch(
                        "s=1 process, judge does nothing, worker exports",
                        1.0,
                        "process",
                        InstantJudge(),
                        export_from_worker=discarding_worker_providers,
                    ),
                    groundwatch(
                        "s=1, capture only (sampled records thrown away: a control)",
                        1.0,
                        "process",
                        control=capture_only,
                    ),
                    groundwatch(
                        "s=1 thread, judge does nothing, no SDK",
                        1.0,
                        "thread",
                        InstantJudge(),
                        sdk=False,
                    ),
                )
                if args.breakdown
                else ()
            ),
            Variant(
                "openinference",
                {},
                before=lambda: oi.instrument(tracer_provider=tracer_provider),
                after=oi.uninstrument,
            ),
        )
        if v is not None
    ]
    chain = build_chain() if args.pipeline == "chain" else build_agent()
    if args.instructions_child:
        counted_variants = [v for v in variants if "thread" not in v.name]
        return count_instructions(chain, counted_variants, args, args.instructions_child)

    # Warm up every variant (imports, caches, worker start), untimed.
    for variant in variants:
        run_block(chain, variant, args.block)
        variant.per_call.clear()

    started = time.perf_counter()
    for _ in range(args.rounds):
        order = variants[:]
        rng.shuffle(order)
        times = {v.name: run_block(chain, v, args.block, args.think_ms / 1e3) for v in order}
        base_median = statistics.median(variants[0].block_calls)
        base_block_p99 = p99(variants[0].block_calls)
        for v in variants:
            v.ratios.append(times[v.name][0] / times["none"][0])
            v.median_ratios.append(statistics.median(v.block_calls) / base_median)
            v.p99_ratios.append(p99(v.block_calls) / base_block_p99)
            v.cpu_ratios.append(times[v.name][1] / times["none"][1])
    wall = time.perf_counter() - started

    n_events, handler_us = handler_cost(chain)
    base = variants[0]
    base_call = statistics.median(base.per_call)
    base_p99 = p99(base.per_call)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{args.rounds} rounds x {args.block} calls per variant, {args.think_ms:g} ms "
        f"between calls, {wall:.0f} s; "
        f"no-callback call: median {base_call * 1e3:.2f} ms; {os.cpu_count()} CPUs, "
        f"load average {load:.1f}; the handler alone: {handler_us:.0f} us of CPU per run "
        f"({n_events} callbacks replayed)\n"
    )
    print(
        "| variant | median call | mean call | request-thread CPU | median call (ms) "
        "| p99 call (ms) | p99 call, per round (range) |"
    )
    print("|---|---|---|---|---|---|---|")
    for v in variants:
        print(
            f"| {v.name} | {statistics.median(v.median_ratios):.3f}x "
            f"| {statistics.median(v.ratios):.3f}x "
            f"| {statistics.median(v.cpu_ratios):.3f}x "
            f"| {statistics.median(v.per_call) * 1e3:.2f} "
            f"| {p99(v.per_call) * 1e3:.2f} ({p99(v.per_call) / base_p99:.2f}x) "
            f"| {spread(v.p99_ratios)} |"
        )
    print(
        "\n(ratios to no callback: medians over rounds of paired blocks; 'median call' compares"
        "\nthe blocks' median calls, 'mean call' their total times, 'request-thread CPU' the CPU"
        "\ntime of the calling thread, which leaves out waits for other processes and the GIL;"
        "\n'p99 call (ms)' pools every block's calls, 'per round' is the median of the blocks'"
        "\np99 over the no-callback block's of the same round, with the lowest and highest)"
    )
    print()
    ok = True
    for v in variants:
        if v.monitor is None or v.handler is None:
            continue
        v.monitor.force_flush(60_000)
        decisions, dropped = v.monitor.stats.snapshot()
        sampled = decisions.get(("sampled", None), 0)
        queue_full = decisions.get(("queue_full", None), 0)
        counts = v.handler.counts
        recorded = counts["records"] + counts["not_sampled"]
        scored = v.scored()
        print(
            f"{v.name}: {recorded} runs counted, {sampled} sampled, {scored} scored, "
            f"queue_full={queue_full}, dropped={sum(dropped.values())}"
        )
        ok &= (v.control or scored == sampled) and queue_full == 0
        v.monitor.shutdown(30_000)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return 0 if ok else 1


def count_instructions(
    chain: Runnable[str, str], variants: list[Variant], args: Any, directory: str
) -> int:
    """The child under callgrind: blocks of every variant, each counted on its own (the
    thread-executor variants are left out: their judge runs on a thread of this process, which
    callgrind would serialise with the calls)."""
    for variant in variants:
        run_block(chain, variant, args.block)
    counted = _instructions.Blocks(directory)
    for _ in range(args.rounds):
        for variant in variants:
            if variant.before:
                variant.before()
            gc.collect()
            counted.run(
                variant.name,
                lambda v=variant: [chain.invoke(_input, v.config) for _ in range(args.block)],
            )
            if variant.after:
                variant.after()
            if variant.monitor is not None:
                variant.monitor.force_flush(60_000)
    counted.close()
    for variant in variants:
        if variant.monitor is not None:
            variant.monitor.shutdown(30_000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
