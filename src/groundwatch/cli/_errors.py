"""How every ``groundwatch`` command fails: one line on stderr, ``<command>: error: <what, and
what to do>``, and an exit code: 2 for a usage or configuration problem (the command line, the
environment: fix it and run again), 1 for a failure at run time (a port taken, a server that
cannot be reached, a bug). The traceback only with ``groundwatch --debug``.

The errors themselves live on the ground floor (:mod:`groundwatch._shared.errors`), where the
judges, the runtime and the subcommands raise them; the command line on top maps them here.
"""

from __future__ import annotations

import sys
import traceback
from typing import TextIO

from .._shared.errors import CommandError, UsageError

EXIT_RUNTIME = 1
EXIT_USAGE = 2

_debug = False


def set_debug(on: bool) -> None:
    """``--debug``: print the traceback above the one-line error."""
    global _debug
    _debug = on


def debug() -> bool:
    """Whether ``--debug`` was given."""
    return _debug


def report(command: str, exc: BaseException, stream: TextIO | None = None) -> int:
    """Print ``exc`` as the one-line error of ``command`` (``"groundwatch serve"``) and return
    the exit code it stands for; with ``--debug`` the traceback comes first."""
    out = stream if stream is not None else sys.stderr
    if _debug:
        traceback.print_exception(exc, file=out)
    if isinstance(exc, (UsageError, CommandError)):
        message = str(exc)
    else:
        # Not one of ours: a bug or an unexpected failure. Its type and message, and where
        # to find more.
        hint = "" if _debug else " (run with --debug for the traceback)"
        message = f"{type(exc).__name__}: {exc}{hint}"
    print(f"{command}: error: {message}", file=out, flush=True)
    return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_RUNTIME
