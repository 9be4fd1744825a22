"""Spans in, finished traces out: bounded memory, nothing dropped uncounted.

A trace is complete when its root span (no parent) has arrived, which OTLP only sends once
it has ended, and no span of the trace arrived for the quiet period (its children may be
batched later by another exporter or Collector). A trace whose root never arrives (it lives
in a service that exports elsewhere) is assembled under its earliest stored span after the
orphan timeout.

Every received span is counted once on arrival (``accepted`` or ``late`` here; ``rejected``
and ``own`` before it gets here); stored spans lost later to a cap are counted again as
``evicted``, and an evicted trace in ``groundwatch.serve.traces{evicted}``. Only the root,
the retriever spans and the LLM spans are stored (what extraction reads); the others keep
the trace alive. Caps: ``max_traces`` pending traces (the trace quiet the longest is evicted
first), ``max_spans`` stored spans per trace (its oldest are evicted first; the root is held
apart and never evicted). Spans arriving for a trace assembled recently (the ids of the last
``max_traces`` are kept) are counted ``late``.

Sampling happens at intake: ``admit`` is asked once per trace, on its first span (the ratio
part of the monitor's sampler, :mod:`._intake`). A trace it refuses stores nothing: its id is
remembered (the last ``max_traces`` refused ids) so that its later spans are dropped too,
counted ``not_sampled`` (spans) and once in ``groundwatch.serve.traces{not_sampled}``. A span
of a refused trace whose id was forgotten is decided again, with the same answer.

GenAI content received as log records (``gen_ai.user.message``, ``gen_ai.choice``) joins its
trace like a span (it may come first: an SDK exports logs as they are emitted, the span when it
ends), is held in the pending trace (the same caps, counted in ``log_records``) and, when the
trace completes, goes onto its span as a span event, where the extractors read it.

Runs on the server's event loop only: no locks, except around the counters, which the
metrics reader reads from its own thread.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

from ._conventions import is_llm, is_retriever, is_tool, prune
from ._otlp import LogEvent, SpanData

ACCEPTED = "accepted"
REJECTED = "rejected"
OWN = "own"
LATE = "late"
EVICTED = "evicted"
NOT_SAMPLED = "not_sampled"
IGNORED = "ignored"
UNMATCHED = "unmatched"
TRACE_INTERACTION = "interaction"
TRACE_NO_INTERACTION = "no_interaction"
TRACE_EVICTED = "evicted"
TRACE_NOT_SAMPLED = "not_sampled"


class _Pending:
    __slots__ = ("last", "logs", "parents", "root", "route", "spans", "top")

    def __init__(self, now: float) -> None:
        # span id -> parent id of the spans not stored (chain steps), with keep_parents only.
        self.parents: dict[bytes, bytes] = {}
        # A list, not a deque(maxlen): an empty deque costs 600 bytes, a pending trace holds
        # two or three spans, and eviction (at the cap) is rare.
        self.spans: list[SpanData] = []
        self.logs: list[LogEvent] = []  # GenAI content received as log records
        self.root: SpanData | None = None
        self.top: SpanData | None = None
        self.route: str | None = None
        self.last = now


class Counts:
    """Span, log record and trace outcomes (``groundwatch.serve.spans``, ``.log_records``,
    ``.traces``), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: Counter[str] = Counter()
        self.logs: Counter[str] = Counter()
        self.traces: Counter[str] = Counter()

    def add_spans(self, outcome: str, n: int = 1) -> None:
        if n:
            with self.lock:
                self.spans[outcome] += n

    def add_logs(self, outcome: str, n: int = 1) -> None:
        if n:
            with self.lock:
                self.logs[outcome] += n

    def add_traces(self, outcome: str, n: int = 1) -> None:
        if n:
            with self.lock:
                self.traces[outcome] += n

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        """Span outcomes and trace outcomes."""
        with self.lock:
            return dict(self.spans), dict(self.traces)

    def log_snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.logs)


FinishedTrace = tuple[SpanData, list[SpanData], dict[bytes, bytes]]
"""The span the interaction hangs under (the root, or the earliest stored span of an orphan),
the trace's stored spans (the root included), and the parent links of its spans not stored
(``span id -> parent id``; empty unless the assembler keeps them)."""


