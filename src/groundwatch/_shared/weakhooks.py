"""Process hooks (fork, exit) that call an object's method without keeping the object alive."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable


def weak_callback(method: Callable[[], None]) -> Callable[[], None]:
    """A callable that calls the bound ``method`` while its object lives and does nothing after.

    For hooks that cannot be removed (``os.register_at_fork``) or must not keep a monitor or a
    model alive until the interpreter exits (``atexit``).
    """
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call


def reinit_after_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in every forked child, for as long as its object lives:
    threads do not survive a fork, so locks they held and queues they served start afresh."""
    os.register_at_fork(after_in_child=weak_callback(method))
