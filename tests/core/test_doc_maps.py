"""The maps in docs/ that name the code's files, names and tables stay true to the code.

A reader trusts a detailed map; one that drifted (a file renamed, a table added) misleads more
than none. Each check reads the map and the code and fails when they disagree:

- ``docs/runtime-internals.md``: its layout lists every package and every module (a judge's own
  modules excepted) and each row's names are defined in the row's file; the import graph keeps
  to its floors, with ``cli/`` above every module it maps (a module named in a table counts as
  imported); every file it names exists, every ``groundwatch.…`` name in backticks resolves (a
  Python name, or a telemetry name that ``semconv`` defines), every other Python name it writes
  is defined in the code; and no two modules import each other, even through a function's or
  ``TYPE_CHECKING``'s import;
- the integrations import nothing of the core but what ``docs/integrations.md`` and the layout
  of ``docs/runtime-internals.md`` say (read from the integrations' own imports);
- ``docs/judges.md``'s list of what adding a built-in judge touches names files that exist and
  every file that names all the built-in judges and every data file keyed by judge name (the
  answer models, the error rates); the registry and both lazy-import tables agree;
- ``docs/integrations.md``'s list of what adding an integration touches names every file outside
  docs/ and tests/ that names both built-in integrations' folders.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import json
import keyword
import re
import sys
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
    except (ModuleNotFoundError, ValueError):  # a parent that is a module; __main__
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
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # A module named in a module-level table and imported by name (cli's subcommands): an edge.
    tables = [
        n.value
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and isinstance(n.value, (ast.Tuple, ast.List, ast.Dict))
    ]
    named = {
        c.value
        for table in tables
        for c in ast.walk(table)
        if isinstance(c, ast.Constant) and isinstance(c.value, str) and "." in c.value
    }
    found.update(name for name in named if name in known and name != module)
    for node in ast.walk(tree):
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


# The layout: a table of every module (paths under src/groundwatch/) and what it owns.
_ROW = re.compile(r"^\| `([\w/.]+)` \| (.*) \|$")
_IDENT = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(\))?`")
# A judge's own modules are its page's to list (docs/judges.md); the layout lists the folders.
_OWN_FOLDERS = ("judging/judges/", "judging/text/")
_FACES = ("__init__.py", "cli/__init__.py", "integration/__init__.py")
_FILE_NAME = re.compile(r"\.(?:py|md|json|toml|yml)$")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _layout_rows() -> dict[str, str]:
    text = (DOCS / "runtime-internals.md").read_text(encoding="utf-8")
    rows = {}
    for line in _section(text, "## The layout").splitlines():
        match = _ROW.match(line)
        if match and not match.group(1).startswith("path"):
            rows[match.group(1)] = match.group(2)
    return rows


def _defined(path: Path) -> set[str]:
    """What a file defines at its top level, and its classes' members (as ``Class.name`` and
    ``name``): functions, classes, assigned names."""
    names: set[str] = set()

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [node.name]
        if isinstance(node, ast.Assign):
            return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    def top(body: list[ast.stmt]) -> list[ast.stmt]:  # a module's statements, through if/try
        flat: list[ast.stmt] = []
        for node in body:
            flat.append(node)
            if isinstance(node, (ast.If, ast.Try)):
                inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
                inner += [s for h in getattr(node, "handlers", []) for s in h.body]
                flat.extend(top(inner))
        return flat

    for node in top(ast.parse(path.read_text(encoding="utf-8")).body):
        names.update(targets(node))
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                names.update(f"{node.name}.{n}" for n in targets(member))
                names.update(targets(member))
    return names


def test_the_layout_lists_every_package_and_module() -> None:
    rows = _layout_rows()
    assert "runtime/monitor.py" in rows  # the table still parses
    wanted = set()
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        folder = path.parent.relative_to(SRC).as_posix() + "/"
        if relative.startswith(_OWN_FOLDERS):
            continue  # the folders themselves are wanted (below)
        if path.name != "__init__.py" or relative in _FACES:
            wanted.add(relative)  # every module, and the faces that own more than names
        elif folder != "./":
            wanted.add(folder)  # every package
    wanted |= set(_OWN_FOLDERS)
    assert sorted(wanted - set(rows)) == []
    # And nothing that is not there: every row is a file or a folder of the package.
    assert sorted(r for r in rows if not (SRC / r).exists()) == []


def test_each_layout_row_names_what_its_file_defines() -> None:
    # "Stats in _emitter.py" fails here: a row's names are defined in the row's own file.
    wrong = []
    for path, owns in _layout_rows().items():
        if not path.endswith(".py"):
            continue
        defined = _defined(SRC / path)
        owned = owns.split(": ", 1)[0]  # `Name`, `name`: what the file does with them
        wrong.extend(
            f"{path}: {name}"
            for name in _IDENT.findall(owned)
            if not _FILE_NAME.search(name) and name not in defined
        )
    assert wrong == []


def _names_defined_anywhere() -> set[str]:
    names: set[str] = set()
    roots = [SRC, *INTEGRATIONS, ROOT / "benchmarks", ROOT / "training", ROOT / "testkit"]
    for root in roots:
        for path in root.rglob("*.py"):
            names.add(path.stem)
            names.add(path.parent.name)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.ImportFrom):  # what the code builds on by name
                    names.update(a.asname or a.name for a in node.names)
    return names


def _known_outside(dotted: str) -> bool:
    """A builtin, a keyword, or a name of the standard library or a dependency
    (``asyncio.CancelledError``)."""

    first = dotted.split(".")[0]
    if hasattr(builtins, first) or keyword.iskeyword(first) or first in sys.stdlib_module_names:
        return dotted == first or _resolves(dotted)
    return "." in dotted and _resolves(dotted)


def test_every_name_runtime_internals_writes_exists() -> None:
    # `_invalid_reason` after its rename fails here: every Python name the page writes in
    # backticks (alone, dotted, or called with no arguments) is defined somewhere in the code.
    text = (DOCS / "runtime-internals.md").read_text(encoding="utf-8")
    defined = _names_defined_anywhere()
    values = _telemetry_names() | {
        "error",  # the label of a failed evaluation
        *_string_constants("groundwatch._shared.error_types"),
    }
    names = set(_IDENT.findall(text))
    assert {"Results.finish", "prepare_record", "Stats"} <= names  # the pattern still matches
    unknown = sorted(
        n
        for n in names
        if n not in values
        and not _FILE_NAME.search(n)
        and not _known_outside(n)
        and not all(part in defined for part in n.split("."))
    )
    assert unknown == []


def _string_constants(module: str) -> set[str]:
    """Every string constant ``module`` writes (``error.type`` values and the like)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _floors() -> list[list[str]]:
    text = (DOCS / "runtime-internals.md").read_text(encoding="utf-8")
    section = _section(text, "## The floors")
    floors = [
        re.findall(r"`([\w/.]+)`", line.split(". ", 1)[1])
        for line in section.splitlines()
        if re.match(r"^\d+\. ", line)
    ]
    return floors[::-1]  # from the bottom