class TraceAssembler:
    """Groups received spans by trace until each trace is complete.

    Args:
        quiet_s: seconds without a new span, after the root arrived, that complete a trace.
        orphan_s: seconds without a new span that complete a trace with no root.
        max_traces: pending traces held; past it the trace quiet the longest is evicted.
        max_spans: stored spans per trace; past it the trace's oldest span is evicted.
        counts: where outcomes are counted.
        admit: asked on a trace's first span whether the trace may be scored (everything is
            when ``None``); a refused trace keeps no spans.
        keep_parents: keep the parent link of every span not stored (its span id and parent
            id, up to ``max_spans`` a trace), for the tool a retriever ran in and pair mode's
            nearest common ancestor (the service sets it).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        *,
        quiet_s: float,
        orphan_s: float,
        max_traces: int,
        max_spans: int,
        counts: Counts | None = None,
        admit: Callable[[SpanData | LogEvent], bool] | None = None,
        keep_parents: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self.orphan_s = max(orphan_s, quiet_s)
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.counts = counts if counts is not None else Counts()
        self.admit = admit
        self.keep_parents = keep_parents
        self.clock = clock
        # Ordered by last activity: the front is the trace quiet the longest.
        self._pending: OrderedDict[bytes, _Pending] = OrderedDict()
        self._done: OrderedDict[bytes, None] = OrderedDict()
        self._refused: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def _open(self, first: SpanData | LogEvent, now: float) -> _Pending | str:
        """A new pending trace for ``first`` (not pending yet), or why there is none: ``late``
        (assembled recently) or ``not_sampled`` (refused, now or before)."""
        trace_id = first.trace_id
        if trace_id in self._done:
            return LATE
        refused = self._refused
        if trace_id in refused:
            return NOT_SAMPLED
        if self.admit is not None and not self.admit(first):
            refused[trace_id] = None
            if len(refused) > self.max_traces:
                refused.popitem(last=False)
            self.counts.add_traces(TRACE_NOT_SAMPLED)
            return NOT_SAMPLED
        pending = self._pending
        trace = pending[trace_id] = _Pending(now)
        if len(pending) > self.max_traces:
            _, old = pending.popitem(last=False)
            self.counts.add_spans(EVICTED, len(old.spans) + (old.root is not None))
            self.counts.add_logs(EVICTED, len(old.logs))
            self.counts.add_traces(TRACE_EVICTED)
        return trace

    def add(self, spans: Iterable[SpanData]) -> None:
        """Take one request's spans (counted ``accepted``, ``late``, ``not_sampled`` or
        ``evicted``)."""
        now = self.clock()
        pending = self._pending
        keep_parents = self.keep_parents
        accepted = evicted = late = not_sampled = 0
        for span in spans:
            trace_id = span.trace_id
            trace = pending.get(trace_id)
            if trace is None:
                opened = self._open(span, now)
                if isinstance(opened, str):
                    if opened == LATE:
                        late += 1
                    else:
                        not_sampled += 1
                    continue
                trace = opened
            else:
                trace.last = now
                pending.move_to_end(trace_id)
            accepted += 1
            if span.route is not None and trace.route is None:
                trace.route = span.route  # whichever span carries it, stored or not
            if not span.parent_id:
                prune(span, root=True)
                trace.root = span
                continue
            if not (span.attributes or span.events) or not (
                is_retriever(span) or is_llm(span) or is_tool(span)
            ):
                # A chain step between them: nothing extraction reads, but where it sits in
                # the tree tells which tool a retriever ran in, and pair mode's nearest common
                # ancestor (a stored span carries its own parent id).
                if keep_parents and len(trace.parents) < self.max_spans:
                    trace.parents[span.span_id] = span.parent_id
                continue
            prune(span, root=False)
            if len(trace.spans) == self.max_spans:
                del trace.spans[0]
                evicted += 1
            trace.spans.append(span)
            if trace.top is None or span.start_ns < trace.top.start_ns:
                trace.top = span
        self.counts.add_spans(ACCEPTED, accepted)
        self.counts.add_spans(EVICTED, evicted)
        self.counts.add_spans(LATE, late)
        self.counts.add_spans(NOT_SAMPLED, not_sampled)

    def add_events(self, events: Iterable[LogEvent]) -> None:
        """Take one request's GenAI log events, held for their spans until the trace
        completes (counted in ``log_records``: ``accepted``, ``late``, ``not_sampled``,
        ``evicted``). An event restarts its trace's quiet period, as a span does."""
        now = self.clock()
        pending = self._pending
        accepted = 0
        for event in events:
            trace = pending.get(event.trace_id)
            if trace is None:
                opened = self._open(event, now)
                if isinstance(opened, str):
                    self.counts.add_logs(opened)
                    continue
                trace = opened
            else:
                trace.last = now
                pending.move_to_end(event.trace_id)
            accepted += 1
            if len(trace.logs) == self.max_spans:
                del trace.logs[0]
                self.counts.add_logs(EVICTED)
            trace.logs.append(event)
        self.counts.add_logs(ACCEPTED, accepted)

    def _attach(self, logs: list[LogEvent], spans: list[SpanData]) -> None:
        """Each event onto its span, as a span event (``unmatched`` when the span is not
        stored: it never arrived, was evicted, or is no root, retriever or LLM span)."""
        by_id = {s.span_id: s for s in spans}
        unmatched = 0
        for event in logs:
            span = by_id.get(event.span_id)
            if span is None:
                unmatched += 1
            else:
                span.events.append((event.name, event.attributes))
        self.counts.add_logs(UNMATCHED, unmatched)

    def _finish(self, trace_id: bytes, trace: _Pending) -> FinishedTrace | None:
        self._done[trace_id] = None
        if len(self._done) > self.max_traces:
            self._done.popitem(last=False)
        spans = trace.spans
        top = trace.root if trace.root is not None else trace.top
        if top is None:
            self.counts.add_logs(UNMATCHED, len(trace.logs))
            self.counts.add_traces(TRACE_NO_INTERACTION)
            return None
        if top.route is None:
            top.route = trace.route
        if trace.root is not None:
            spans = [top, *spans]
        if trace.logs:
            self._attach(trace.logs, spans)
        return top, spans, trace.parents

    def due(self) -> list[FinishedTrace]:
        """The traces complete now, removed from the pending set."""
        now = self.clock()
        quiet_before = now - self.quiet_s
        orphan_before = now - self.orphan_s
        finished: list[FinishedTrace] = []
        ready: list[bytes] = []
        for trace_id, trace in self._pending.items():
            if trace.last > quiet_before:
                break  # everything after it arrived later still
            if trace.root is not None or trace.last <= orphan_before:
                ready.append(trace_id)
        for trace_id in ready:
            done = self._finish(trace_id, self._pending.pop(trace_id))
            if done is not None:
                finished.append(done)
        return finished

    def drain(self) -> list[FinishedTrace]:
        """Every pending trace, complete or not (at shutdown: score what can be scored)."""
        finished: list[FinishedTrace] = []
        while self._pending:
            trace_id, trace = self._pending.popitem(last=False)
            done = self._finish(trace_id, trace)
            if done is not None:
                finished.append(done)
        return finished
