"""The per-monitor counts the observable instruments read (:class:`Stats`)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Protocol

from ._rate_counters import RATE_WIDTH, AuditSums, KeyedSums


class EscalationCounts(Protocol):
    """A judge that sends some answers on to a second judge and counts it (``CascadeJudge``)."""

    name: str
    escalated: int
    total: int


class Stats:
    """Per-monitor counts read by the observable instruments.

    The request path only increments plain integers under a lock (about 0.1 us), instead of a
    synchronous OpenTelemetry counter (about 10 us per ``add`` on this machine); the SDK reads
    the totals when it collects.
    """

    def __init__(self, queue_size: Callable[[], int]) -> None:
        self.lock = threading.Lock()
        self.decisions: Counter[tuple[str, str | None, str | None]] = Counter()
        """``(decision, error.type, route) -> count``: read by the ``groundwatch.records``
        counter."""
        self.dropped: Counter[str] = Counter()
        self.queue_size = queue_size
        self.escalating: list[EscalationCounts] = []
        """Judges that count their escalations (a ``CascadeJudge``), read by the
        ``groundwatch.judge.escalations`` counter."""
        self.feedback: Counter[tuple[str | None, str | None, str | None, str | None]] = Counter()
        """``(judge label, person's label, route, error.type) -> count``: ``Monitor.feedback``
        calls, read by the ``groundwatch.feedback`` counter."""
        self.feedback_routes: frozenset[str | None] = frozenset()
        """Routes with scored verdicts, whose label pairs ``groundwatch.feedback`` publishes at
        0 once feedback is in use (set by the monitor's verdict memory)."""
        self.rates = KeyedSums(RATE_WIDTH)
        """The ``groundwatch.rate.*`` sums over judged answers (added per batch)."""
        self.audit = AuditSums()
        """The ``groundwatch.audit.*`` sums of the labels of audited answers."""

    def count_decision(
        self, decision: str, error_type: str | None = None, route: str | None = None
    ) -> None:
        with self.lock:
            self.decisions[(decision, error_type, route)] += 1

    def count_dropped(self, error_type: str, n: int = 1) -> None:
        if n:
            with self.lock:
                self.dropped[error_type] += n

    def count_feedback(
        self,
        judge: str | None,
        human: str | None,
        route: str | None,
        error_type: str | None = None,
    ) -> None:
        with self.lock:
            self.feedback[(judge, human, route, error_type)] += 1

    def reinit_after_fork(self) -> None:
        self.lock = threading.Lock()
        self.rates.reinit_after_fork()
        self.audit.reinit_after_fork()

    def snapshot(self) -> tuple[dict[tuple[str, str | None], int], dict[str, int]]:
        """Copies of the decision counts (``(decision, error.type)``, every route together)
        and the dropped counts (for tests and diagnostics)."""
        decisions: Counter[tuple[str, str | None]] = Counter()
        with self.lock:
            for (decision, error_type, _route), n in self.decisions.items():
                decisions[(decision, error_type)] += n
            return dict(decisions), dict(self.dropped)

    def __repr__(self) -> str:
        """The counts, for a person at a prompt or in a log line: ``Stats(records: 4 (sampled
        3, error/invalid_input 1); dropped: 2 (shutdown 2); queue: 0)``."""
        decisions, dropped = self.snapshot()
        records = {
            f"{decision}/{error_type}" if error_type else decision: n
            for (decision, error_type), n in decisions.items()
        }
        try:
            queue = str(self.queue_size())
        except Exception:  # a repr must not raise
            queue = "?"
        return (
            f"Stats(records: {_counts(records, 'none yet')}; dropped: {_counts(dropped, 'none')}; "
            f"queue: {queue})"
        )


def _counts(counts: Mapping[str, int], empty: str) -> str:
    """``4 (sampled 3, error/invalid_input 1)``: the total, then each count, largest first."""
    if not counts:
        return empty
    parts = ", ".join(
        f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"{sum(counts.values())} ({parts})"
