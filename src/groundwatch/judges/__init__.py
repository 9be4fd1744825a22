"""Judges: the embedded local judge, the LLM judge and the cascade."""

from ._base import Judge
from .local import LocalJudge

__all__ = ["Judge", "LocalJudge"]
