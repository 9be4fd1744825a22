"""One bounded queue with a daemon thread of its own: what feedback events and DatasetSink use
to keep slow work (a log exporter, a disk) off the thread that hands it over.

Shaped after OpenTelemetry's batch processor: a bounded ``deque`` (a full queue refuses and the
caller counts), one named daemon thread started on first use, ``flush`` and ``close`` that keep
their deadline and say whether they made it, and a fresh state in a forked child. The caller's
side is cheap under steady traffic: the thread stays awake, looking at the queue every
``poll_s``, for ``stay_awake_s`` after its last item, so an append only sets the wake event
when the thread has gone to sleep.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from .._shared.weakhooks import reinit_after_fork

T = TypeVar("T")


class BackgroundQueue(Generic[T]):
    """Items handed to ``handle`` in batches of at most ``batch``, on a thread of its own.

    ``handle`` must not raise (it guards itself); ``on_stop`` runs on that thread once the queue
    is closed and empty (e.g. closing a file).
    """

    def __init__(
        self,
        name: str,
        handle: Callable[[list[T]], None],
        *,
        max_items: int,
        batch: int = 256,
        on_stop: Callable[[], None] | None = None,
        poll_s: float = 0.2,
        stay_awake_s: float = 1.0,
    ) -> None:
        self.name = name
        self.max_items = max_items
        self._handle = handle
        self._batch = batch
        self._on_stop = on_stop
        self._poll_s = poll_s
        self._stay_awake_s = stay_awake_s
        self.reset()
        reinit_after_fork(self.reset)

    def reset(self) -> None:
        """A fresh, empty, open queue with no thread (a forked child's state)."""
        self.items: deque[T] = deque()
        self.closed = False
        self._pid = os.getpid()
        self._wake = threading.Event()
        self._idle = threading.Condition(threading.Lock())
        self._awake = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.items)

    # --- the handing thread --------------------------------------------------------------------

    def offer(self, item: T) -> bool:
        """Queue one item; ``False`` when the queue is full or closed (the caller counts)."""
        if self._pid != os.getpid():
            self.reset()
        items = self.items
        # Checked without a lock: concurrent callers may overshoot by one each, still bounded.
        if self.closed or len(items) >= self.max_items:
            return False
        items.append(item)
        if not self._awake:
            self._awake = True
            if self._thread is None:
                self._start()
            else:
                self._wake.set()
        return True

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                self._wake.set()
                return
            thread = threading.Thread(target=self._main, name=self.name, daemon=True)
            self._thread = thread
            thread.start()

    # --- its own thread ------------------------------------------------------------------------

    def _main(self) -> None:
        quiet_since = time.monotonic()
        while True:
            if self.items:
                self._drain()
                quiet_since = time.monotonic()
            elif self.closed:
                if self._on_stop is not None:
                    self._on_stop()
                return
            elif time.monotonic() - quiet_since < self._stay_awake_s:
                self._wake.wait(self._poll_s)
                self._wake.clear()
            else:
                self._awake = False
                # A caller that appended before seeing _awake False did not wake us: look again.
                if not self.items and not self.closed:
                    self._wake.wait()
                self._wake.clear()
                self._awake = True
                quiet_since = time.monotonic()

    def _drain(self) -> None:
        with self._idle:
            self._busy = True
        try:
            while self.items:
                taken: list[T] = []
                while self.items and len(taken) < self._batch:
                    taken.append(self.items.popleft())
                self._handle(taken)
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    # --- lifecycle -----------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Wait until every item queued so far is handled; ``False`` past the deadline (or when
        called from the queue's own thread, which cannot wait for itself)."""
        if self._thread is None:
            return not self.items
        if threading.current_thread() is self._thread:
            return False
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self.items or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.set()
                self._idle.wait(min(left, self._poll_s))
        return True

    def close(self, timeout_s: float) -> tuple[bool, int]:
        """Handle what is queued within the deadline, then stop the thread; ``(in time, items
        left unhandled and thrown away)``. Later offers are refused."""
        ok = self.flush(timeout_s)
        self.closed = True
        self._wake.set()
        lost = 0
        if not ok:
            lost = len(self.items)
            self.items.clear()
        thread = self._thread
        if thread is None:
            if self._on_stop is not None:
                self._on_stop()
        elif ok and thread is not threading.current_thread():
            thread.join(max(0.0, min(timeout_s, 5.0)))
        return ok, lost
