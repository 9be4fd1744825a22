"""``groundwatch demo``: simulated production traffic through a real LangChain RAG chain.

A help-centre chain (in-memory vector store over the bundled corpus, English and Chinese
questions, a prompt, a scripted chat model) answers a stream of customer questions with the
``groundwatch_langchain`` callback attached. A share of the traffic is sampled and scored in the
background by the local judge; partway through the run the scripted model starts to drift from
the retrieved text, and the drop detector fires. No API key, no server, no network.

LangChain is imported here, inside the command, never by the core package.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..alerts import Alert, AlertingHook, DropDetector, OTelAlertEmitter
from ..judging.lexical import CJK, CJK_CHAR
from ..types import Evaluation, RagRecord
from . import data

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

DEFAULT_REQUESTS = 300
DEFAULT_SAMPLE_RATE = 0.5
DEFAULT_SEED = 7
DRIFT_AT = 0.45
"""The scripted model starts drifting after this share of the requests."""
ROUTE = "help-centre"

DEMO_INSTALL = 'pip install -e ".[demo]" -e integrations/langchain'
"""The demo's install line from a clone."""
_DEMO_MODULES = (
    ("langchain_core", "langchain-core"),
    ("groundwatch_langchain", "groundwatch-langchain"),
    ("numpy", "numpy (the vector store's similarity search)"),
    ("opentelemetry.sdk", "opentelemetry-sdk"),
)
_OTLP_HINT = (
    "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed:\n"
    '    pip install -e ".[otlp]"   (opentelemetry-exporter-otlp-proto-http)\n'
    "Telemetry stays in this process for this run."
)
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
"""The Prometheus endpoint is unauthenticated: this machine only unless asked."""
_PROMETHEUS_HINT = (
    "--prometheus-port needs the Prometheus exporter:\n"
    '    pip install -e ".[prometheus]"   (opentelemetry-exporter-prometheus)'
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="simulated RAG traffic with a drifting model, scored live (no API key needed)",
        description=(
            "Runs simulated production traffic through a real LangChain RAG chain with the "
            "groundwatch callback attached; partway through, the scripted model starts to "
            "hallucinate and the drop detector fires. Telemetry goes to the console summary, to "
            "OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, and to a Prometheus endpoint with "
            "--prometheus-port."
        ),
    )
    parser.add_argument(
        "--requests", type=int, default=DEFAULT_REQUESTS, help="requests to simulate (%(default)s)"
    )
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=DEFAULT_SAMPLE_RATE,
        help="share of requests scored (%(default)s)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (%(default)s)")
    parser.add_argument(
        "--prometheus-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on HOST:PORT/metrics during the run",
    )
    parser.add_argument(
        "--prometheus-host",
        default=DEFAULT_PROMETHEUS_HOST,
        metavar="HOST",
        help=(
            "address of --prometheus-port (%(default)s: this machine only; 0.0.0.0 to be "
            "scraped from another host or container: /metrics has no authentication)"
        ),
    )
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        help="with --prometheus-port: keep serving this many seconds after the run",
    )
    parser.set_defaults(run=run)


# --------------------------------------------------------------------------------------------
# The LangChain side: embeddings, the scripted model, the chain


def _words(text: str) -> list[str]:
    """Lower-case words, plus single characters and bigrams of Chinese text."""
    out = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]
    for run_ in re.findall(f"[{CJK}]+", text):
        out.extend(run_)
        out.extend(run_[i : i + 2] for i in range(len(run_) - 1))
    return out


_STOP = frozenset(
    "a an the of to in on at for by with and or is are was were be it its this that as from do "
    "does did how what when can i my is".split()
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.findall(r"[^.!?。！？]+[.!?。！？]?", text) if s.strip()]


def _is_chinese(text: str) -> bool:
    return bool(CJK_CHAR.search(text))


