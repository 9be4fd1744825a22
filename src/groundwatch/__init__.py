"""groundwatch: online hallucination monitoring for RAG pipelines, on OpenTelemetry."""

import logging

from ._evaluate import aevaluate, evaluate
from .judges import CascadeJudge, Judge, LocalJudge, OpenAIJudge
from .scoring import LabelPolicy
from .types import Claim, Evaluation, Evidence, Judgement, Passage, RagRecord, Usage

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "CascadeJudge",
    "Claim",
    "Evaluation",
    "Evidence",
    "Judge",
    "Judgement",
    "LabelPolicy",
    "LocalJudge",
    "OpenAIJudge",
    "Passage",
    "RagRecord",
    "Usage",
    "__version__",
    "aevaluate",
    "evaluate",
]
