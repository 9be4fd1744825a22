"""Judges: the embedded local judge, the LLM judge and the cascade."""

from ._base import Judge
from .cascade import CascadeJudge
from .local import LocalJudge
from .openai import OpenAIJudge
from .semantic import SemanticJudge

__all__ = ["CascadeJudge", "Judge", "LocalJudge", "OpenAIJudge", "SemanticJudge"]
