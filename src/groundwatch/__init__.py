"""groundwatch: online hallucination monitoring for RAG pipelines, on OpenTelemetry.

Applications import this package at start-up (and so does every worker process), so importing
it loads nothing but this file: each public name below is imported on first use (PEP 562), and
only the part it lives in comes with it; the alerts, the judges, the scoring tables and asyncio
load when something needs them. ``benchmarks/import_cost.py`` measures the cost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ._shared.lazy import lazy_names
from .judging import judges as _judges

logging.getLogger(__name__).addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from ._shared.config import ConfigWarning
    from ._shared.guard import LossWarning
    from ._version import __version__
    from .alerts import Alert, AlertingHook, DropDetector
    from .dashboards import MLflowSink, PhoenixSink
    from .judging.evaluate import aevaluate, evaluate
    from .judging.judges import *  # noqa: F403 (the judges' own list: judges.__all__)
    from .judging.scoring import LabelPolicy
    from .queue import RedisQueue
    from .rates import (
        JudgeErrorRates,
        RateEstimate,
        RateTotals,
        estimate_rate,
        is_audited,
        judge_error_rates,
    )
    from .runtime.dataset import DatasetSink
    from .runtime.monitor import Monitor
    from .runtime.options import AuditOptions, CaptureOptions, QueueOptions, ScoringOptions
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

# Where each public name lives (the module, relative to this package). The imports above are the
# same list for type checkers; tests/core/test_lazy_imports.py holds the two together.
_WHERE = {
    "ConfigWarning": "._shared.config",
    "LossWarning": "._shared.guard",
    "__version__": "._version",
    "Alert": ".alerts",
    "AlertingHook": ".alerts",
    "DropDetector": ".alerts",
    "PhoenixSink": ".dashboards",
    "MLflowSink": ".dashboards",
    "aevaluate": ".judging.evaluate",
    "evaluate": ".judging.evaluate",
    # The judges, from the judges' own table (that package's face loads no judge).
    **dict.fromkeys(_judges.__all__, ".judging.judges"),
    "LabelPolicy": ".judging.scoring",
    "RedisQueue": ".queue",
    "JudgeErrorRates": ".rates",
    "RateEstimate": ".rates",
    "RateTotals": ".rates",
    "estimate_rate": ".rates",
    "is_audited": ".rates",
    "judge_error_rates": ".rates",
    "DatasetSink": ".runtime.dataset",
    "Monitor": ".runtime.monitor",
    "AuditOptions": ".runtime.options",
    "CaptureOptions": ".runtime.options",
    "QueueOptions": ".runtime.options",
    "ScoringOptions": ".runtime.options",
    "Decision": ".runtime.sampling",
    "RateLimitSampler": ".runtime.sampling",
    "RatioSampler": ".runtime.sampling",
    "RouteSampler": ".runtime.sampling",
    "Sampler": ".runtime.sampling",
    "TokenBudgetSampler": ".runtime.sampling",
    "otlp_worker_providers": ".telemetry.worker_export",
    "Claim": ".types",
    "Evaluation": ".types",
    "Evidence": ".types",
    "Judgement": ".types",
    "Passage": ".types",
    "RagRecord": ".types",
    "Usage": ".types",
}

__all__ = [
    "Alert",
    "AlertingHook",
    "AuditOptions",
    "CaptureOptions",
    "Claim",
    "ConfigWarning",
    "DatasetSink",
    "Decision",
    "DropDetector",
    "Evaluation",
    "Evidence",
    "JudgeErrorRates",
    "Judgement",
    "LabelPolicy",
    "LossWarning",
    "MLflowSink",
    "Monitor",
    "Passage",
    "PhoenixSink",
    "QueueOptions",
    "RagRecord",
    "RateEstimate",
    "RateLimitSampler",
    "RateTotals",
    "RatioSampler",
    "RedisQueue",
    "RouteSampler",
    "Sampler",
    "ScoringOptions",
    "TokenBudgetSampler",
    "Usage",
    "__version__",
    "aevaluate",
    "estimate_rate",
    "evaluate",
    "is_audited",
    "judge_error_rates",
    "otlp_worker_providers",
]
__all__ += _judges.__all__


if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
