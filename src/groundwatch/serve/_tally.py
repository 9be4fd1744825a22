"""Counts that the event loop adds to and the metrics reader's thread reads, and the guard
that turns an extractor's exception into a counted skip."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any, TypeVar

_logger = logging.getLogger(__name__)

T = TypeVar("T")


class Tally:
    """Counts by key, added to on the event loop and read by the metrics reader's thread
    (``groundwatch.serve.skipped`` by extractor, ``groundwatch.serve.requests`` by status)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[Any] = Counter()

    def add(self, key: Any) -> None:
        with self._lock:
            self._counts[key] += 1

    def snapshot(self) -> dict[Any, int]:
        with self._lock:
            return dict(self._counts)


Skips = Tally
"""Counted skips by extractor."""


def guarded(where: str, items: Iterator[T], skips: Skips) -> Iterator[T]:
    """``items`` until the first exception, which is logged (debug) and counted."""
    try:
        yield from items
    except Exception as exc:
        skips.add(where)
        _logger.debug("serve: %s skipped an attribute: %r", where, exc)
