"""What the framework integrations need from a monitor, stated once for all of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

    from .monitor import Monitor


class MonitorLike(Protocol):
    """The capture side of :class:`groundwatch.Monitor`: ``record`` and ``record_failure``.

    Integrations accept anything with these two methods (the real monitor, or a test double).
    """

    def record(
        self,
        *,
        question: str | None,
        contexts: Sequence[Any],
        answer: str,
        span_context: SpanContext | None = None,
        route: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        always_score: bool = False,
    ) -> None: ...

    def record_failure(self, error_type: str, *, route: str | None = None) -> None: ...


if TYPE_CHECKING:

    def _monitor_is_monitor_like(monitor: Monitor) -> MonitorLike:
        return monitor  # mypy checks that the real Monitor fits the protocol
