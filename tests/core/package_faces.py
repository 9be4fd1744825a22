"""Reading a package face's lazy-import tables (tests/core)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path


def lazy_tables(package: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """A package face's ``if TYPE_CHECKING:`` imports (name -> module, read from its source: a
    star import stands for the ``__all__`` of the package it names), and the ``_WHERE`` table
    and ``__all__`` it builds when imported."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    checked: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                source = "." * imp.level + (imp.module or "")
                for alias in imp.names:
                    if alias.name == "*":
                        starred = importlib.import_module(source, package)
                        checked.update(dict.fromkeys(starred.__all__, source))
                    else:
                        checked[alias.asname or alias.name] = source
    return checked, dict(module._WHERE), list(module.__all__)
