"""The guard around every entry point from the host: log (rate-limited), count, continue.

groundwatch runs inside other people's applications, so an exception of ours must never reach
them. ``GROUNDWATCH_RAISE_INTERNAL_ERRORS=1`` re-raises instead (our own test suite sets it, so
our bugs fail our tests rather than hide in a log line). Logfire's ``handle_internal_errors``
does the same under pytest; we make it explicit, because our users' test suites are hosts too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter

from ._config import raise_internal_errors

_logger = logging.getLogger("groundwatch")

LOG_INTERVAL_S = 60.0
"""At most one log line per place of failure per minute: a bug on a hot path must not flood."""

_lock = threading.Lock()
_last_logged: dict[str, float] = {}
errors: Counter[tuple[str, str]] = Counter()
"""``(where, exception type) -> count``; read by the ``groundwatch.errors`` metric."""


def internal_error(where: str, exc: BaseException, *, reraise: bool = True) -> None:
    """Record a bug of ours caught at ``where``: count, log rate-limited, and re-raise it when
    ``GROUNDWATCH_RAISE_INTERNAL_ERRORS`` is set and ``reraise`` (entry points from the host; the
    worker passes ``False``, there is nobody to raise to, and tests read :data:`errors`)."""
    _count_and_log(where, exc, "groundwatch internal error in %s (logged at most once a minute)")
    if reraise and raise_internal_errors():
        raise exc


def user_error(where: str, exc: BaseException) -> None:
    """Record a failure of the user's code (an ``on_result`` callback, a custom sampler): count
    and log rate-limited, never raise."""
    _count_and_log(where, exc, "%s raised (logged at most once a minute)")


def user_fault(where: str, error_type: str, message: str, *args: object) -> None:
    """Record a fault of the user's code that raised nothing (an async judge blocking the
    worker's event loop): count ``(where, error_type)`` and log ``message % args`` as a
    warning, rate-limited."""
    if _count(where, error_type):
        _logger.warning(message, *args)


def bad_input(where: str, exc: BaseException) -> None:
    """Record the caller's bad input (the caller counts it as ``invalid_input``): a warning,
    rate-limited, that says what was wrong; not counted in :data:`errors`, which are faults of
    code, and never raised: the caller's request goes on."""
    if _due(f"invalid input:{where}"):
        _logger.warning(
            "groundwatch: invalid input to %s, counted as invalid_input (logged at most once a "
            "minute): %s: %s",
            where,
            type(exc).__name__,
            exc,
        )


def warning(where: str, message: str, *args: object) -> None:
    """Log ``message % args`` as a warning at most once a minute per ``where`` (an outside
    fault the caller counts itself, such as a lost connection to Redis)."""
    if _due(where):
        _logger.warning(message, *args)


def error_counts() -> list[tuple[tuple[str, str], int]]:
    """A snapshot of :data:`errors` taken under the lock (the ``groundwatch.errors`` metric's
    callback reads it on the metric reader's thread while other threads count)."""
    with _lock:
        return list(errors.items())


def _count_and_log(where: str, exc: BaseException, message: str) -> None:
    if _count(where, type(exc).__name__):
        _logger.warning(message, where, exc_info=(type(exc), exc, exc.__traceback__))


def _count(where: str, error_type: str) -> bool:
    """Count one failure at ``where``; whether it is due to be logged."""
    with _lock:
        errors[(where, error_type)] += 1
    return _due(where)


def _due(where: str) -> bool:
    now = time.monotonic()
    with _lock:
        last = _last_logged.get(where)
        if last is not None and now - last < LOG_INTERVAL_S:
            return False
        _last_logged[where] = now
        return True


def reset_after_fork() -> None:
    """A fork may happen while another thread holds the lock; the child gets a fresh one."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=reset_after_fork)
