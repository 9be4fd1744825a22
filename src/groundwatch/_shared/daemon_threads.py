"""Daemon threads that run blocking calls for an event loop: :class:`DaemonThreads`.

Used wherever groundwatch hands sync work to a thread from async code (a sync judge called by
``aevaluate`` or by a cascade, the process runner's pipe threads), instead of
``asyncio.to_thread``, whose pool threads are joined at interpreter exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DaemonThreads"]

T = TypeVar("T")


class DaemonThreads:
    """Daemon threads that run blocking calls for the event loop, kept for reuse.

    Not ``asyncio.to_thread``: its pool threads are joined at interpreter exit, so a call that
    never returns would hang the host's exit. A daemon thread is simply abandoned when the
    awaiting task is cancelled (timeout, shutdown), and a thread whose call has not returned is
    never handed another one. Reuse matters on the host's CPU: starting a thread costs about
    0.1-0.2 ms of it, once per batch (``benchmarks/host_cpu.py``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._idle: list[_DaemonThread] = []
        self._closed = False

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call`` on an idle thread (a new one when none is idle); await its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            thread = self._idle.pop() if self._idle else None
        if thread is None:
            thread = _DaemonThread(self)
        thread.jobs.put((call, loop, future))
        return await future

    def _done(self, thread: _DaemonThread) -> bool:
        """A thread's call returned: whether it stays for the next one."""
        with self._lock:
            if self._closed:
                return False
            self._idle.append(thread)
            return True

    def close(self) -> None:
        """Let the threads end (a running call still finishes and delivers first)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for thread in idle:
            thread.jobs.put(None)

    def at_fork_reinit(self) -> None:
        # The parent's threads do not exist in a forked child.
        self._lock = threading.Lock()
        self._idle = []


_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _DaemonThread:
    __slots__ = ("jobs", "owner")

    def __init__(self, owner: DaemonThreads) -> None:
        self.owner = owner
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        threading.Thread(target=self._main, name=owner.name, daemon=True).start()

    def _main(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None or not self._run(*job):
                return
            del job  # nothing of a finished batch stays referenced while idle

    def _run(
        self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
    ) -> bool:
        value: Any = None
        error: BaseException | None = None
        try:
            value = call()
        except BaseException as exc:
            error = exc
        # Idle again before the result is delivered: the next batch then finds this thread.
        stay = self.owner._done(self)
        # RuntimeError: the loop closed meanwhile (shutdown); nobody waits for the result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_deliver, future, value, error)
        return stay


def _deliver(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)
