"""Request-path overhead of groundwatch on a LlamaIndex query engine, paired in one process.

Every configuration runs the same queries on the same ``VectorStoreIndex`` (in-memory vectors, a
deterministic embedding and an extractive LLM, so LlamaIndex's own work dominates, as with a
fast model server). Each round runs one block of queries per configuration, in a shuffled order;
a block's mean time per query is divided by the no-handler block of the same round, and the table
shows the median of those ratios over the rounds, for wall time (what a caller waits, including
time the request thread waits for the GIL while groundwatch's worker thread scores) and for the
CPU time of the request thread (the request-path work itself; less sensitive to other processes
on a busy machine), plus the ratio of the fastest blocks' CPU time (the least disturbed ones).
The p99 is given twice: over every block's queries pooled, and per round (a block's p99 over
the no-handler block's of the same round) as a median with the lowest and highest, which shows
how far one round's tail lands from another's.

    python benchmarks/overhead_llamaindex.py            # ~2-3 minutes
    python benchmarks/overhead_llamaindex.py --blocks 4   # a quick look
    python benchmarks/overhead_llamaindex.py --blocks 30 --llm-latency-ms 20   # a model that waits
    python benchmarks/overhead_llamaindex.py --instructions   # callgrind counts, ~5 minutes
    python benchmarks/overhead_llamaindex.py --instructions --pipeline agent   # an agent's run

``--instructions`` counts the request thread's instructions per query under callgrind instead of
timing it (see ``_instructions.py``): the same figure whatever else the machine runs, for the
configurations that run in the request thread alone (no handler, the no-op handler, sampling 0,
and sampling 1 with the judge in a worker process, whose scoring and telemetry run on other
threads and are not counted; with ``--blocks`` blocks of ``--queries`` queries each).
``--pipeline agent`` counts a ``FunctionAgent`` run instead of a query: a scripted
``MockFunctionCallingLLM`` calls one tool (a document's text), then restates it; each run is
awaited on one event loop kept for the whole block.

With no LLM latency (the default) a query is ~3 ms of pure CPU work, a worst case for anything
running in the same interpreter; with a real model server most of a query is waiting.

Configurations: no handler; a no-op span + event handler on the dispatcher; groundwatch at
sampling 0 and 1 (LocalJudge, scoring on the background worker, and in a worker process when the
runtime offers it; its spans and log events go through the SDK's batch processors to
discarding exporters); OpenInference's LlamaIndex instrumentor exporting to a discarding exporter.
Sampling-1 monitors are flushed after each of their blocks (untimed, the flush time is shown),
so their background work never runs during another configuration's block; at the end every
sampled record must have been scored (the ``groundwatch.records`` / ``groundwatch.evaluations``
counters are read from an in-memory metric reader). A block is 400 queries (about a second) by
default: the worker lets records gather for up to ``BATCH_DELAY_S`` (0.2 s) before it scores
them, and a block much shorter than that would leave the scoring to the untimed flush.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import inspect
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import _instructions
import groundwatch_llamaindex
from _discard import (
    DiscardSpans,
    discarding_providers,
    discarding_worker_providers,
    without_pacing,
)
from _stats import counter_totals, p99, spread
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.span.base import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import groundwatch as gw

# --- the pipeline -------------------------------------------------------------------------------

TOPICS = [
    ("Eiffel Tower", "is 330 metres tall", "was completed in 1889"),
    ("Mount Fuji", "is 3776 metres high", "last erupted in 1707"),
    ("Great Wall of China", "is over 21000 kilometres long", "was built over many centuries"),
    ("Amazon river", "carries more water than any other river", "flows through Brazil"),
    ("Sahara desert", "covers about nine million square kilometres", "lies in north Africa"),
    ("Mount Everest", "is 8849 metres high", "was first climbed in 1953"),
    ("Lake Baikal", "is 1642 metres deep", "holds a fifth of the world's fresh water"),
    ("Golden Gate Bridge", "is 2737 metres long", "opened in 1937"),
]
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"[A-Z][^.\n]*\.")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def build_documents() -> list[Document]:
    docs = []
    for i, (name, fact1, fact2) in enumerate(TOPICS):
        text = (
            f"The {name} {fact1}. The {name} {fact2}. Visitors often ask about the {name}, "
            f"and guides repeat that it {fact1.split(' ', 1)[1]}."
        )
        docs.append(Document(text=text, id_=f"doc-{i}", metadata={"topic": name}))
    return docs


QUESTIONS = [f"What do we know about the {name}?" for name, _, _ in TOPICS]


class HashEmbedding(BaseEmbedding):
    """Bag of hashed words: cheap and query-dependent."""

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * 256
        for word in _words(text):
            vec[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % 256] += 1.0
        return vec

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class ExtractiveLLM(CustomLLM):
    """Answers with the two context sentences sharing most words with the query.

    ``latency_s`` makes each call wait like a call to a model server (the GIL is free meanwhile).
    """

    latency_s: float = 0.0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="extractive")

    def _answer(self, prompt: str) -> str:
        query = prompt.rsplit("Query:", 1)[-1].split("\n", 1)[0]
        wanted = _words(query)
        sentences = _SENTENCE.findall(prompt.rsplit("Query:", 1)[0])
        ranked = sorted(sentences, key=lambda s: -len(wanted & _words(s)))
        return " ".join(ranked[:2])

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if self.latency_s:
            time.sleep(self.latency_s)
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self._answer(prompt)
        yield CompletionResponse(text=text, delta=text)


# --- configurations -------------------------------------------------------------------------------


class NoopSpanHandler(BaseSpanHandler[BaseSpan]):
    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        return None

    def prepare_to_exit_span(self, id_: str, bound_args: Any, **kwargs: Any) -> BaseSpan | None:
        return None

    def prepare_to_drop_span(self, id_: str, bound_args: Any, **kwargs: Any) -> BaseSpan | None:
        return None


class NoopEventHandler(BaseEventHandler):
    def handle(self, event: Any, **kwargs: Any) -> Any:
        return None


@dataclass
class Config:
    name: str
    setup: Callable[[], None] = lambda: None
    teardown: Callable[[], None] = lambda: None
    after_block: Callable[[], None] | None = None
    block_means: list[float] = field(default_factory=list)
    block_cpu: list[float] = field(default_factory=list)
    wall_ratios: list[float] = field(default_factory=list)
    cpu_ratios: list[float] = field(default_factory=list)
    p99_ratios: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    block_latencies: list[float] = field(default_factory=list)  # the current block's
    flush_s: list[float] = field(default_factory=list)
    other_cpu_s: float = 0.0  # CPU of this process's other threads during blocks and flushes
    queries_run: int = 0
    monitor: Any = None
    reader: InMemoryMetricReader | None = None


def monitor_config(name: str, rate: float, pacing: bool = True, **monitor_kwargs: Any) -> Config:
    reader = InMemoryMetricReader()
    config = Config(name=name, reader=reader)
    config.monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(rate),
        meter_provider=MeterProvider(metric_readers=[reader]),
        **discarding_providers(),
        max_queue_size=100_000,
        shutdown_on_exit=False,
        **monitor_kwargs,
    )
    if not pacing:
        without_pacing(config.monitor)
    config.setup = lambda: groundwatch_llamaindex.instrument(config.monitor)
    config.teardown = groundwatch_llamaindex.uninstrument
    if rate > 0:

        def flush() -> None:
            start = time.perf_counter()
            config.monitor.force_flush(timeout_millis=120_000)
            config.flush_s.append(time.perf_counter() - start)

        config.after_block = flush
    return config


def noop_config() -> Config:
    span_handler, event_handler = NoopSpanHandler(), NoopEventHandler()
    dispatcher = get_dispatcher()

    def setup() -> None:
        dispatcher.add_span_handler(span_handler)
        dispatcher.add_event_handler(event_handler)

    def teardown() -> None:
        dispatcher.span_handlers.remove(span_handler)
        dispatcher.event_handlers.remove(event_handler)

    return Config("no-op dispatcher handler", setup, teardown)


def openinference_config() -> Config | None:
    try:
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    except ImportError:
        return None
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardSpans()))
    instrumentor = LlamaIndexInstrumentor()
    return Config(
        "OpenInference instrumentor (discarding exporter)",
        lambda: instrumentor.instrument(tracer_provider=provider),
        instrumentor.uninstrument,
    )


def out_of_process_kwargs() -> dict[str, Any] | None:
    """The runtime's option to score in a worker process, if this version has a working one."""
    if "executor" not in inspect.signature(gw.Monitor).parameters:
        return None
    try:
        gw.Monitor(executor="process", shutdown_on_exit=False).shutdown(10_000)
    except Exception as exc:
        print(f"(executor='process' unavailable: {exc})", file=sys.stderr)
        return None
    return {"executor": "process"}


