"""docs/contributing.md's recipes hold: each list of files is complete, and each recipe, carried
out on a copy of the package, gives what the page promises.

- Adding a span attribute: the name in ``semconv.py``, one ``yield`` in the emitter's family;
  on the copy, the attribute is on the exported span in both executors, and the test of the
  span's exact attributes fails until it is added there (step 5). Every attribute the
  emitter yields is named in ``docs/runtime.md`` ("What comes out").
- Adding a subcommand: a module with ``add_parser`` and ``run``, one line in ``cli``'s table; on
  the copy, ``python -m groundwatch NAME`` runs it, and its ``UsageError`` is one line, exit 2.
- Adding a rate method: its name and branch in ``_estimate.py``, its words in ``_labels.py``; on
  the copy, the estimate says it; without the words, saying it fails (the control).

Adding a judge is tests/core/test_adding_a_judge.py's and tests/core/test_doc_maps.py's.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import groundwatch
from groundwatch.cli import _SUBCOMMANDS
from groundwatch.rates import RateMethod
from groundwatch.telemetry import semconv as sc

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "groundwatch"
PAGE = ROOT / "docs" / "contributing.md"
_PATH = re.compile(r"`([\w/.-]+\.(?:py|md|yml|json)|[\w/]+/)`")


def _recipe(heading: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _listed(section: str) -> set[str]:
    """The files a recipe names, as paths from the repository's root."""
    return {p if (ROOT / p).exists() else f"src/groundwatch/{p}" for p in _PATH.findall(section)}


def _files_naming_all(words: list[str]) -> set[str]:
    """The files of the package that write every one of ``words``."""
    return {
        p.relative_to(ROOT).as_posix()
        for p in SRC.rglob("*.py")
        if all(re.search(rf"\b{re.escape(w)}\b", p.read_text(encoding="utf-8")) for w in words)
    }


@pytest.mark.parametrize(
    "heading", ["Adding a span attribute", "Adding a subcommand", "Adding a rate method"]
)
def test_every_file_a_recipe_names_exists(heading: str) -> None:
    listed = _listed(_recipe(heading))
    assert len(listed) >= 4
    assert sorted(p for p in listed if not (ROOT / p).exists()) == []


def _span_attributes() -> list[str]:
    """The semconv constants the emitter's attribute generators yield (``yield sc.NAME, ...``)."""
    tree = ast.parse((SRC / "telemetry" / "_emitter.py").read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Yield) and isinstance(node.value, ast.Tuple):
            first = node.value.elts[0]
            if isinstance(first, ast.Subscript):
                first = first.value  # GROUNDWATCH_CLAIMS_BY_VERDICT[verdict]
            if isinstance(first, ast.Attribute) and ast.unparse(first.value) == "sc":
                names.append(first.attr)
    return names


def test_a_span_attribute_is_named_where_the_recipe_says() -> None:
    names = _span_attributes()
    assert {"GROUNDWATCH_LABEL", "GROUNDWATCH_AUDIT", "GROUNDWATCH_CONTENT_CLAIMS"} <= set(names)
    # Every attribute on the span is in docs/runtime.md's list (step 4).
    guide = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    written = set(re.findall(r"`([\w.]+)(?:=\w+)?`", guide))
    values: list[str] = []
    for name in names:
        value = getattr(sc, name)
        values.extend(value.values() if isinstance(value, dict) else [value])
    assert sorted(v for v in values if v not in written) == []
    # The files that write every span attribute's constant are the recipe's steps 1 and 2.
    plain = [n for n in names if isinstance(getattr(sc, n), str)]
    listed = _listed(_recipe("Adding a span attribute"))
    assert sorted(_files_naming_all(plain) - listed) == []


def test_the_subcommands_are_named_where_the_recipe_says() -> None:
    modules = [module for _, module in _SUBCOMMANDS]
    listed = _listed(_recipe("Adding a subcommand"))
    assert "src/groundwatch/cli/__init__.py" in _files_naming_all(modules)
    assert sorted(_files_naming_all(modules) - listed) == []


def test_the_rate_methods_are_named_where_the_recipe_says() -> None:
    methods = list(typing.get_args(RateMethod))
    assert {"ppi", "labels", "no_audit"} <= set(methods)
    quoted = [f'"{m}"' for m in methods]
    naming = {
        p.relative_to(ROOT).as_posix()
        for p in SRC.rglob("*.py")
        if all(q in p.read_text(encoding="utf-8") for q in quoted)
    }
    assert "src/groundwatch/rates/_labels.py" in naming
    assert sorted(naming - _listed(_recipe("Adding a rate method"))) == []


