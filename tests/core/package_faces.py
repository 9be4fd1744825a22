"""Reading a package face's lazy-import tables from its source (tests/core)."""

from __future__ import annotations

import ast
from pathlib import Path


def lazy_tables(path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """A package face's ``if TYPE_CHECKING:`` imports (name -> module), its ``_WHERE`` table
    and its ``__all__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checked: dict[str, str] = {}
    where: dict[str, str] = {}
    public: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    checked[alias.asname or alias.name] = "." * imp.level + (imp.module or "")
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_WHERE":
            where = ast.literal_eval(node.value)
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            public = ast.literal_eval(node.value)
    return checked, where, public
