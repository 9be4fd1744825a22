"""Guards for tests that need an optional extra: skip locally, fail in CI (which installs it)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

SEMANTIC_MODULES = ("numpy", "onnxruntime", "tokenizers", "groundwatch_minilm")
NLI_MODULES = ("numpy", "onnxruntime", "tokenizers", "onnx")
TRANSFORMERS_MODULES = ("torch", "transformers")
# .ci/run's own step for the nli-transformers extra sets this: there its tests must run.
TRANSFORMERS_STEP = "GROUNDWATCH_TEST_TRANSFORMERS"
ZH_MODULES = ("rjieba",)
SERVE_MODULES = ("aiohttp", "opentelemetry.proto")


def _require(
    extra: str,
    modules: tuple[str, ...],
    module_level: bool,
    required_where: str = "CI",
    note: str = "",
) -> None:
    """Skip unless ``modules`` import; fail instead where the variable ``required_where`` is
    set (a run that installs the extra)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get(required_where):
        pytest.fail(
            f"the {extra} extra is missing with {required_where} set ({', '.join(missing)})",
            pytrace=False,
        )
    pytest.skip(
        f'needs the {extra} extra: pip install -e ".[{extra}]"{note}',
        allow_module_level=module_level,
    )


def require_semantic_extra() -> None:
    """Skip (or, with ``CI`` set, fail) unless ``groundwatch[semantic]`` is installed."""
    _require("semantic", SEMANTIC_MODULES, module_level=True)


def require_nli_runtime() -> None:
    """Skip (or, with ``CI`` set, fail) unless NLIJudge's ONNX runtime (``groundwatch[nli]``)
    and ``onnx``, which builds the test models, are installed; requirements-dev.txt installs
    both."""
    _require("nli", NLI_MODULES, module_level=True)


def require_transformers_runtime() -> None:
    """Skip this module unless ``groundwatch[nli-transformers]`` (PyTorch and transformers) is
    installed; fail instead where ``GROUNDWATCH_TEST_TRANSFORMERS`` is set.

    PyTorch is hundreds of MB, too heavy for the README's test command, so requirements-dev.txt
    leaves it out and these tests skip there, CI's main run included; ``.ci/run`` runs them in
    a venv of their own with that variable set, where a missing package fails them."""
    _require(
        "nli-transformers",
        TRANSFORMERS_MODULES,
        module_level=True,
        required_where=TRANSFORMERS_STEP,
        note=" (PyTorch; .ci/run tests it in its own step)",
    )


# .ci/run's own step for the reference implementation of prediction-powered inference sets this.
PPI_STEP = "GROUNDWATCH_TEST_PPI"


def require_ppi_reference() -> None:
    """Skip this module unless ``ppi-python`` (the PPI authors' reference implementation) is
    installed; fail instead where ``GROUNDWATCH_TEST_PPI`` is set.

    It pulls in numba, pandas, statsmodels and scikit-learn (hundreds of MB), so
    requirements-dev.txt leaves it out; ``.ci/run`` runs these tests in a venv of their own."""
    missing = [m for m in ("numpy", "ppi_py") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get(PPI_STEP):
        pytest.fail(f"ppi-python is missing with {PPI_STEP} set ({', '.join(missing)})")
    pytest.skip(
        "needs ppi-python: pip install ppi-python (.ci/run tests it in its own step)",
        allow_module_level=True,
    )


def require_zh_extra() -> None:
    """Skip this test (or, with ``CI`` set, fail it) unless ``groundwatch[zh]`` is installed."""
    _require("zh", ZH_MODULES, module_level=False)


def require_serve_extra() -> None:
    """Skip this module (or, with ``CI`` set, fail) unless ``groundwatch[serve]`` is installed."""
    _require("serve", SERVE_MODULES, module_level=True)


# What the README's test command needs beyond pip: Debian packages (.ci/run installs them). A
# test that needs a missing one skips with SYSTEM_TOOL_HINT in its reason, and the run ends with
# one line naming every missing package (tests/conftest.py), so no skip goes unexplained.
SYSTEM_TOOL_HINT = "apt-get install"


def require_system_tool(*names: str, package: str, module_level: bool = False) -> str:
    """The path of the first of ``names`` on PATH; skips the test (or the module) when none is
    found, naming the Debian ``package`` that provides it, or fails with ``CI`` set."""
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    if os.environ.get("CI"):
        pytest.fail(f"{names[0]} is missing in CI: .ci/run installs {package}", pytrace=False)
    pytest.skip(f"needs {names[0]} ({SYSTEM_TOOL_HINT} {package})", allow_module_level=module_level)
