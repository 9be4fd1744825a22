"""The ``groundwatch`` command line: ``check`` (offline gate), ``demo``, ``worker`` (a scoring
process of a Redis pool), ``serve`` (scores traces received over OTLP), ``feedback import``
(people's labels back into telemetry), ``rules`` (the Prometheus rules file) and
``export-onnx`` (a detector judge's model as ONNX).

The command line is the top floor: nothing in the package imports it but ``__main__``. Each
subcommand's module lives beside its concern and is found through one table,
:data:`_SUBCOMMANDS`: it defines ``add_parser(subparsers)`` and ``run(args) -> int``. What a
subcommand raises comes here, where every command fails the same way
(:mod:`groundwatch.cli._errors`): one line naming the option and what to do, exit 2 for a usage or
configuration problem (:class:`~groundwatch._shared.errors.UsageError`), 1 for a failure at run
time, the traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .._version import __version__
from . import _errors

# (subcommand, module): each module defines add_parser(subparsers) and run(args) -> int.
_SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("check", "groundwatch.check.cli"),
    ("demo", "groundwatch.demo.cli"),
    ("worker", "groundwatch.queue.cli"),
    ("serve", "groundwatch.serve.cli"),
    ("feedback", "groundwatch.runtime.feedback_import"),
    ("rules", "groundwatch.alerts.prometheus_rules"),
    ("export-onnx", "groundwatch.cli._export_onnx"),
)


_DEBUG_HELP = "on an error, print the traceback above the one-line message"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groundwatch", description="Hallucination monitoring for RAG pipelines."
    )
    parser.add_argument("--version", action="version", version=f"groundwatch {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for _name, module_name in _SUBCOMMANDS:
        module = importlib.import_module(module_name)
        module.add_parser(sub)
    # Accepted after the subcommand too (`groundwatch worker ... --debug`), where people add it
    # when a command has just failed; SUPPRESS keeps the global one when it is not repeated.
    for subparser in sub.choices.values():
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``groundwatch`` command. Returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    _errors.set_debug(bool(args.debug))
    try:
        return int(run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return _errors.report(f"groundwatch {args.command}", exc)


def console() -> NoReturn:
    """The ``groundwatch`` console script and ``python -m groundwatch``: :func:`main`, then
    :func:`leave` with its exit code."""
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with ``code``. After a PyTorch judge, the exit hooks run (telemetry
    flushed, model calls in flight waited for: ``groundwatch._shared.model_calls``) and the
    process ends without the interpreter's finalization: PyTorch's native threads torn down
    there can abort it after the result is printed ("terminate called without an active
    exception", one ``check --judge lettucedetect`` run in CI's)."""
    if "torch" not in sys.modules:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console()