@dataclass
class Script:
    """What the scripted model does on each call: faithful at first, drifting later."""

    requests: int
    seed: int
    drift_at: int
    calls: int = 0
    drifted: list[bool] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hallucination_probability(self, i: int) -> float:
        if i < self.drift_at:
            return 0.03
        ramp = max(1.0, 0.08 * self.requests)
        return 0.03 + 0.67 * min(1.0, (i - self.drift_at + 1) / ramp)

    def answer(self, question: str, context: str) -> str:
        with self.lock:
            i = self.calls
            self.calls += 1
        rng = random.Random(self.seed * 1_000_003 + i)
        passages = [p for p in context.split("\n\n") if p.strip()]
        top = passages[0] if passages else ""
        qwords = set(_words(question))
        sents = _sentences(top) or [top]
        best = max(sents, key=lambda s: len(qwords & set(_words(s))))
        zh = _is_chinese(top)
        drift = rng.random() < self.hallucination_probability(i)
        with self.lock:
            self.drifted.append(drift)
        if not drift:
            return best
        invention = rng.choice(data.INVENTIONS_ZH if zh else data.INVENTIONS_EN)
        roll = rng.random()
        if roll < 0.55:
            return best + ("" if zh else " ") + invention
        if roll < 0.8:
            return invention
        # A changed number: a contradiction that a purely lexical check can miss.
        changed = re.sub(r"\d+", lambda m: str(int(m.group(0)) * 3 + 1), best, count=1)
        return changed + ("" if zh else " ") + invention if changed == best else changed


def build_chain(script: Script) -> Runnable[str, str]:
    """The help-centre RAG chain, from langchain-core parts (imported here, lazily)."""
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    class HashedBagOfWords(Embeddings):
        """A deterministic bag-of-words embedding (hashed words and Chinese bigrams).

        langchain-core's DeterministicFakeEmbedding hashes the whole text into one random
        vector, so retrieval with it is random; this one makes the retrieval relevant.
        """

        size = 512

        def _embed(self, text: str) -> list[float]:
            vec = [0.0] * self.size
            for w in _words(text):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big")
                vec[h % self.size] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            return [v / norm for v in vec]

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [self._embed(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return self._embed(text)

    class ScriptedChatModel(BaseChatModel):
        """Answers from the context in its prompt, as the script says."""

        script: Any

        @property
        def _llm_type(self) -> str:
            return "groundwatch-demo-scripted"

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            system = str(messages[0].content) if messages else ""
            question = str(messages[-1].content) if messages else ""
            context = system.split("Context:\n", 1)[-1]
            answer = self.script.answer(question.removeprefix("Question: "), context)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])

    store = InMemoryVectorStore(HashedBagOfWords())
    store.add_documents(
        [
            Document(page_content=text, id=pid, metadata={"language": lang})
            for pid, lang, text in data.PASSAGES
        ]
    )
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the context only.\n\nContext:\n{context}"),
            ("human", "Question: {question}"),
        ]
    )

    def format_docs(docs: Sequence[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    chain: Runnable[str, str] = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | ScriptedChatModel(script=script)
        | StrOutputParser()
    )
    return chain


# --------------------------------------------------------------------------------------------
# Telemetry: in memory for the summary; OTLP and Prometheus when asked


@dataclass
class DemoTelemetry:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    spans: Any
    logs: Any
    destinations: list[str]
    notes: list[str]
    otlp: Delivery | None


class Delivery:
    """Counts the OTLP exports that succeeded and failed, per signal, for an honest summary."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.ok: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()

    def wrap(self, exporter: Any) -> Any:
        delivery = self

        class Counted:
            def __getattr__(self, name: str) -> Any:  # shutdown, force_flush, temporality...
                return getattr(exporter, name)

            def export(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    result = exporter.export(batch, *args, **kwargs)
                except Exception:
                    delivery.failed[type(exporter).__name__] += 1
                    raise
                ok = getattr(result, "name", "") == "SUCCESS"
                (delivery.ok if ok else delivery.failed)[type(exporter).__name__] += 1
                return result

        return Counted()

    def report(self) -> str:
        sent, failed = sum(self.ok.values()), sum(self.failed.values())
        if failed == 0 and sent:
            return f"OTLP/HTTP at {self.endpoint}: delivered ({sent} exports, none failed)"
        if failed == 0:
            return f"OTLP/HTTP at {self.endpoint}: nothing was exported"
        return (
            f"OTLP/HTTP at {self.endpoint}: DELIVERY FAILED for {failed} of {sent + failed} "
            "exports (see the exporter's warnings above); that telemetry is lost"
        )


def _unreachable(endpoint: str) -> str | None:
    """Why a TCP connection to the endpoint's host and port fails, or None when it connects."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 4318)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=2):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def setup_telemetry(
    seed: int, prometheus_port: int | None, prometheus_host: str = DEFAULT_PROMETHEUS_HOST
) -> DemoTelemetry:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SeededIds(IdGenerator):
        """Trace ids from the seed, so that trace-id sampling picks the same requests."""

        def __init__(self) -> None:
            # Separate streams: span ids are also drawn on the worker thread, in an order that
            # depends on timing; trace ids only for the requests, in request order.
            self._traces = random.Random(seed)
            self._spans = random.Random(seed + 1)

        def generate_span_id(self) -> int:
            return self._spans.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self._traces.getrandbits(128) or 1

    resource = Resource.create({"service.name": "groundwatch-demo"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    tracer_provider = TracerProvider(resource=resource, id_generator=SeededIds())
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    readers: list[MetricReader] = []
    destinations = ["in-memory exporters in this process (counted above; nothing printed)"]
    notes: list[str] = []
    otlp: Delivery | None = None

    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            notes.append(_OTLP_HINT)
        else:
            # Endpoint, headers and timeouts come from the standard OTEL_EXPORTER_OTLP_* variables.
            # Each exporter is wrapped so that the summary reports what was delivered, not what
            # was attempted; an endpoint that refuses connections is reported before the run
            # instead of after the exporters' retries.
            otlp = Delivery(endpoint)
            unreachable = _unreachable(endpoint)
            if unreachable:
                notes.append(f"OTLP endpoint {endpoint} is not reachable ({unreachable}).")
            tracer_provider.add_span_processor(BatchSpanProcessor(otlp.wrap(OTLPSpanExporter())))
            logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(otlp.wrap(OTLPLogExporter()))
            )
            readers.append(
                PeriodicExportingMetricReader(
                    otlp.wrap(OTLPMetricExporter()), export_interval_millis=5_000
                )
            )
    if prometheus_port is not None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server
        except ImportError:
            notes.append(_PROMETHEUS_HINT)
        else:
            start_http_server(prometheus_port, addr=prometheus_host)
            readers.append(PrometheusMetricReader())
            destinations.append(f"Prometheus at http://{prometheus_host}:{prometheus_port}/metrics")
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return DemoTelemetry(
        tracer_provider, meter_provider, logger_provider, spans, logs, destinations, notes, otlp
    )


# --------------------------------------------------------------------------------------------
# Console output


class Console:
    """Progress bar (on a terminal) and lines printed above it, from any thread."""

    def __init__(self, total: int, out: TextIO = sys.stdout) -> None:
        self.total = total
        self.out = out
        self.tty = out.isatty()
        self.lock = threading.Lock()
        self._last_decile = -1
        self._bar = ""

    def line(self, text: str) -> None:
        with self.lock:
            if self.tty and self._bar:
                self.out.write("\r\033[K")
            self.out.write(text + "\n")
            if self.tty and self._bar:
                self.out.write(self._bar)
            self.out.flush()

    def progress(self, done: int, sampled: int, scored: int, final: bool = False) -> None:
        width = 30
        filled = int(width * done / max(1, self.total))
        bar = (
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} requests"
            f"  sampled {sampled}  scored {scored}"
        )
        with self.lock:
            if self.tty:
                self._bar = bar
                self.out.write("\r\033[K" + bar)
                self.out.flush()
                return
            decile = 10 * done // max(1, self.total)
            if final or (decile != self._last_decile and decile % 2 == 0 and done < self.total):
                self._last_decile = decile
                self.out.write(bar + "\n")
                self.out.flush()

    def end_progress(self) -> None:
        with self.lock:
            if self.tty and self._bar:
                self.out.write("\n")
                self.out.flush()
            self._bar = ""


