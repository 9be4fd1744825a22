"""Retry timing and the circuit breaker's state machine (with a fake clock)."""

from __future__ import annotations

import email.utils
import random

from groundwatch.judging.judges._resilience import (
    CircuitBreaker,
    backoff_seconds,
    retry_after_seconds,
)


def test_backoff_grows_is_capped_and_jittered() -> None:
    rng = random.Random(1)
    for attempt, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (10, 8.0)]:
        delays = [backoff_seconds(attempt, 0.5, 8.0, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 4  # spread, not a fixed delay


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    wait = retry_after_seconds({"retry-after": date}, now=now)
    assert wait is not None and 11 <= wait <= 12
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None


def test_breaker_state_machine() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=3, recovery_seconds=10, clock=lambda: now[0])
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_success()  # success resets the count
    for _ in range(3):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    assert breaker.retry_in() == 10
    now[0] = 10.0
    assert breaker.state == "half_open"
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # only one probe at a time
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    now[0] = 20.0
    assert breaker.allow()
    breaker.release()  # the probe told us nothing (e.g. HTTP 400): another may go
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed" and breaker.allow()
