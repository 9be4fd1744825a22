"""Judges: the embedded local judge, its semantic and entailment variants, the published
detectors (HHEM, MiniCheck, LettuceDetect: their shared part is ``_detectors``), the LLM judge
and the cascade.

Each judge's module loads when its name is first used (PEP 562), so a monitor with the local
judge never imports the LLM judge's client code.

Adding a judge is its module, named after its class (``XJudge`` in ``x.py``), and its line in
the list below, for type checkers and for ``__all__``; the lazy-import table here and the
package root's names follow from it (``tests/core/test_doc_maps.py`` holds the two together).
A line in :mod:`groundwatch.judging.registry` offers it to the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._shared.lazy import lazy_names

if TYPE_CHECKING:
    from ._base import Judge
    from .cascade import CascadeJudge
    from .hhem import HHEMJudge
    from .lettucedetect import LettuceDetectJudge
    from .local import LocalJudge
    from .minicheck import MiniCheckJudge
    from .nli import NLIJudge
    from .openai import OpenAIJudge
    from .semantic import SemanticJudge

__all__ = [
    "CascadeJudge",
    "HHEMJudge",
    "Judge",
    "LettuceDetectJudge",
    "LocalJudge",
    "MiniCheckJudge",
    "NLIJudge",
    "OpenAIJudge",
    "SemanticJudge",
]


def _module_of(name: str) -> str:
    """Where a public name lives: the protocol in ``_base``, each judge ``XJudge`` in ``x``."""
    return "._base" if name == "Judge" else "." + name.removesuffix("Judge").lower()


_WHERE = {name: _module_of(name) for name in __all__}

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
