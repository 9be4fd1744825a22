"""The maps in docs/ that name the code's files, names and tables stay true to the code.

A reader trusts a detailed map; one that drifted (a file renamed, a table added) misleads more
than none. Each check reads the map and the code and fails when they disagree:

- ``docs/runtime-internals.md``: every file it names exists, every ``groundwatch.…`` name in
  backticks resolves (a Python name, or a telemetry name that ``semconv`` defines), and no two
  modules import each other, even through a function's or ``TYPE_CHECKING``'s import;
- the integrations import nothing of the core but what ``docs/integrations.md`` and the layout
  of ``docs/runtime-internals.md`` say (read from the integrations' own imports);
- ``docs/judges.md``'s list of what adding a built-in judge touches names files that exist and
  every file that names all the built-in judges; the registry and both lazy-import tables agree;
- ``docs/integrations.md``'s list of what adding an integration touches names every file outside
  docs/ and tests/ that names both built-in integrations' folders.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from groundwatch.telemetry import semconv

from .package_faces import lazy_tables

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "groundwatch"
INTEGRATIONS = sorted((ROOT / "integrations").glob("*/src/groundwatch_*"))

_FILE = re.compile(r"(?<![\w.])([\w/-]+\.(?:py|md|json|toml))\b")
_DOTTED = re.compile(r"`(groundwatch(?:\.[A-Za-z_]\w*)+)`")


def _repo_files() -> list[str]:
    skip = {
        ".venv",
        ".git",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*")
        if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)
    ]


def _names_all(path: Path, words: list[str]) -> bool:
    if path.stat().st_size > 1_000_000:  # data and model files
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    return all(word in text for word in words)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent that is a module, not a package
        return False


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a module's attribute (a chain of them)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if not _is_module(module_name):
            continue
        value: Any = importlib.import_module(module_name)
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        return True
    return False


def _telemetry_names() -> set[str]:
    return {v for k, v in vars(semconv).items() if k.isupper() and isinstance(v, str)}


# --- docs/runtime-internals.md ------------------------------------------------------------------


def test_every_file_runtime_internals_names_exists() -> None:
    text = (DOCS / "runtime-internals.md").read_text(encoding="utf-8")
    files = _repo_files()
    named = set(_FILE.findall(text))
    assert len(named) > 20  # the layout block alone names more: the pattern still matches
    missing = sorted(
        name for name in named if not any(f == name or f.endswith("/" + name) for f in files)
    )
    assert missing == []


@pytest.mark.parametrize("page", ["runtime-internals.md", "integrations.md"])
def test_every_groundwatch_name_in_backticks_resolves(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    telemetry = _telemetry_names()
    named = set(_DOTTED.findall(text))
    assert named
    unresolved = sorted(n for n in named if n not in telemetry and not _resolves(n))
    assert unresolved == []


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The package's modules ``module`` (at ``path``) imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join([*base, node.module] if node.module else base)
            target = target if node.level else (node.module or "")
            subs = [f"{target}.{a.name}" for a in node.names]
            names = [sub if sub in known else target for sub in subs]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _import_edges() -> dict[str, set[str]]:
    """Every module of the core and of each integration -> the modules it imports (an import
    for type checkers or inside a function counts: it is a dependency a reader follows all the
    same)."""
    files = {}
    for package in (SRC, *INTEGRATIONS):
        for path in package.rglob("*.py"):
            parts = path.relative_to(package.parent).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {m: _imports(p, m, set(files)) for m, p in files.items()}


def test_no_two_modules_import_each_other() -> None:
    edges = _import_edges()
    # A module that reaches itself again through its imports is in a circle.
    circles = []
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(edges[m])
        if start in seen:
            circles.append(start)
    assert len(edges) > 80
    assert sorted(circles) == []


def test_the_command_line_is_on_top() -> None:
    # The judges, the runtime and the subcommands raise errors that live below them
    # (_shared/errors.py); only the command line and `python -m groundwatch` import cli/.
    edges = _import_edges()
    assert "groundwatch.cli" in edges["groundwatch.__main__"]  # the scan sees such imports
    importers = sorted(
        m
        for m, imported in edges.items()
        if any(i == "groundwatch.cli" or i.startswith("groundwatch.cli.") for i in imported)
        and not (m == "groundwatch.cli" or m.startswith("groundwatch.cli."))
    )
    assert importers == ["groundwatch.__main__"]


def test_nothing_inside_the_package_imports_its_root(tmp_path: Path) -> None:
    # The root is the public face: a module inside that imports it pulls in the whole face and
    # stands on the floor above everything.
    probe = tmp_path / "probe.py"
    probe.write_text("import groundwatch as gw\nfrom .. import Monitor\n", encoding="utf-8")
    known = {"groundwatch", "groundwatch.serve", "groundwatch.serve.probe"}
    assert _imports(probe, "groundwatch.serve.probe", known) == {"groundwatch"}  # seen
    edges = _import_edges()
    importers = sorted(m for m, imported in edges.items() if "groundwatch" in imported)
    assert importers == []


# --- what the integrations import of the core ---------------------------------------------------


def _core_modules_imported(package: Path) -> set[str]:
    """The ``groundwatch`` modules a package's files import (at module level, in functions and
    under ``TYPE_CHECKING`` alike); ``from groundwatch.telemetry import semconv`` counts as the
    module ``groundwatch.telemetry.semconv``."""
    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "groundwatch")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "groundwatch":
                    continue
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    found.add(submodule if _is_module(submodule) else node.module)
    return found


def _modules_in(text: str) -> set[str]:
    return {n for n in _DOTTED.findall(text) if _is_module(n)}


def test_the_integrations_import_of_the_core_is_what_the_docs_say() -> None:
    assert len(INTEGRATIONS) >= 2
    imported = set().union(*(_core_modules_imported(p) for p in INTEGRATIONS))
    assert imported == {"groundwatch.integration", "groundwatch.telemetry.semconv"}

    guide = (DOCS / "integrations.md").read_text(encoding="utf-8")
    paragraph = next(
        p for p in guide.split("\n\n") if "Everything it needs from the core" in " ".join(p.split())
    )
    assert _modules_in(paragraph) == imported

    internals = (DOCS / "runtime-internals.md").read_text(encoding="utf-8")
    line = next(x for x in internals.splitlines() if x.strip().startswith("integration/"))
    # The layout names modules by file: integration/ __init__.py, telemetry/semconv.py.
    as_files = {
        Path(str(importlib.util.find_spec(m).origin)).relative_to(SRC).as_posix() for m in imported
    }
    assert as_files == {"integration/__init__.py", "telemetry/semconv.py"}
    assert all(f.split("/")[-1] in line for f in as_files)


def test_what_adding_an_integration_touches_is_every_file_that_names_them_all() -> None:
    guide = (DOCS / "integrations.md").read_text(encoding="utf-8")
    start = guide.index("## What adding one touches")
    section = guide[start : guide.index("\n## ", start + 1)]
    folders = [p.parent.parent.relative_to(ROOT).as_posix() for p in INTEGRATIONS]
    skip = ("docs/", "tests/", "integrations/", "benchmarks/", "examples/")
    naming_all = {
        f for f in _repo_files() if not f.startswith(skip) and _names_all(ROOT / f, folders)
    }
    assert "requirements-dev.txt" in naming_all  # the scan finds what names them
    assert sorted(f for f in naming_all if f"`{f}`" not in section) == []


# --- adding a judge -----------------------------------------------------------------------------


def _builtin_judges() -> list[str]:
    from groundwatch.judging import judges

    return [name for name in judges.__all__ if name != "Judge"]


def test_the_registry_and_the_lazy_tables_name_the_same_judges() -> None:
    builtin = _builtin_judges()
    assert {"LocalJudge", "OpenAIJudge", "CascadeJudge"} <= set(builtin)

    checked, where, public = lazy_tables("groundwatch.judging.judges")
    assert checked == where
    assert sorted(where) == sorted(public)

    _, top_where, top_public = lazy_tables("groundwatch")
    for name in builtin:
        assert top_where.get(name) == ".judging.judges", name
        assert name in top_public, name

    # Every built-in judge is built by a registry entry: its builder imports the class.
    registry = ast.parse((SRC / "judging" / "registry.py").read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(registry)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("judges")
        for alias in node.names
    }
    assert sorted(set(builtin) - imported) == []


def test_what_adding_a_judge_touches_is_every_file_that_names_them_all() -> None:
    page = (DOCS / "judges.md").read_text(encoding="utf-8")
    start = page.index("Adding a built-in judge touches")
    section = page[start : page.index("\n\n", page.index("\n\n", start) + 2)]
    listed = set(re.findall(r"`([\w/.]+\.(?:py|md|toml)|[\w/]+/)`", section))
    assert listed
    missing = sorted(p for p in listed if not (ROOT / p).exists() and not (DOCS / p).exists())
    assert missing == []

    # The files that name every built-in judge hold a table of them: each is on the list.
    builtin = _builtin_judges()
    candidates = [*SRC.rglob("*.py"), ROOT / "README.md"]
    tables = {
        p.relative_to(ROOT).as_posix()
        for p in candidates
        if all(name in p.read_text(encoding="utf-8") for name in builtin)
    }
    assert "src/groundwatch/judging/registry.py" in tables
    assert sorted(tables - listed) == []


def test_no_benchmark_imports_a_test_file() -> None:
    # What the benchmarks share with the tests lives in testkit/, which both import.
    importing: list[str] = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "tests" or n.startswith("tests.") for n in names):
                importing.append(path.name)
    assert importing == []
    shared = {p.stem for p in (ROOT / "testkit").glob("*.py")}
    assert {"fake_openai", "zh_cases", "chains"} <= shared
