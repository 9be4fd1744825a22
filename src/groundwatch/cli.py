"""The ``groundwatch`` command line: ``check`` (offline gate), ``demo``, ``worker`` (a scoring
process of a Redis pool) and ``serve`` (scores traces received over OTLP).

Each subcommand lives in its own private module and registers itself through ``add_parser``;
this module only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__

# (subcommand, module): each module defines add_parser(subparsers) and run(args) -> int.
_SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("check", "groundwatch.check.cli"),
    ("demo", "groundwatch.demo.cli"),
    ("worker", "groundwatch.queue.cli"),
    ("serve", "groundwatch.serve.cli"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groundwatch", description="Hallucination monitoring for RAG pipelines."
    )
    parser.add_argument("--version", action="version", version=f"groundwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for _name, module_name in _SUBCOMMANDS:
        module = importlib.import_module(module_name)
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``groundwatch`` command. Returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return int(run(args))


if __name__ == "__main__":
    sys.exit(main())
