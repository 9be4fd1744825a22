"""``import groundwatch`` and its core work with pydantic and opentelemetry-api alone.

The optional packages (the OpenTelemetry SDK, openai, LangChain, LlamaIndex, numpy) are blocked
in a subprocess, as if not installed; CI also runs ``core_only.py`` in a venv that truly has only
the core dependencies, at their lowest allowed versions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("core_only.py")
BLOCK = """
import importlib.abc, runpy, sys
BLOCKED = ("opentelemetry.sdk", "openai", "langchain_core", "llama_index", "numpy")

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Block())
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def test_core_works_without_the_optional_packages() -> None:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    env.pop("GROUNDWATCH_RAISE_INTERNAL_ERRORS", None)
    done = subprocess.run(
        [sys.executable, "-c", BLOCK, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "GROUNDWATCH_EXECUTOR": "thread"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "core-only: ok" in done.stdout
