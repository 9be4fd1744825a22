"""Judges: the embedded local judge, its semantic and entailment variants, the LLM judge and
the cascade.

Each judge's module loads when its name is first used (PEP 562), so a monitor with the local
judge never imports the LLM judge's client code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._shared.lazy import lazy_names

if TYPE_CHECKING:
    from ._base import Judge
    from .cascade import CascadeJudge
    from .local import LocalJudge
    from .nli import NLIJudge
    from .openai import OpenAIJudge
    from .semantic import SemanticJudge

__all__ = ["CascadeJudge", "Judge", "LocalJudge", "NLIJudge", "OpenAIJudge", "SemanticJudge"]

_WHERE = {
    "CascadeJudge": ".cascade",
    "Judge": "._base",
    "LocalJudge": ".local",
    "NLIJudge": ".nli",
    "OpenAIJudge": ".openai",
    "SemanticJudge": ".semantic",
}

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
