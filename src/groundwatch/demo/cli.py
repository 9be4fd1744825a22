"""``groundwatch demo``: simulated production traffic through a real LangChain RAG chain.

A help-centre chain (in-memory vector store over the bundled corpus, English and Chinese
questions, a prompt, a scripted chat model) answers a stream of customer questions with the
``groundwatch_langchain`` callback attached. A share of the traffic is sampled and scored in the
background by the local judge; partway through the run the scripted model starts to drift from
the retrieved text, and the drop detector fires. No API key, no server, no network.

The chain is :mod:`.chain` (LangChain is imported there, inside the command, never by the
core package); the exporters are :mod:`.telemetry`. This module holds the command: its
options, the run, and what it prints (progress, the summary table, the alerts).
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..alerts import Alert, AlertingHook, DropDetector, OTelAlertEmitter
from ..types import Evaluation, RagRecord
from . import data, simulated_audit
from .chain import Script, build_chain
from .telemetry import DEFAULT_PROMETHEUS_HOST, PROMETHEUS_HINT, setup_telemetry

if TYPE_CHECKING:
    from ..runtime.monitor import Monitor

DEFAULT_REQUESTS = 300
DEFAULT_SAMPLE_RATE = 0.5
DEFAULT_SEED = 7
DRIFT_AT = 0.45
"""The scripted model starts drifting after this share of the requests."""
ROUTE = "help-centre"
DEFAULT_SCRAPE_WAIT = 30.0
"""Seconds the demo waits for Prometheus's first scrape (``increase()`` cannot see what a
counter counted before its first sample)."""

DEMO_INSTALL = 'pip install -e ".[demo]" -e integrations/langchain'
"""The demo's install line from a clone."""
_DEMO_MODULES = (
    ("langchain_core", "langchain-core"),
    ("groundwatch_langchain", "groundwatch-langchain"),
    ("numpy", "numpy (the vector store's similarity search)"),
    ("opentelemetry.sdk", "opentelemetry-sdk"),
    # The Chinese tagger changes how the local judge reads the demo's Chinese answers: required,
    # so that the demo prints the same on every install.
    ("rjieba", "rjieba (the zh extra)"),
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
        "--audit",
        type=int,
        default=simulated_audit.DEFAULT_AUDIT,
        metavar="N",
        help="about N scored answers are audited (chosen by trace id, as Monitor(audit_rate=) "
        'does) and a simulated reviewer labels them through monitor.feedback(source="audit"), '
        "which gives the hallucination rate's estimate (%(default)s; 0: no audit, the rate is "
        "unknown)",
    )
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
        "--wait-for-scrape",
        type=float,
        default=DEFAULT_SCRAPE_WAIT,
        metavar="SECONDS",
        help="with --prometheus-port: wait up to this long for the first scrape before the "
        "traffic starts, so that Prometheus sees every counter from 0 (%(default)s)",
    )
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        help="with --prometheus-port: keep serving this many seconds after the run",
    )
    parser.set_defaults(run=run)


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
    audited: bool = False
    """In the random audit, and labelled by the simulated reviewer."""


Reviewer = Callable[[RagRecord, Evaluation, int], bool]
"""Labels an audited answer (record, evaluation, request) and says whether it did."""


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
        self.reviewer: Reviewer | None = None

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        index = self.trace_index.get(record.trace_id or 0, -1)
        audited = self.reviewer is not None and self.reviewer(record, evaluation, index)
        with self.lock:
            self.results.append(
                Scored(index, record.question or "", record.answer, evaluation, audited)
            )
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


