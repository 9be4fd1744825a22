"""groundwatch: online hallucination monitoring for RAG pipelines, on OpenTelemetry."""

import logging

from ._config import ConfigWarning
from .alerts import Alert, AlertingHook, DropDetector
from .judging.evaluate import aevaluate, evaluate
from .judging.judges import CascadeJudge, Judge, LocalJudge, OpenAIJudge, SemanticJudge
from .judging.scoring import LabelPolicy
from .queue import RedisQueue
from .runtime.dataset import DatasetSink
from .runtime.monitor import Monitor
from .runtime.sampling import (
    Decision,
    RateLimitSampler,
    RatioSampler,
    RouteSampler,
    Sampler,
    TokenBudgetSampler,
)
from .telemetry.worker_export import otlp_worker_providers
from .types import Claim, Evaluation, Evidence, Judgement, Passage, RagRecord, Usage

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "Alert",
    "AlertingHook",
    "CascadeJudge",
    "Claim",
    "ConfigWarning",
    "DatasetSink",
    "Decision",
    "DropDetector",
    "Evaluation",
    "Evidence",
    "Judge",
    "Judgement",
    "LabelPolicy",
    "LocalJudge",
    "Monitor",
    "OpenAIJudge",
    "Passage",
    "RagRecord",
    "RateLimitSampler",
    "RatioSampler",
    "RedisQueue",
    "RouteSampler",
    "Sampler",
    "SemanticJudge",
    "TokenBudgetSampler",
    "Usage",
    "__version__",
    "aevaluate",
    "evaluate",
    "otlp_worker_providers",
]