# --- run ----------------------------------------------------------------------------------------


def run(blocks: int, queries: int, seed: int, llm_latency_ms: float) -> int:
    engine = build_engine(llm_latency_ms)
    configs = configurations(thread_executor=True)

    rng = random.Random(seed)
    for question in QUESTIONS:  # warm caches, imports, first-call paths
        engine.query(question)
    for config in configs:
        config.setup()
        for question in QUESTIONS:
            engine.query(question)
        config.teardown()
        if config.after_block:
            config.after_block()
            config.flush_s.clear()

    started = time.perf_counter()
    for _ in range(blocks):
        order = configs[:]
        rng.shuffle(order)
        for config in order:
            config.setup()
            gc.collect()
            process_start = time.process_time()
            cpu_start = time.thread_time()
            block_start = time.perf_counter()
            config.block_latencies = []
            for i in range(queries):
                t0 = time.perf_counter()
                engine.query(QUESTIONS[i % len(QUESTIONS)])
                config.block_latencies.append(time.perf_counter() - t0)
            config.latencies.extend(config.block_latencies)
            config.block_means.append((time.perf_counter() - block_start) / queries)
            config.block_cpu.append((time.thread_time() - cpu_start) / queries)
            config.teardown()
            if config.after_block:
                config.after_block()
            process_cpu = time.process_time() - process_start
            config.other_cpu_s += process_cpu - (time.thread_time() - cpu_start)
            config.queries_run += queries
        # Ratios within a round (blocks close in time) resist the machine's load drifting.
        base_wall, base_cpu = configs[0].block_means[-1], configs[0].block_cpu[-1]
        base_block_p99 = p99(configs[0].block_latencies)
        for config in configs:
            config.wall_ratios.append(config.block_means[-1] / base_wall)
            config.cpu_ratios.append(config.block_cpu[-1] / base_cpu)
            config.p99_ratios.append(p99(config.block_latencies) / base_block_p99)
    elapsed = time.perf_counter() - started

    base = statistics.median(configs[0].block_means)
    base_p99 = p99(configs[0].latencies)
    print(
        f"LlamaIndex query engine, {blocks} rounds x {queries} queries per configuration, "
        f"interleaved ({elapsed:.0f} s); LLM latency {llm_latency_ms:g} ms; "
        f"no handler: {base * 1e3:.2f} ms/query wall, "
        f"{statistics.median(configs[0].block_cpu) * 1e3:.2f} ms CPU of the request thread\n"
    )
    print(
        "| configuration | wall time ratio | request-thread CPU ratio | CPU, fastest blocks "
        "| p99 latency ratio | p99, per round (range) | flush after block "
        "| other threads' CPU per query |"
    )
    print("|---|---|---|---|---|---|---|---|")
    base_cpu_min = min(configs[0].block_cpu)
    for config in configs:
        flush = f"{statistics.median(config.flush_s) * 1e3:.0f} ms" if config.flush_s else "-"
        print(
            f"| {config.name} | {statistics.median(config.wall_ratios):.3f}x | "
            f"{statistics.median(config.cpu_ratios):.3f}x | "
            f"{min(config.block_cpu) / base_cpu_min:.3f}x | "
            f"{p99(config.latencies) / base_p99:.2f}x | {spread(config.p99_ratios)} | {flush} | "
            f"{config.other_cpu_s / config.queries_run * 1e3:.2f} ms |"
        )

    problems = 0
    print()
    for config in configs:
        if config.monitor is None:
            continue
        ok = config.monitor.shutdown(timeout_millis=120_000)
        assert config.reader is not None
        decisions = counter_totals(config.reader, "groundwatch.records", "groundwatch.decision")
        labels = counter_totals(config.reader, "groundwatch.evaluations", "groundwatch.label")
        sampled = decisions.get("sampled", 0)
        dropped = sum(v for k, v in decisions.items() if k not in ("sampled", "not_sampled"))
        evaluated = sum(labels.values())
        print(
            f"{config.name}: records {sum(decisions.values())}, sampled {sampled}, "
            f"scored {evaluated} ({labels}), "
            f"dropped {dropped} {decisions}, shutdown in time: {ok}"
        )
        if sampled and (evaluated != sampled or dropped or not ok):
            problems += 1
    return 1 if problems else 0


