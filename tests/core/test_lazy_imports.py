"""``import groundwatch`` loads the package's face only; each public name loads its part on first
use (PEP 562). Every check runs in a fresh interpreter: this process has imported everything.

The cost itself is a benchmark (benchmarks/import_cost.py), not a timed test.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import groundwatch

from .package_faces import lazy_tables

INIT = Path(groundwatch.__file__)

# What an application must not pay for when it imports groundwatch at start-up (every worker
# process too): the alerts, the judges and their scoring tables, asyncio, the runtime, and the
# optional clients.
HEAVY = (
    "asyncio",
    "groundwatch.alerts",
    "groundwatch.alerts.detector",
    "groundwatch.judging.evaluate",
    # The judges' package face (a table of names, nothing more) loads with the root; no judge.
    "groundwatch.judging.judges._base",
    "groundwatch.judging.judges.local",
    "groundwatch.judging.judges.openai",
    "groundwatch.judging.judges._detectors",
    "groundwatch.judging.judges.hhem",
    "groundwatch.judging.text.numerals",
    "groundwatch.queue",
    "groundwatch.runtime.monitor",
    "groundwatch.telemetry._emitter",
    "numpy",
    "onnxruntime",
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


# What ``from groundwatch import Monitor`` must not load (benchmarks/import_cost.py measures the
# cost): record() needs the record, the sampler and the counters; the judge, the scoring, the
# worker, the runners and the telemetry come with the constructor. Each was once on this import.
MONITOR_HEAVY = (
    "asyncio",  # the worker's loop, the async runner
    "concurrent.futures",
    "groundwatch._shared.inputs",  # passages: pydantic models
    "groundwatch._shared.passage",
    "groundwatch._fields",
    "groundwatch.judging.evaluate",  # default_judge: LocalJudge and its text toolkit
    "groundwatch.judging.judges.local",
    "groundwatch.judging.text.lexical",
    "groundwatch.judging.text.numerals",
    "groundwatch.judging.scoring",  # the default LabelPolicy
    "groundwatch.judging.text.structured",
    "groundwatch.runtime.feedback",
    "groundwatch.runtime.pipeline",
    "groundwatch.runtime.runners.process_runner",
    "groundwatch.runtime.runners.worker_process",
    "groundwatch.runtime.results",
    "groundwatch.runtime.runners.choice",
    "groundwatch.runtime.worker",
    "groundwatch.telemetry._emitter",
    "groundwatch.telemetry.worker_export",
    "groundwatch.types",  # pydantic models
    "importlib.metadata",  # groundwatch.__version__, and pydantic's plugins at a first model
    "multiprocessing",
    "pickle",
)


def test_every_name_the_import_tests_watch_is_a_module() -> None:
    # A module renamed or moved would otherwise leave its old name here, never loaded, and the
    # tests above would pass whatever the import loads.
    import importlib.util

    missing = [name for name in (*HEAVY, *MONITOR_HEAVY) if importlib.util.find_spec(name) is None]
    assert missing == []


def test_from_groundwatch_import_monitor_defines_no_model_and_loads_no_judge() -> None:
    loaded, models = fresh(
        "import json, sys\n"
        "from pydantic import BaseModel\n"
        "from groundwatch import Monitor\n"
        "models = [c.__qualname__ for c in BaseModel.__subclasses__()]\n"
        "print(json.dumps([sorted(sys.modules), models]))"
    )
    assert "groundwatch.runtime.monitor" in loaded
    assert sorted(set(loaded) & set(MONITOR_HEAVY)) == []
    # Defining the first pydantic model costs about half of importing pydantic and the OTel API.
    assert models == []


def test_from_groundwatch_import_monitor_loads_no_pydantic_model_machinery() -> None:
    # pydantic's package is lazy; its models (pydantic.main, the schema builder) cost more than
    # the rest of groundwatch's start-up, and the request path needs none of them.
    loaded = modules_after("from groundwatch import Monitor")
    assert "groundwatch.runtime.monitor" in loaded
    assert sorted(m for m in loaded if m == "pydantic.main" or m.startswith("pydantic._")) == []


def test_a_tool_output_that_is_a_pydantic_model_is_read_as_its_fields() -> None:
    # Without importing pydantic's models at start-up, a model among a tool's outputs is still
    # one (readable, and written as its fields).
    from pydantic import BaseModel

    from groundwatch._shared.capture import readable_tool_output, tool_output_text

    class Weather(BaseModel):
        city: str
        celsius: int

    assert readable_tool_output(Weather(city="Oslo", celsius=3))
    assert (
        tool_output_text(Weather(city="Oslo", celsius=3), 100) == '{"celsius": 3, "city": "Oslo"}'
    )


def test_a_monitor_still_loads_what_it_needs_when_built() -> None:
    # The deferred imports resolve (a typo in one would surface only here, at construction).
    result = fresh(
        "import json, sys\n"
        "from groundwatch import Monitor\n"
        "m = Monitor(executor='thread', shutdown_on_exit=False)\n"
        "m.record(question='q', contexts=['Paris is in France.'], answer='Paris is in France.')\n"
        "ok = m.force_flush(60000)\n"
        "m.shutdown()\n"
        "scoring = 'groundwatch.judging.scoring' in sys.modules\n"
        "print(json.dumps([ok, type(m.judge).__name__, scoring]))"
    )
    assert result == [True, "LocalJudge", True]


def test_the_integrations_import_loads_no_scoring() -> None:
    # What groundwatch_langchain and groundwatch_llamaindex import when they are imported.
    loaded = modules_after(
        "import groundwatch.integration\nfrom groundwatch.telemetry import semconv"
    )
    assert "groundwatch.integration" in loaded and "groundwatch.telemetry.semconv" in loaded
    unwanted = {
        "groundwatch.alerts",
        "groundwatch.judging.judges._base",
        "groundwatch.judging.evaluate",
        "groundwatch.queue",
        "groundwatch.runtime.monitor",
        "groundwatch.telemetry._emitter",
        "numpy",
        "openai",
    }
    assert sorted(loaded & unwanted) == []


def test_the_integrations_core_import_defines_no_model() -> None:
    models = fresh(
        "import json\n"
        "from pydantic import BaseModel\n"
        "import groundwatch.integration\n"
        "from groundwatch.telemetry import semconv\n"
        "print(json.dumps([c.__qualname__ for c in BaseModel.__subclasses__()]))"
    )
    assert models == []


@pytest.mark.parametrize(
    ("package", "instrumentor"),
    [
        ("groundwatch_langchain", "GroundwatchLangChainInstrumentor"),
        ("groundwatch_llamaindex", "GroundwatchLlamaIndexInstrumentor"),
    ],
)
def test_an_integration_loads_its_instrumentor_on_use(package: str, instrumentor: str) -> None:
    # OpenTelemetry's BaseInstrumentor (wrapt, packaging, importlib.metadata) cost more than the
    # rest of the integration's import; the entry point and instrument() read it on first use.
    pytest.importorskip(package)
    before, after, home = fresh(
        "import json, sys\n"
        f"import {package}\n"
        "before = sorted(m for m in sys.modules if m.startswith('opentelemetry.instrumentation'))\n"
        f"cls = {package}.{instrumentor}\n"
        "after = 'opentelemetry.instrumentation.instrumentor' in sys.modules\n"
        "print(json.dumps([before, after, cls.__module__]))"
    )
    assert before == []
    assert after is True
    assert home == f"{package}._instrumentor"


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
    checked, where, _ = lazy_tables("groundwatch")
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
