"""Environment configuration of the runtime, in one place.

Every knob an operator may change without touching code is read here, when a
:class:`~groundwatch.Monitor` is built (not at import, so tests and late ``os.environ`` changes
work). An argument given to ``Monitor(...)`` always wins over the environment. A bad value logs
one warning and falls back to the default; it never raises.

| variable | default | meaning |
|---|---|---|
| ``GROUNDWATCH_SAMPLE_RATE`` | ``1.0`` | share of records scored, in [0, 1] |
| ``GROUNDWATCH_RATE_LIMIT_PER_MINUTE`` | unset | cap on records scored per minute |
| ``GROUNDWATCH_MAX_QUEUE_SIZE`` | ``1024`` | records waiting for the worker; more are dropped |
| ``GROUNDWATCH_MAX_CONCURRENCY`` | ``8`` | evaluations in flight for async judges |
| ``GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS`` | ``60000`` | per-evaluation deadline |
| ``GROUNDWATCH_CAPTURE_CONTENT`` | ``false`` | put question, answer, claims on spans |
| ``GROUNDWATCH_CONTENT_MAX_CHARS`` | ``2048`` | cap per captured text attribute |
| ``GROUNDWATCH_EXECUTOR`` | ``auto`` | where sync judges run: ``auto``, ``process``, ``thread`` |
| ``GROUNDWATCH_DISABLED`` | ``false`` | records are counted ``not_sampled``, nothing is scored |
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_logger = logging.getLogger(__name__)

T = TypeVar("T")

SAMPLE_RATE = "GROUNDWATCH_SAMPLE_RATE"
DEFAULT_SAMPLE_RATE = 1.0
"""Score everything by default: right for development and modest traffic; set a lower rate (or a
rate limit) in production, where ``groundwatch.records{decision=queue_full}`` shows overload."""

RATE_LIMIT_PER_MINUTE = "GROUNDWATCH_RATE_LIMIT_PER_MINUTE"
DEFAULT_RATE_LIMIT_PER_MINUTE = None

MAX_QUEUE_SIZE = "GROUNDWATCH_MAX_QUEUE_SIZE"
DEFAULT_MAX_QUEUE_SIZE = 1024
"""Records hold references to the caller's texts; 1024 bounds the memory held at a few MB."""

MAX_CONCURRENCY = "GROUNDWATCH_MAX_CONCURRENCY"
DEFAULT_MAX_CONCURRENCY = 8
"""Concurrent evaluations for async (LLM) judges. Sync judges run one at a time per worker."""

EVALUATION_TIMEOUT_MILLIS = "GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS"
DEFAULT_EVALUATION_TIMEOUT_MILLIS = 60_000

CAPTURE_CONTENT = "GROUNDWATCH_CAPTURE_CONTENT"
DEFAULT_CAPTURE_CONTENT = False

CONTENT_MAX_CHARS = "GROUNDWATCH_CONTENT_MAX_CHARS"
DEFAULT_CONTENT_MAX_CHARS = 2048

EXECUTOR = "GROUNDWATCH_EXECUTOR"
EXECUTOR_AUTO = "auto"
DEFAULT_EXECUTOR = EXECUTOR_AUTO
"""A worker process for sync judges (the GIL: README "Overhead"), a thread if that fails."""
EXECUTORS = ("auto", "thread", "process")

DISABLED = "GROUNDWATCH_DISABLED"

RAISE_INTERNAL_ERRORS = "GROUNDWATCH_RAISE_INTERNAL_ERRORS"
"""Development switch: re-raise groundwatch's own bugs instead of logging them (our test suite
sets it so our bugs cannot hide; never set it in production)."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _read(name: str, default: T, parse: Callable[[str], T], check: Callable[[T], bool]) -> T:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = parse(raw.strip())
    except (TypeError, ValueError):
        value = None
    if value is None or not check(value):
        _logger.warning("ignoring %s=%r: invalid value; using %r", name, raw, default)
        return default
    return value


def _parse_bool(raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(raw)


def env_float(name: str, default: float, lo: float, hi: float) -> float:
    return _read(name, default, float, lambda v: lo <= v <= hi)


def env_int(name: str, default: int, lo: int = 1) -> int:
    return _read(name, default, int, lambda v: v >= lo)


def env_bool(name: str, default: bool) -> bool:
    return _read(name, default, _parse_bool, lambda v: True)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    return _read(name, default, str.lower, lambda v: v in choices)


@dataclass(frozen=True)
class RuntimeConfig:
    """The environment's view of the runtime knobs (see the module docstring)."""

    sample_rate: float
    rate_limit_per_minute: float | None
    max_queue_size: int
    max_concurrency: int
    evaluation_timeout_millis: int
    capture_content: bool
    content_max_chars: int
    executor: str
    disabled: bool


def from_env() -> RuntimeConfig:
    """Read every runtime variable now; bad values warn and fall back."""
    limit: float | None = _read(
        RATE_LIMIT_PER_MINUTE, None, float, lambda v: v is not None and v > 0
    )
    return RuntimeConfig(
        sample_rate=env_float(SAMPLE_RATE, DEFAULT_SAMPLE_RATE, 0.0, 1.0),
        rate_limit_per_minute=limit,
        max_queue_size=env_int(MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SIZE),
        max_concurrency=env_int(MAX_CONCURRENCY, DEFAULT_MAX_CONCURRENCY),
        evaluation_timeout_millis=env_int(
            EVALUATION_TIMEOUT_MILLIS, DEFAULT_EVALUATION_TIMEOUT_MILLIS
        ),
        capture_content=env_bool(CAPTURE_CONTENT, DEFAULT_CAPTURE_CONTENT),
        content_max_chars=env_int(CONTENT_MAX_CHARS, DEFAULT_CONTENT_MAX_CHARS),
        executor=env_choice(EXECUTOR, DEFAULT_EXECUTOR, EXECUTORS),
        disabled=env_bool(DISABLED, False),
    )


def raise_internal_errors() -> bool:
    return os.environ.get(RAISE_INTERNAL_ERRORS, "").strip().lower() in _TRUE
