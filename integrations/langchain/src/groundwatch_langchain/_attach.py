"""Attaching one handler to every LangChain callback manager.

LangChain builds a callback manager for every run (and a child manager for every nested run);
wrapping ``BaseCallbackManager.__init__`` is the one place where a handler can join all of them,
which is what the OpenTelemetry and OpenInference instrumentations do too.

Other instrumentations wrap the same method, and each restores "its" original when it is
switched off, which may silently drop a wrapper installed on top of it. So ``uninstrument``
restores the original only while ours is still the outermost wrapper, and otherwise just switches
ours off; ``instrument`` wraps again unless ours is outermost. A wrapper of ours left deeper in
the chain is harmless: a manager never gets a second groundwatch handler. The one case we cannot
see is another instrumentation, switched off after ours was installed on top of it, restoring the
original blindly (OpenInference does): ours is then gone, and calling ``instrument`` again (it
checks that its handler still reaches a new manager) puts it back.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groundwatch.integration import MonitorLike

from ._handler import GroundwatchCallbackHandler

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackManager

_logger = logging.getLogger(__name__)

_lock = threading.Lock()
_active: GroundwatchCallbackHandler | None = None
_original_init: Callable[..., None] | None = None
_wrapper: Callable[..., None] | None = None


def _add_handler(manager: BaseCallbackManager) -> None:
    handler = _active
    if handler is None:
        return
    # Managers are copied and merged from other managers: never add a second groundwatch handler,
    # whether ours or one the user passed explicitly (an explicit handler wins).
    for existing in manager.inheritable_handlers:
        if isinstance(existing, GroundwatchCallbackHandler):
            return
    for existing in manager.handlers:
        if isinstance(existing, GroundwatchCallbackHandler):
            return
    manager.add_handler(handler, inherit=True)


def instrument(monitor: MonitorLike, **handler_options: Any) -> GroundwatchCallbackHandler:
    """Attach a :class:`GroundwatchCallbackHandler` to every LangChain run in this process.

    Calling it again while instrumented keeps the first handler and logs a warning (call
    :func:`uninstrument` first to switch monitors). A run that already has a groundwatch handler
    in its callbacks keeps that one instead.

    Args:
        monitor: The ``groundwatch.Monitor`` that receives the records.
        **handler_options: Passed to :class:`GroundwatchCallbackHandler` (extractors, route, ...).

    Returns:
        The handler now attached to every run.
    """
    global _active, _original_init, _wrapper
    from langchain_core.callbacks import BaseCallbackManager

    with _lock:
        if _active is not None and _reaches_new_managers(BaseCallbackManager, _active):
            _logger.warning("groundwatch_langchain is already instrumented; keeping the handler")
            return _active
        # Not instrumented, or our wrapper was removed by someone else: (re)install it.
        handler = _active or GroundwatchCallbackHandler(monitor, **handler_options)
        if BaseCallbackManager.__init__ is not _wrapper:
            original = BaseCallbackManager.__init__

            @functools.wraps(original)
            def __init__(self: BaseCallbackManager, *args: Any, **kwargs: Any) -> None:
                original(self, *args, **kwargs)
                try:
                    _add_handler(self)
                except Exception:  # pragma: no cover - never break LangChain's constructor
                    _logger.debug("could not attach the groundwatch handler", exc_info=True)

            _original_init, _wrapper = original, __init__
            BaseCallbackManager.__init__ = __init__  # type: ignore[method-assign]
        _active = handler
        return handler


def _reaches_new_managers(
    manager_class: type[BaseCallbackManager], handler: GroundwatchCallbackHandler
) -> bool:
    return any(h is handler for h in manager_class(handlers=[]).handlers)


def uninstrument() -> None:
    """Detach the handler attached by :func:`instrument`. Runs already started keep it."""
    global _active, _original_init, _wrapper
    from langchain_core.callbacks import BaseCallbackManager

    with _lock:
        _active = None
        if _wrapper is not None and BaseCallbackManager.__init__ is _wrapper:
            BaseCallbackManager.__init__ = _original_init  # type: ignore[method-assign,assignment]
            _original_init = _wrapper = None


def instrumented_handler() -> GroundwatchCallbackHandler | None:
    """The handler attached by :func:`instrument`, or None when not instrumented."""
    return _active