# --- each recipe on a copy of the package -------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "src" / "groundwatch"
    shutil.copytree(
        Path(groundwatch.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    return copy


def _edit(path: Path, after: str, added: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(after) == 1, after
    path.write_text(text.replace(after, after + added), encoding="utf-8")


def _run(args: list[str], copy: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    env.pop("GROUNDWATCH_DEBUG", None)
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


SPAN_SCRIPT = r"""
import json
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import groundwatch as gw
from groundwatch.telemetry import semconv as sc

seen = {}
for executor in ("thread", "process"):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monitor = gw.Monitor(
        judge=gw.LocalJudge(), executor=executor, tracer_provider=provider,
        sampler=gw.RatioSampler(1.0),
    )
    monitor.record(question="Q?", contexts=["Paris is in France."], answer="Paris is in France.")
    assert monitor.force_flush(60_000)
    monitor.shutdown()
    span = next(s for s in exporter.get_finished_spans() if s.name == sc.SPAN_EVALUATION)
    seen[executor] = span.attributes.get(sc.GROUNDWATCH_ANSWER_CHARS)
print(json.dumps(seen))
"""


def test_the_span_attribute_recipe_puts_it_on_the_span(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    _edit(  # step 1: the name, once
        copy / "telemetry" / "semconv.py",
        'GROUNDWATCH_TRUNCATED: Final = "groundwatch.truncated"\n',
        'GROUNDWATCH_ANSWER_CHARS: Final = "groundwatch.answer.chars"\n'
        '"""The answer\'s length in characters (a test\'s attribute)."""\n',
    )
    _edit(  # step 2: one yield in its family's generator
        copy / "telemetry" / "_emitter.py",
        "    yield sc.GROUNDWATCH_JUDGE, evaluation.judge\n",
        "    yield sc.GROUNDWATCH_ANSWER_CHARS, len(record.answer)\n",
    )
    done = _run(["-c", SPAN_SCRIPT], copy)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"thread": 19, "process": 19}
    # Step 5 is needed: the test of the span's exact attributes sees the new one.
    exact = "tests/runtime/test_telemetry.py::test_span_attributes_are_exactly_the_documented_ones"
    checked = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", exact], copy)
    assert checked.returncode == 1 and "groundwatch.answer.chars" in checked.stdout


HELLO = '''"""``groundwatch hello``: a test's subcommand."""

from __future__ import annotations

import argparse
from typing import Any

from .._shared.errors import UsageError


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("hello", help="say hello")
    p.add_argument("--name", default="world")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.name:
        raise UsageError("--name: give a name, e.g. --name Ada")
    print(f"hello {args.name}")
    return 0
'''


def test_the_subcommand_recipe_gives_a_command(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / "runtime" / "hello.py").write_text(HELLO, encoding="utf-8")  # step 1
    _edit(  # step 2: its line in the table
        copy / "cli" / "__init__.py",
        '    ("rules", "groundwatch.alerts.prometheus_rules"),\n',
        '    ("hello", "groundwatch.runtime.hello"),\n',
    )
    done = _run(["-m", "groundwatch", "hello", "--name", "Ada"], copy)
    assert (done.returncode, done.stdout) == (0, "hello Ada\n"), done.stderr
    # Step 3: what it raises is one line on stderr and exit 2, as for every command.
    failed = _run(["-m", "groundwatch", "hello", "--name", ""], copy)
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines() == [
        "groundwatch hello: error: --name: give a name, e.g. --name Ada"
    ]
    listed = _run(["-m", "groundwatch", "--help"], copy)
    assert "hello" in listed.stdout


RATE_SCRIPT = r"""
import json
from groundwatch.rates import RateTotals, describe_estimate, estimate_rate

totals = RateTotals(scored=1, flagged=1, probability_sum=0.9, probability_square_sum=0.81,
                    labelled=1, label_sum=1.0, labelled_flagged=1, label_flag_sum=1.0,
                    labelled_probability_sum=0.9, labelled_probability_square_sum=0.81,
                    label_probability_sum=0.9)
estimate = estimate_rate(totals)
print(json.dumps([estimate.method, describe_estimate(estimate)]))
"""


def _add_rate_method(copy: Path, words: bool) -> None:
    estimate = copy / "rates" / "_estimate.py"
    text = estimate.read_text(encoding="utf-8")
    old = 'RateMethod = Literal["ppi", "labels", "no_audit"]'
    assert text.count(old) == 1
    new = 'RateMethod = Literal["ppi", "labels", "no_audit", "one"]'
    estimate.write_text(text.replace(old, new), encoding="utf-8")
    _edit(  # step 1: its branch where it is tried
        estimate,
        "    lower, upper = wilson_interval(totals.label_sum, n, z)\n",
        "    if n == 1:  # a test's method: one label says all\n"
        '        return result("one", totals.label_sum, 0.0, 1.0)\n',
    )
    if words:  # step 2
        _edit(
            copy / "rates" / "_labels.py",
            '    "labels": "the audit labels alone",\n',
            '    "one": "one audit label",\n',
        )


@pytest.mark.parametrize("words", [True, False])
def test_the_rate_method_recipe_is_said_everywhere_only_with_its_words(
    tmp_path: Path, words: bool
) -> None:
    copy = _copy(tmp_path)
    _add_rate_method(copy, words)
    done = _run(["-c", RATE_SCRIPT], copy)
    if not words:  # the control: a method without its words cannot be said
        assert done.returncode != 0 and "KeyError: 'one'" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    method, line = json.loads(done.stdout.splitlines()[-1])
    assert method == "one"
    assert "1 audit labels of 1 judged answers; one audit label)" in line
