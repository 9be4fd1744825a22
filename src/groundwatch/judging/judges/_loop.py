"""A private event loop on a daemon thread, for judges that keep async clients.

An ``AsyncOpenAI`` client's connection pool belongs to the event loop it first ran on, and
``groundwatch.evaluate()`` runs each call on a fresh loop. Running every request of a judge on
one private loop keeps the client valid from any caller (sync code, any event loop, the monitor's
worker) and makes the concurrency limit and the circuit breaker hold across all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Starts on first use; restarts in a forked child (threads do not survive ``fork``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():
                self._loop, self._thread, self._pid = None, None, os.getpid()
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def _run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=_run, name=self._name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def in_loop(self) -> bool:
        """Whether the caller runs on this loop's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the private loop and await its result from the caller's loop."""
        if self.in_loop():
            return await coro
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure())
        return await asyncio.wrap_future(future)

    def stop(self, cleanup: Coroutine[Any, Any, Any] | None = None, timeout: float = 5.0) -> None:
        """Cancel what is running on the loop, run ``cleanup``, then stop the loop and join
        its thread. Callers awaiting cancelled work see ``CancelledError``."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread = None, None
        if loop is None or thread is None or not thread.is_alive():
            if cleanup is not None:
                cleanup.close()
            return

        async def _shutdown() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if cleanup is not None:
                await cleanup

        # Best effort: a client that fails to close must not stop the shutdown.
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_shutdown(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
