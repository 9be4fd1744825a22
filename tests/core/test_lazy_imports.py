"""``import groundwatch`` loads the package's face only; each public name loads its part on first
use (PEP 562). Every check runs in a fresh interpreter: this process has imported everything.

The cost itself is a benchmark (benchmarks/import_cost.py), not a timed test.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import groundwatch

INIT = Path(groundwatch.__file__)

# What an application must not pay for when it imports groundwatch at start-up (every worker
# process too): the alerts, the judges and their scoring tables, asyncio, the runtime, and the
# optional clients.
HEAVY = (
    "asyncio",
    "groundwatch.alerts",
    "groundwatch.alerts.detector",
    "groundwatch.judging.evaluate",
    "groundwatch.judging.judges",
    "groundwatch.judging.judges.openai",
    "groundwatch.judging.numbers",
    "groundwatch.queue",
    "groundwatch.runtime.monitor",
    "groundwatch.telemetry._emitter",
    "numpy",
    "openai",
    "redis",
)


def fresh(code: str) -> Any:
    """Run ``code`` in a fresh interpreter; what it prints as JSON on its last line."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def modules_after(statement: str) -> set[str]:
    return set(fresh(f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"))


def test_import_groundwatch_loads_no_heavy_part() -> None:
    loaded = modules_after("import groundwatch")
    assert "groundwatch" in loaded
    assert sorted(loaded.intersection(HEAVY)) == []


def test_the_integrations_import_loads_no_scoring() -> None:
    # What groundwatch_langchain and groundwatch_llamaindex import when they are imported.
    loaded = modules_after(
        "import groundwatch.integration\nfrom groundwatch.telemetry import semconv"
    )
    assert "groundwatch.integration" in loaded and "groundwatch.telemetry.semconv" in loaded
    unwanted = {
        "groundwatch.alerts",
        "groundwatch.judging.judges",
        "groundwatch.judging.evaluate",
        "groundwatch.queue",
        "groundwatch.runtime.monitor",
        "groundwatch.telemetry._emitter",
        "numpy",
        "openai",
    }
    assert sorted(loaded & unwanted) == []


def test_every_public_name_resolves_from_a_fresh_import() -> None:
    # Each name on its own, in a fresh interpreter: none may rely on another having loaded
    # its module first.
    code = (
        "import json, importlib, groundwatch\n"
        "out = {}\n"
        "for name in groundwatch.__all__:\n"
        "    exec(f'from groundwatch import {name} as value')\n"
        "    out[name] = getattr(value, '__module__', None) or type(value).__name__\n"
        "print(json.dumps([groundwatch.__all__, sorted(dir(groundwatch)), out]))"
    )
    all_names, listed, homes = fresh(code)
    assert all_names == groundwatch.__all__
    assert set(all_names) <= set(listed)
    assert set(homes) == set(all_names)
    for name in all_names:
        assert getattr(groundwatch, name) is not None
    assert homes["Monitor"] == "groundwatch.runtime.monitor"
    assert homes["RedisQueue"] == "groundwatch.queue.redis"
    assert homes["__version__"] == "str"


def test_an_unknown_name_is_an_attribute_error() -> None:
    result = fresh(
        "import json, groundwatch\n"
        "try:\n"
        "    groundwatch.NoSuchThing\n"
        "except AttributeError as exc:\n"
        "    print(json.dumps(str(exc)))\n"
    )
    assert result == "module 'groundwatch' has no attribute 'NoSuchThing'"


def test_what_type_checkers_see_is_what_loads() -> None:
    # The imports under ``if TYPE_CHECKING:`` (what mypy and IDEs read) and the table the
    # module's __getattr__ loads from name the same things in the same places, and __all__
    # lists exactly them.
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    checked: dict[str, str] = {}
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    checked[alias.asname or alias.name] = "." * imp.level + (imp.module or "")
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_WHERE":
            where = ast.literal_eval(node.value)
    assert checked == where
    assert sorted(where) == sorted(groundwatch.__all__)


def test_version_is_the_installed_distributions() -> None:
    assert groundwatch.__version__ == importlib.metadata.version("groundwatch")


def test_telemetry_names_load_the_emitter_on_first_use() -> None:
    result = fresh(
        "import json, sys\n"
        "from groundwatch.telemetry import semconv\n"
        "before = 'groundwatch.telemetry._emitter' in sys.modules\n"
        "from groundwatch.telemetry import Telemetry\n"
        "print(json.dumps([before, Telemetry.__module__]))"
    )
    assert result == [False, "groundwatch.telemetry._emitter"]