@dataclass
class Scored:
    request: int
    question: str
    answer: str
    evaluation: Evaluation


class Collector:
    """``on_result`` callback of the demo: keeps results and feeds the drop detector."""

    def __init__(self, console: Console, hook: AlertingHook, trace_index: dict[int, int]) -> None:
        self.console = console
        self.hook = hook
        self.trace_index = trace_index
        self.results: list[Scored] = []
        self.alerts: list[tuple[int, Alert]] = []
        self.lock = threading.Lock()
        self._current = -1

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        index = self.trace_index.get(record.trace_id or 0, -1)
        with self.lock:
            self.results.append(Scored(index, record.question or "", record.answer, evaluation))
        self._current = index
        self.hook(record, evaluation)

    def print_alert(self, alert: Alert) -> None:
        """An ``on_alert`` sink: the alert as it fires, with the request that tipped it."""
        self.alerts.append((self._current, alert))
        mark = "ALERT" if alert.kind == "fired" else "RESOLVED"
        self.console.line(f"  >> {mark} at request {self._current + 1}: {alert.message}")


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def _badness(s: Scored) -> tuple[int, float, float, int]:
    """Sort key of the worst answers: an answer that contradicts its context before one the
    context merely does not back, then by faithfulness, groundedness and request."""
    ev = s.evaluation
    contradicts = any(c.verdict == "contradicted" for c in ev.claims)
    faithfulness = 1.0 if ev.faithfulness is None else ev.faithfulness
    groundedness = 0.0 if ev.groundedness is None else ev.groundedness
    return (0 if contradicts else 1, faithfulness, groundedness, s.request)


