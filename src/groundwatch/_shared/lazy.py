"""Names a package hands on but imports on first use (PEP 562), written once for every package
face that needs it (``groundwatch``, ``groundwatch.telemetry``, ``groundwatch.judging.judges``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, where: Mapping[str, str], public: Collection[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``where`` is
    imported from its (relative) module on first use and kept as a plain module attribute;
    ``dir()`` lists ``public`` too.

    Assign them under ``if not TYPE_CHECKING:``: a module ``__getattr__`` seen by mypy would
    type every unknown name ``Any``; type checkers read the names from imports under
    ``if TYPE_CHECKING:`` instead.
    """
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source, package), name)
        setattr(module, name, value)  # the next lookup is a plain module attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *public})

    return __getattr__, __dir__
