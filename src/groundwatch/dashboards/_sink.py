"""The part every dashboard sink shares: the monitor's side (``on_result``, feedback, flush and
close with the monitor) in front of one :class:`~._delivery.Delivery`.

A sink subclasses :class:`DashboardSink` and writes two methods, each turning what the monitor
hands it into :class:`~._delivery.Write` objects, cheaply (they run on the monitor's worker
thread or the feedback thread; every request happens on the delivery thread):

- :meth:`DashboardSink.evaluation_writes` for a scored record;
- :meth:`DashboardSink.feedback_writes` for a person's feedback (``Monitor.feedback``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._shared import guard
from ..telemetry._emitter import scrub_secrets
from ._delivery import (
    Delivery,
    Exporter,
    Write,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..runtime.feedback import Pending
    from ..types import Evaluation, RagRecord
    from ._delivery import DeliverySettings

CONTENT_MAX_CHARS = 2000
"""The longest explanation a sink writes (claims quoted with content capture on are capped)."""


class DashboardSink:
    """A result sink that writes groundwatch's verdicts into a dashboard as its own objects.

    Use it as (or among) a monitor's ``on_result``: the monitor hands it its content settings,
    its feedback, and flushes and closes it with itself. ``serve`` and ``worker`` take it by
    name (``--sink phoenix``). Nothing it does raises into the app or waits on the caller's
    thread; what it cannot deliver is counted in ``groundwatch.errors`` under its
    :attr:`component`.
    """

    component = "dashboard"
    """The sink's name in ``groundwatch.errors{groundwatch.component}`` and its thread's."""

    def __init__(self, exporter: Exporter, **delivery: Unpack[DeliverySettings]) -> None:
        self.delivery = Delivery(exporter, **delivery)
        self.capture_content = False
        """Whether explanations may quote the answer's claims and a person's comment (set by
        the monitor: its ``capture_content``)."""
        self.redact: Callable[[str], str] | None = None
        self._audited: Callable[[RagRecord, Evaluation], bool] | None = None

    # --- the monitor ---------------------------------------------------------------------------

    def bind_monitor(
        self,
        *,
        capture_content: bool,
        redact: Callable[[str], str] | None,
        audited: Callable[[RagRecord, Evaluation], bool] | None = None,
        audit_rate: float = 0.0,
    ) -> None:
        """Called by the monitor (or ``worker``) that runs this sink: its content settings
        and its audit."""
        self.capture_content = capture_content
        self.redact = redact
        self._audited = audited

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        """The ``on_result`` callback (the monitor's worker thread): queue this evaluation's
        writes; never waits, never raises."""
        try:
            writes = self.evaluation_writes(record, evaluation)
        except Exception as exc:
            guard.internal_error(self.component, exc)
            return
        for write in writes:
            self.delivery.offer(write)

    def on_feedback(self, feedback: Pending) -> None:
        """A person's feedback (``Monitor.feedback``, on the monitor's feedback thread): queue
        its writes; never waits, never raises."""
        try:
            writes = self.feedback_writes(feedback)
        except Exception as exc:
            guard.internal_error(self.component, exc, reraise=False)
            return
        for write in writes:
            self.delivery.offer(write)

    def audited(self, record: RagRecord, evaluation: Evaluation) -> bool:
        """Whether the evaluation is in the monitor's random audit (``False`` unbound)."""
        return bool(self._audited is not None and self._audited(record, evaluation))

    def content(self, text: str) -> str:
        """``text`` as it may leave the process: the monitor's redact hook, secrets scrubbed,
        capped. Call only with content capture on."""
        if self.redact is not None:
            text = self.redact(text)
        text = scrub_secrets(text)
        if len(text) > CONTENT_MAX_CHARS:
            text = text[: CONTENT_MAX_CHARS - 1] + "…"
        return text

    # --- what a sink writes (subclasses) --------------------------------------------------------

    def evaluation_writes(self, record: RagRecord, evaluation: Evaluation) -> list[Write]:
        """The writes of one scored record (worker thread: build values, send nothing)."""
        raise NotImplementedError

    def feedback_writes(self, feedback: Pending) -> list[Write]:
        """The writes of one feedback (feedback thread: build values, send nothing)."""
        raise NotImplementedError

    # --- lifecycle -----------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """What ``Monitor.force_flush`` calls: :meth:`force_flush` in seconds."""
        return self.force_flush(int(timeout_s * 1000))

    def close(self, timeout_s: float) -> bool:
        """What ``Monitor.shutdown`` (and ``worker``) call: :meth:`shutdown` in seconds."""
        return self.shutdown(int(timeout_s * 1000))

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send what is queued; ``True`` when all of it is settled within the deadline."""
        try:
            return self.delivery.force_flush(timeout_millis)
        except Exception as exc:
            guard.internal_error(self.component, exc)
            return False

    def shutdown(self, timeout_millis: int = 30_000) -> bool:
        """Send what is queued within the deadline, count what is not, stop the thread."""
        try:
            return self.delivery.shutdown(timeout_millis)
        except Exception as exc:
            guard.internal_error(self.component, exc)
            return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