def still_firing(alerts: Sequence[tuple[int, Alert]]) -> str:
    """One line naming the alerts that fired and did not resolve, with the request (0-based
    in ``alerts``) that fired each, per route."""
    firing: dict[tuple[str | None, str], int] = {}
    for request, alert in alerts:
        key = (alert.route, alert.score)
        if alert.kind == "fired":
            firing[key] = request
        else:
            firing.pop(key, None)
    if not firing:
        return "No alert is firing at the end" + (": every one resolved." if alerts else ".")
    routes: dict[str | None, list[str]] = {}
    for (route, score), request in firing.items():
        routes.setdefault(route, []).append(f"{score} (since request {request + 1})")
    parts = [
        ", ".join(names) + (f", on route {route!r}" if route is not None else ", on all traffic")
        for route, names in routes.items()
    ]
    return "Still firing at the end: " + "; ".join(parts) + "."


def summary(results: Sequence[Scored], drift_at: int, sampled: int, requests: int) -> list[str]:
    """The final table: overall, before and after the drift, plus the worst answers."""
    lines = []
    phases: list[tuple[str, Callable[[Scored], bool]]] = [
        ("all", lambda s: True),
        (f"before drift (1-{drift_at})", lambda s: s.request < drift_at),
        (f"after drift ({drift_at + 1}-{requests})", lambda s: s.request >= drift_at),
    ]
    header = (
        f"{'':<24}{'scored':>7}{'faithful.':>10}{'grounded.':>10}{'halluc.':>9}  labels / verdicts"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for name, keep in phases:
        sel = [s for s in results if keep(s)]
        evs = [s.evaluation for s in sel]
        with_verdict = [
            e for e in evs if e.label in ("grounded", "hallucinated", "insufficient_context")
        ]
        rate = (
            sum(e.label == "hallucinated" for e in with_verdict) / len(with_verdict)
            if with_verdict
            else None
        )
        labels = Counter(e.label for e in evs)
        verdicts: Counter[str] = Counter()
        for e in evs:
            verdicts.update({k: v for k, v in e.verdict_counts.items() if v})
        mix = ", ".join(f"{k} {v}" for k, v in labels.most_common())
        vmix = ", ".join(f"{k} {v}" for k, v in verdicts.most_common())
        lines.append(
            f"{name:<24}{len(evs):>7}{_fmt(_mean([e.faithfulness for e in evs])):>10}"
            f"{_fmt(_mean([e.groundedness for e in evs])):>10}{_fmt(rate, pct=True):>9}  "
            f"{mix}"
        )
        lines.append(f"{'':<60}claims: {vmix}")
    lines.append(f"sampled {sampled} of {requests} requests, scored {len(results)}")
    worst = sorted(
        (s for s in results if s.evaluation.label == "hallucinated"),
        key=_badness,
    )[:3]
    if worst:
        lines.append("")
        lines.append("Worst answers:")
        for s in worst:
            ev = s.evaluation
            lines.append(
                f"  request {s.request + 1}  groundedness {_fmt(ev.groundedness)}  "
                f"faithfulness {_fmt(ev.faithfulness)}"
            )
            lines.append(f"    Q: {s.question}")
            lines.append(f"    A: {s.answer}")
            for claim in ev.claims:
                if claim.verdict in ("unsupported", "contradicted"):
                    lines.append(f"    - {claim.verdict}: {claim.text}")
    return lines


# --------------------------------------------------------------------------------------------
# The command


def run(args: argparse.Namespace) -> int:
    if args.requests < 1:
        print("--requests must be at least 1", file=sys.stderr)
        return 2
    if not 0.0 < args.sample_rate <= 1.0:
        print("--sample-rate must be in (0, 1]", file=sys.stderr)
        return 2
    if args.prometheus_port is not None and not all(
        map(_importable, ("opentelemetry.exporter.prometheus", "prometheus_client"))
    ):
        # Before anything runs, as serve does: a flag that cannot work is a usage error.
        print(f"groundwatch demo: error: {_PROMETHEUS_HINT}", file=sys.stderr)
        return 2
    missing = [name for module, name in _DEMO_MODULES if not _importable(module)]
    if missing:
        print(
            f"groundwatch demo needs {', '.join(missing)}. From a clone of the repository:\n"
            f"    {DEMO_INSTALL}",
            file=sys.stderr,
        )
        return 2
    from groundwatch_langchain import GroundwatchCallbackHandler

    from ..judging.judges import LocalJudge
    from ..runtime.monitor import Monitor
    from ..runtime.sampling import RatioSampler

    started = time.perf_counter()
    requests, rate, seed = args.requests, args.sample_rate, args.seed
    drift_at = max(1, int(DRIFT_AT * requests))
    console = Console(requests)
    tel = setup_telemetry(seed, args.prometheus_port, args.prometheus_host)
    for note in tel.notes:
        console.line(note)

    # Demo tuning: a short run needs a short warm-up and a lower in-control run length (about
    # one false alarm per 500 evaluations instead of the production default's one per 20,000).
    expected_before = drift_at * rate
    detector = DropDetector(
        warmup=int(min(50, max(8, 0.6 * expected_before))),
        target_arl=500,
        mean_target_arl=500,
        floor_window=max(5, min(30, int(expected_before // 2))),
    )
    trace_index: dict[int, int] = {}
    hook = AlertingHook(detector, on_alert=[])
    collector = Collector(console, hook, trace_index)
    hook.sinks = [
        OTelAlertEmitter(logger_provider=tel.logger_provider, meter_provider=tel.meter_provider),
        collector.print_alert,
    ]
    monitor = Monitor(
        judge=LocalJudge(),
        sampler=RatioSampler(rate),
        tracer_provider=tel.tracer_provider,
        meter_provider=tel.meter_provider,
        logger_provider=tel.logger_provider,
        on_result=collector,
        route=ROUTE,
        shutdown_on_exit=False,
    )
    script = Script(requests=requests, seed=seed, drift_at=drift_at)
    chain = build_chain(script)
    handler = GroundwatchCallbackHandler(monitor, route=ROUTE)
    tracer = tel.tracer_provider.get_tracer("groundwatch.demo")
    rng = random.Random(seed)

    console.line(
        f"groundwatch demo: {requests} requests through a LangChain RAG chain, "
        f"{rate:.0%} sampled, local judge in the background; "
        f"the model starts drifting after request {drift_at}."
    )

    def sampled() -> int:
        decisions, _ = monitor.stats.snapshot()
        return sum(n for (decision, _), n in decisions.items() if decision == "sampled")

    for i in range(requests):
        _, question = rng.choice(data.QUESTIONS)
        with tracer.start_as_current_span("help-centre.request") as span:
            trace_id = span.get_span_context().trace_id
            trace_index[trace_id] = i
            chain.invoke(question, config={"callbacks": [handler]})
        console.progress(i + 1, sampled(), len(collector.results))
    flushed = monitor.force_flush(timeout_millis=60_000)
    console.progress(requests, sampled(), len(collector.results), final=True)
    console.end_progress()
    if not flushed:
        console.line("(some evaluations did not finish within 60 s)")

    results = sorted(collector.results, key=lambda s: s.request)
    print()
    for line in summary(results, drift_at, sampled(), requests):
        print(line)
    fired = [(i, a) for i, a in collector.alerts if a.kind == "fired"]
    print()
    if fired:
        i, first = fired[0]
        print(
            f"Drift began after request {drift_at}; the first alert fired at request {i + 1} "
            f"({first.score}, {first.method})."
        )
    else:
        print(f"Drift began after request {drift_at}; no alert fired in this run.")
    if fired:
        print(still_firing(collector.alerts))

    monitor.shutdown(timeout_millis=10_000)
    n_spans = len(tel.spans.get_finished_spans())
    events = Counter(r.log_record.event_name for r in tel.logs.get_finished_logs())
    if args.prometheus_port is not None and args.linger > 0:
        print(f"Serving Prometheus metrics for {args.linger:.0f} more seconds...")
        time.sleep(args.linger)
    tel.tracer_provider.shutdown()
    tel.logger_provider.shutdown()
    tel.meter_provider.shutdown()
    elapsed = time.perf_counter() - started
    destinations = [*tel.destinations, *([tel.otlp.report()] if tel.otlp else [])]
    print(
        f"Telemetry: {n_spans} spans, {events.get('gen_ai.evaluation.result', 0)} "
        f"gen_ai.evaluation.result events, {events.get('groundwatch.alert', 0)} groundwatch.alert "
        f"events and the groundwatch.* metrics went to: {'; '.join(destinations)}."
    )
    if len(destinations) == 1:
        print(
            "  Send them elsewhere: OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 "
            "(a Collector, see examples/otel-collector.yaml) or --prometheus-port 9464."
        )
    print(f"Done in {elapsed:.1f} s.")
    return 1 if tel.otlp and sum(tel.otlp.failed.values()) else 0


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False
