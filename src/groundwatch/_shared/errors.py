"""The errors a command's work raises when the command line or the environment is wrong
(:class:`UsageError`) or when it fails at run time in a way it can say in one line
(:class:`CommandError`), and the install line an extra's absence names (:func:`install_hint`).

A ground-floor module on purpose: the judges (a missing extra), the registry (an unknown
judge), the runtime (``feedback import``), ``serve`` and ``worker`` raise these, and the command
line on top (:mod:`groundwatch.cli`) maps them to a one-line message and an exit code; nothing
here imports the command line.
"""

from __future__ import annotations

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
