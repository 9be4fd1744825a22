"""Retry timing and a circuit breaker for the LLM judge's calls."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping


def backoff_seconds(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random.

    ``attempt`` counts from 0 (the delay after the first failure). The random half spreads the
    retries of many concurrent evaluations so they do not hit a recovering endpoint together.
    """
    ceiling = min(cap, base * 2.0**attempt)
    return ceiling / 2 + float(rng.uniform(0, ceiling / 2))


def retry_after_seconds(
    headers: Mapping[str, str] | None, now: float | None = None
) -> float | None:
    """The server's requested wait from ``retry-after-ms`` or ``retry-after`` (seconds or date)."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class CircuitBreaker:
    """Fails fast while an endpoint is down, and lets one probe through to test recovery.

    Closed: calls go through; ``failure_threshold`` consecutive failures open it. Open: calls are
    refused until ``recovery_seconds`` have passed. Half-open: one call (the probe) goes through;
    success closes the breaker, failure opens it again for another ``recovery_seconds``.

    Not thread-safe: the judge uses it from its own event loop only.
    """

    def __init__(
        self,
        failure_threshold: int,
        recovery_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.recovery_seconds = recovery_seconds
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half_open``."""
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.recovery_seconds:
            return "half_open"
        return "open"

    def retry_in(self) -> float:
        """Seconds until the breaker lets a probe through (0 when it would now)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self.recovery_seconds - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        """Whether a call may go out now; in half-open state, only the first caller (the probe)."""
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self._probing:
            self._probing = True
            return True
        return False

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self) -> None:
        self._failures += 1
        if self._probing or self._failures >= self.failure_threshold:
            self._opened_at = self._clock()
        self._probing = False

    def release(self) -> None:
        """The probe ended without telling us anything about the endpoint (e.g. a 400)."""
        self._probing = False