def summary(
    results: Sequence[Scored],
    drift_at: int,
    sampled: int,
    requests: int,
    rate_block: Sequence[str] = (),
) -> list[str]:
    """The final table: overall, before and after the drift, the ``rate_block`` lines, the
    worst answers."""
    lines = []
    phases: list[tuple[str, Callable[[Scored], bool]]] = [
        ("all", lambda s: True),
        (f"before drift (1-{drift_at})", lambda s: s.request < drift_at),
        (f"after drift ({drift_at + 1}-{requests})", lambda s: s.request >= drift_at),
    ]
    header = (
        f"{'':<24}{'scored':>7}{'faithful.':>10}{'grounded.':>10}{'flagged':>9}  labels / verdicts"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for name, keep in phases:
        sel = [s for s in results if keep(s)]
        evs = [s.evaluation for s in sel]
        judged = [e for e in evs if e.label != "error"]
        # The flag share: the judge's verdicts over the judged answers, not the rate.
        flag_share = (
            sum(e.label == "hallucinated" for e in judged) / len(judged) if judged else None
        )
        labels = Counter(e.label for e in evs)
        verdicts: Counter[str] = Counter()
        for e in evs:
            verdicts.update({k: v for k, v in e.verdict_counts.items() if v})
        mix = ", ".join(f"{k} {v}" for k, v in labels.most_common())
        vmix = ", ".join(f"{k} {v}" for k, v in verdicts.most_common())
        lines.append(
            f"{name:<24}{len(evs):>7}{_fmt(_mean([e.faithfulness for e in evs])):>10}"
            f"{_fmt(_mean([e.groundedness for e in evs])):>10}{_fmt(flag_share, pct=True):>9}  "
            f"{mix}"
        )
        lines.append(f"{'':<60}claims: {vmix}")
    lines.append(f"sampled {sampled} of {requests} requests, scored {len(results)}")
    if rate_block:
        lines += ["", *rate_block]
    worst = sorted(
        (s for s in results if s.evaluation.label == "hallucinated"),
        key=_badness,
    )[:2]
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
    # A namespace built by hand (a script, a test) may leave --audit out: the default then.
    audit = getattr(args, "audit", simulated_audit.DEFAULT_AUDIT)
    if audit < 0:
        print("--audit must be at least 0", file=sys.stderr)
        return 2
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
        print(f"groundwatch demo: error: {PROMETHEUS_HINT}", file=sys.stderr)
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
    audit_rate = simulated_audit.audit_rate(audit, requests, rate) if audit else None
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
    judge = LocalJudge()
    monitor = Monitor(
        judge=judge,
        sampler=RatioSampler(rate),
        tracer_provider=tel.tracer_provider,
        meter_provider=tel.meter_provider,
        logger_provider=tel.logger_provider,
        on_result=collector,
        route=ROUTE,
        audit_rate=audit_rate,
        shutdown_on_exit=False,
    )
    script = Script(requests=requests, seed=seed, drift_at=drift_at)

    def review(record: RagRecord, evaluation: Evaluation, index: int) -> bool:
        """The simulated reviewer: labels each audited answer with the truth, through the
        same call a person's label takes."""
        trace_id = record.trace_id
        if evaluation.label == "error" or index < 0 or not trace_id:
            return False
        if not monitor.audited(trace_id):
            return False
        label = "hallucinated" if script.drifted[index] else "grounded"
        monitor.feedback(label=label, trace_id=trace_id, source="audit")
        return True

    if audit_rate:
        collector.reviewer = review
    if tel.scraped is not None:
        _wait_for_scrape(
            monitor, judge.name, tel.scraped, getattr(args, "wait_for_scrape", 0.0), console
        )
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
    reviewed = [
        simulated_audit.ReviewedAnswer(s.evaluation, script.drifted[s.request], s.audited)
        for s in results
        if s.request >= 0
    ]
    rate_block = simulated_audit.rate_lines(reviewed)
    for line in summary(results, drift_at, sampled(), requests, rate_block):
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


def _wait_for_scrape(
    monitor: Monitor, judge: str, scraped: threading.Event, seconds: float, console: Console
) -> None:
    """Publish the route's rate and audit counters at 0, then wait for Prometheus's first
    scrape (up to ``seconds``), so that ``increase()`` sees everything the run counts."""
    from ..telemetry._rate_counters import rate_key

    key = rate_key(ROUTE, judge)
    monitor.stats.rates.expect(key)
    monitor.stats.audit.expect(key)
    if seconds <= 0 or scraped.is_set():
        return
    console.line(f"Waiting up to {seconds:.0f} s for Prometheus's first scrape...")
    if not scraped.wait(seconds):
        console.line("  no scrape yet: starting; Prometheus misses what comes before its first")


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False
