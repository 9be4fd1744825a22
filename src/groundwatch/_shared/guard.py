"""The guard around every entry point from the host: log (rate-limited), count, continue.

groundwatch runs inside other people's applications, so an exception of ours must never reach
them. ``GROUNDWATCH_RAISE_INTERNAL_ERRORS=1`` re-raises instead (our own test suite sets it, so
our bugs fail our tests rather than hide in a log line). Logfire's ``handle_internal_errors``
does the same under pytest; we make it explicit, because our users' test suites are hosts too.

The library's logger has a ``NullHandler``, so a log line reaches nobody in an app that set up
no logging. The first failure of each kind is therefore also said once per process as a
:class:`LossWarning` (:func:`say_once`): on stderr with Python's default set-up, where a person
sees it (docs/runtime.md, "When something is lost").
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from collections import Counter

from .config import raise_internal_errors

_logger = logging.getLogger("groundwatch")

LOG_INTERVAL_S = 60.0
"""At most one log line per place of failure per minute: a bug on a hot path must not flood."""

_lock = threading.Lock()
_last_logged: dict[str, float] = {}
errors: Counter[tuple[str, str]] = Counter()
"""``(where, exception type) -> count``; read by the ``groundwatch.errors`` metric."""


class LossWarning(UserWarning):
    """groundwatch lost something: records dropped (a full queue, the shutdown deadline, an
    unreachable queue), evaluations that failed, feedback or input it could not read, user code
    that raised.

    The first of each kind is said once per process (the counters keep counting every one):
    a Python warning, so it reaches stderr with no logging set up, where the library's
    ``NullHandler`` would swallow a log line. ``logging.captureWarnings(True)`` sends it to
    logging instead; ``warnings.simplefilter("ignore", LossWarning)`` silences it."""


_said: set[str] = set()
"""The kinds :func:`say_once` has said in this process."""


def say_once(kind: str, message: str, category: type[Warning] = LossWarning) -> None:
    """Say ``message`` as a ``category`` warning, the first time ``kind`` happens in this
    process; never raises (a filter that turns warnings into errors gets a log line instead:
    this runs inside the host's code)."""
    if kind in _said:  # the common case: one set look-up, no lock
        return
    with _lock:
        if kind in _said:
            return
        _said.add(kind)
    try:
        # Located at "groundwatch", not at a line of ours (the default display would print that
        # line's source); a fresh registry, so the default filter shows it (_said is the "once").
        warnings.warn_explicit(message, category, "groundwatch", 0, module=__name__, registry={})
    except Exception:
        _logger.warning("%s", message)


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
    if f"{where}:{error_type}" not in _said:  # built only the first time
        say_once(f"{where}:{error_type}", _once(message % args if args else message))


def lost(where: str, error_type: str, count: int, message: str, *args: object) -> None:
    """Record ``count`` things lost at ``where`` to an outside cause (a dashboard server down,
    refusing, or never showing the span a write annotates): count ``(where, error_type)``
    ``count`` times and log ``message % args`` as a warning, rate-limited, said once per
    kind on stderr. Never raises."""
    if count <= 0:
        return
    if _count(where, error_type, count):
        _logger.warning(message, *args)
    if f"{where}:{error_type}" not in _said:
        say_once(f"{where}:{error_type}", _once(message % args if args else message))


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
    if f"invalid input:{where}" not in _said:
        say_once(
            f"invalid input:{where}",
            _once(
                f"groundwatch: invalid input to {where}, counted as invalid_input: "
                f"{type(exc).__name__}: {exc}"
            ),
        )


def warning(where: str, message: str, *args: object) -> None:
    """Log ``message % args`` as a warning at most once a minute per ``where`` (an outside
    fault the caller counts itself, such as a lost connection to Redis)."""
    if _due(where):
        _logger.warning(message, *args)
    if where not in _said:
        say_once(where, _once(message % args if args else message))


def say_every_interval(kind: str, message: str, category: type[Warning] = LossWarning) -> None:
    """Log ``message`` and say it as a ``category`` warning, at most once per
    :data:`LOG_INTERVAL_S` for each ``kind``; never raises. For a caller's mistakes that each
    deserve a word (a bad ``Monitor.feedback`` call): said once per process, the first would
    leave every later one silent, a different mistake among them."""
    if not _due(f"say:{kind}"):
        return
    _logger.warning("%s", message)
    # A filter that turns warnings into errors must not raise into the host: the log line has it.
    with contextlib.suppress(Exception):
        warnings.warn_explicit(message, category, "groundwatch", 0, module=__name__, registry={})


def error_counts() -> list[tuple[tuple[str, str], int]]:
    """A snapshot of :data:`errors` taken under the lock (the ``groundwatch.errors`` metric's
    callback reads it on the metric reader's thread while other threads count)."""
    with _lock:
        return list(errors.items())


def _count_and_log(where: str, exc: BaseException, message: str) -> None:
    if _count(where, type(exc).__name__):
        _logger.warning(message, where, exc_info=(type(exc), exc, exc.__traceback__))
    kind = f"{where}:{type(exc).__name__}"
    if kind not in _said:
        text = message % where
        say_once(
            kind,
            _once(f"{text}: {type(exc).__name__}: {exc} (the groundwatch.errors counter has it)"),
        )


def _once(message: str) -> str:
    """A log line's text as said once on stderr: without the log's rate-limit note, with where
    the rest goes."""
    text = message.replace(" (logged at most once a minute)", "")
    if not text.startswith("groundwatch"):
        text = f"groundwatch: {text}"
    return f"{text} [said once per process; every occurrence is counted and logged]"


def _count(where: str, error_type: str, count: int = 1) -> bool:
    """Count ``count`` failures at ``where``; whether it is due to be logged."""
    with _lock:
        errors[(where, error_type)] += count
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
