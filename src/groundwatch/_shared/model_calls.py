"""Model calls kept out of the interpreter's exit: :data:`MODEL_CALLS`.

A judge runs on daemon threads (the runners', ``judge_async``'s). When the main thread ends
while one of them is inside PyTorch or onnxruntime (the GIL released), CPython 3.11-3.13 end
that thread with ``pthread_exit`` as soon as it takes the GIL back; unwinding through the
library's C++ frames then aborts the process (``terminate called without an active
exception``, exit 134) after the command has printed its result. So every call into a model
library runs inside :meth:`ModelCalls.call`, and an ``atexit`` hook (atexit runs before daemon
threads are stopped) waits for the calls in flight to return and refuses new ones.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_WAIT_S = 60.0
"""How long the exit waits at most for the model calls in flight (a forward pass takes
seconds at most; a call stuck for longer is left to its fate rather than hang the exit)."""


class InterpreterExiting(RuntimeError):
    """A model call asked for after the interpreter began to exit."""


class ModelCalls:
    """Counts the model calls in flight; :meth:`close` waits for them and refuses new ones."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._active = 0
        self._closed = False

    @contextmanager
    def call(self) -> Iterator[None]:
        """Wrap one call into a model library (nested calls are fine). Everything the call
        allocates must be freed inside the block (return plain Python values)."""
        with self._changed:
            if self._closed:
                raise InterpreterExiting("the interpreter is exiting: no more model calls")
            self._active += 1
        try:
            yield
        finally:
            with self._changed:
                self._active -= 1
                self._changed.notify_all()

    def close(self, timeout_s: float = EXIT_WAIT_S) -> bool:
        """Refuse new calls and wait for those in flight; whether none is left."""
        with self._changed:
            self._closed = True
            return self._changed.wait_for(lambda: self._active == 0, timeout_s)

    def at_fork_reinit(self) -> None:
        # The parent's calls in flight are not in a forked child.
        self._changed = threading.Condition()
        self._active = 0


MODEL_CALLS = ModelCalls()
atexit.register(MODEL_CALLS.close)
os.register_at_fork(after_in_child=MODEL_CALLS.at_fork_reinit)
