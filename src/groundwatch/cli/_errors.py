"""How every ``groundwatch`` command fails: one line on stderr, ``<command>: error: <what, and
what to do>``, and an exit code: 2 for a usage or configuration problem (the command line, the
environment: fix it and run again), 1 for a failure at run time (a port taken, a server that
cannot be reached, a bug). The traceback only with ``groundwatch --debug``.

A low module on purpose: the subcommands raise these errors, :mod:`groundwatch.cli` and
:mod:`groundwatch.cli._long_running` report them, and none of them has to import another's module.
"""

from __future__ import annotations

import sys
import traceback
from typing import TextIO

EXIT_RUNTIME = 1
EXIT_USAGE = 2

_debug = False


# Distributions an extra needs that are built in this repository, not fetched from an index.
_ALSO_FROM_THE_CLONE = {"semantic": "-e models/minilm "}


def install_hint(*extras: str) -> str:
    """The line that installs ``extras`` from a clone of the repository (groundwatch is not on
    a package index): ``from a clone of groundwatch: pip install -e ".[redis]"``."""
    also = "".join(dict.fromkeys(_ALSO_FROM_THE_CLONE.get(e, "") for e in extras))
    return f'from a clone of groundwatch: pip install {also}-e ".[{",".join(extras)}]"'


class UsageError(Exception):
    """A problem with the command line or the environment (exit 2). The message names the
    option and says what to do."""


class CommandError(Exception):
    """A failure at run time the command explains in one line (exit 1): a port already in
    use, a server that cannot be reached. The message names the option involved."""


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