def _floor_of(module: str, floors: list[list[str]]) -> int | None:
    """The floor of the most specific entry that covers ``module``: a file, else the longest
    folder; ``integrations/`` covers the integrations' packages."""
    best: tuple[int, int] | None = None  # (specificity, floor)
    for floor, entries in enumerate(floors):
        for entry in entries:
            if entry == "integrations/":
                hit = module.split(".")[0] != "groundwatch"
                specificity = 1
            elif entry.endswith(".py"):
                name = entry[: -len(".py")].replace("/", ".")
                name = "groundwatch" + ("" if name == "__init__" else "." + name)
                name = name.removesuffix(".__init__")
                hit, specificity = module == name, 1000
            else:
                prefix = "groundwatch." + entry.rstrip("/").replace("/", ".")
                hit = module == prefix or module.startswith(prefix + ".")
                specificity = len(prefix)
            if hit and (best is None or specificity > best[0]):
                best = (specificity, floor)
    return None if best is None else best[1]


def test_the_imports_keep_to_the_floors_and_the_command_line_is_above_all_it_maps() -> None:
    floors = _floors()
    assert len(floors) > 8 and floors[-1] == ["__main__.py"]
    edges = _import_edges()
    floor = {m: _floor_of(m, floors) for m in edges}
    assert sorted(m for m, f in floor.items() if f is None) == []  # every module has a floor
    upward = sorted(
        f"{m} ({floor[m]}) -> {i} ({floor[i]})"
        for m, imported in edges.items()
        for i in imported
        if floor[i] is not None and floor[m] is not None and floor[i] > floor[m]  # type: ignore[operator]
    )
    assert upward == []
    # The subcommands' table counts: cli/ maps every subcommand's module, and stands above each.
    from groundwatch.cli import _SUBCOMMANDS

    cli = edges["groundwatch.cli"]
    assert {module for _, module in _SUBCOMMANDS} <= cli
    mapped = {m for m in cli if not m.startswith("groundwatch.cli.")}
    assert all(floor[m] < floor["groundwatch.cli"] for m in mapped)  # type: ignore[operator]


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

    line = _layout_rows()["integration/"]
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
    listed = set(re.findall(r"`([\w/.-]+\.(?:py|md|toml|json|yml)|[\w/]+/)`", section))
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
    # The data files keyed by judge name (its answer model, its error rates) are on it too.
    keyed = {
        p.relative_to(ROOT).as_posix()
        for p in SRC.rglob("*.json")
        if isinstance(json.loads(p.read_text(encoding="utf-8")), dict)
        and isinstance(json.loads(p.read_text(encoding="utf-8")).get("judges"), dict)
    }
    assert "src/groundwatch/rates/_judge_error_rates.json" in keyed
    # And the files generated from them: the rules hold each measured judge's ranges.
    measured = json.loads((SRC / "rates" / "_judge_error_rates.json").read_text("utf-8"))
    generated = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "examples").rglob("*.yml")
        if all(f'groundwatch_judge: "{j}"' in p.read_text("utf-8") for j in measured["judges"])
    }
    assert "examples/prometheus/groundwatch-alerts.yml" in generated
    assert sorted((tables | keyed | generated) - listed) == []


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