def build_agent() -> Any:
    """A ``FunctionAgent`` whose scripted model calls one tool, then restates its output."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    texts = {d.metadata["topic"]: d.text for d in build_documents()}

    def lookup(topic: str) -> str:
        """What the documents say about a topic."""
        return texts[topic]

    def model(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content=(messages[-1].content or "")[:120])
        question = messages[-1].content or ""
        topic = next((t for t in texts if t in question), next(iter(texts)))
        call = ToolCallBlock(
            tool_call_id="call-1", tool_name="lookup", tool_kwargs={"topic": topic}
        )
        return ChatMessage(role="assistant", blocks=[call])

    return FunctionAgent(
        tools=[FunctionTool.from_defaults(lookup)],
        llm=MockFunctionCallingLLM(response_generator=model),
    )


def build_engine(llm_latency_ms: float) -> Any:
    index = VectorStoreIndex.from_documents(build_documents(), embed_model=HashEmbedding())
    llm = ExtractiveLLM(latency_s=llm_latency_ms / 1000)
    return index.as_query_engine(llm=llm, similarity_top_k=3)


def configurations(thread_executor: bool) -> list[Config]:
    configs = [
        Config("no handler"),
        noop_config(),
        monitor_config("groundwatch, sampling 0", 0.0),
    ]
    if thread_executor:
        configs.append(
            monitor_config("groundwatch, sampling 1 (worker thread)", 1.0, executor="thread")
        )
    oop = out_of_process_kwargs()
    if oop is not None:
        configs.append(monitor_config("groundwatch, sampling 1 (worker process)", 1.0, **oop))
        configs.append(
            monitor_config(
                "groundwatch, sampling 1 (worker process), no pacing", 1.0, pacing=False, **oop
            )
        )
        configs.append(
            monitor_config(
                "groundwatch, sampling 1 (worker process exports)",
                1.0,
                **oop,
                export_from_worker=discarding_worker_providers,
            )
        )
        configs.append(
            monitor_config(
                "groundwatch, sampling 1 (worker process exports), no pacing",
                1.0,
                pacing=False,
                **oop,
                export_from_worker=discarding_worker_providers,
            )
        )
    oi = openinference_config()
    if oi is not None:
        configs.append(oi)
    return configs


def run_instructions(
    blocks: int, queries: int, llm_latency_ms: float, directory: str, pipeline: str = "query"
) -> int:
    """The child under callgrind: every configuration's blocks, each counted on its own (not
    the thread executor: its judge would run on a thread of this process, which callgrind
    serialises with the queries)."""
    configs = configurations(thread_executor=False)
    if pipeline == "agent":
        agent = build_agent()
        loop = asyncio.new_event_loop()

        async def run_agent(question: str) -> Any:
            return await agent.run(user_msg=question)  # the handler needs a running loop

        def block() -> None:
            for i in range(queries):
                loop.run_until_complete(run_agent(QUESTIONS[i % len(QUESTIONS)]))

    else:
        engine = build_engine(llm_latency_ms)

        def block() -> None:
            for i in range(queries):
                engine.query(QUESTIONS[i % len(QUESTIONS)])

    counted = _instructions.Blocks(directory)
    for config in configs:  # warm caches, first-call paths, the worker process
        config.setup()
        block()
        config.teardown()
        if config.after_block:
            config.after_block()
    for _ in range(blocks):
        for config in configs:
            config.setup()
            gc.collect()
            counted.run(config.name, block)
            config.teardown()
            if config.after_block:
                config.after_block()
    counted.close()
    for config in configs:
        if config.monitor is not None:
            config.monitor.shutdown(timeout_millis=120_000)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--blocks", type=int, default=12, help="rounds over every config")
    parser.add_argument("--queries", type=int, default=400, help="queries per block")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--llm-latency-ms",
        type=float,
        default=0.0,
        help="make each LLM call wait this long, like a model server (default 0: CPU only)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the request thread's instructions under callgrind instead of timing",
    )
    parser.add_argument(
        "--pipeline",
        choices=("query", "agent"),
        default="query",
        help="with --instructions: the query engine (default), or a FunctionAgent calling a tool",
    )
    parser.add_argument(_instructions.CHILD_FLAG, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.instructions_child:
        return run_instructions(
            args.blocks, args.queries, args.llm_latency_ms, args.instructions_child, args.pipeline
        )
    if args.instructions:
        given = argv or sys.argv
        blocks = args.blocks if "--blocks" in given else 3
        queries = args.queries if "--queries" in given else 10  # callgrind is ~50 times slower
        forwarded = ["--blocks", str(blocks), "--queries", str(queries)]
        forwarded += ["--llm-latency-ms", str(args.llm_latency_ms), "--pipeline", args.pipeline]
        counts = _instructions.run_counted(__file__, forwarded)
        what = "query engine" if args.pipeline == "query" else "FunctionAgent (one tool call)"
        unit = "query" if args.pipeline == "query" else "run"
        print(
            f"LlamaIndex {what} under callgrind: {blocks} blocks x {queries} {unit}s "
            "per configuration\n"
        )
        _instructions.print_table(counts, queries, "no handler", "no-op dispatcher handler", unit)
        return 0
    return run(args.blocks, args.queries, args.seed, args.llm_latency_ms)


if __name__ == "__main__":
    sys.exit(main())
