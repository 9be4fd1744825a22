"""groundwatch: online hallucination monitoring for RAG pipelines, on OpenTelemetry."""

import logging

from ._evaluate import aevaluate, evaluate
from .judges import Judge, LocalJudge
from .monitor import Monitor
from .sampling import (
    Decision,
    RateLimitSampler,
    RatioSampler,
    RouteSampler,
    Sampler,
    TokenBudgetSampler,
)
from .scoring import LabelPolicy
from .types import Claim, Evaluation, Evidence, Judgement, Passage, RagRecord, Usage

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "Claim",
    "Decision",
    "Evaluation",
    "Evidence",
    "Judge",
    "Judgement",
    "LabelPolicy",
    "LocalJudge",
    "Monitor",
    "Passage",
    "RagRecord",
    "RateLimitSampler",
    "RatioSampler",
    "RouteSampler",
    "Sampler",
    "TokenBudgetSampler",
    "Usage",
    "__version__",
    "aevaluate",
    "evaluate",
]
