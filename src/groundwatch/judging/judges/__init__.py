"""Judges: the embedded local judge, the LLM judge and the cascade.

Each judge's module loads when its name is first used (PEP 562), so a monitor with the local
judge never imports the LLM judge's client code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import Judge
    from .cascade import CascadeJudge
    from .local import LocalJudge
    from .openai import OpenAIJudge
    from .semantic import SemanticJudge

__all__ = ["CascadeJudge", "Judge", "LocalJudge", "OpenAIJudge", "SemanticJudge"]

_WHERE = {
    "CascadeJudge": ".cascade",
    "Judge": "._base",
    "LocalJudge": ".local",
    "OpenAIJudge": ".openai",
    "SemanticJudge": ".semantic",
}

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any

    def __getattr__(name: str) -> Any:
        where = _WHERE.get(name)
        if where is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
