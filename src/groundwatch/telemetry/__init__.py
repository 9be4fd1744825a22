"""OpenTelemetry output of groundwatch: names (:mod:`.semconv`), spans, log events, metrics.

The integrations import :mod:`.semconv` (names only) when the application starts; the emitter
and the OpenTelemetry API it needs load when one of its names is first used (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._shared.lazy import lazy_names
from . import semconv

if TYPE_CHECKING:
    from ._emitter import (
        ReportedError,
        Stats,
        Telemetry,
        cap_content,
        collect_attributes,
        scrub_secrets,
        user_attributes,
    )

__all__ = [
    "ReportedError",
    "Stats",
    "Telemetry",
    "cap_content",
    "collect_attributes",
    "scrub_secrets",
    "semconv",
    "user_attributes",
]

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(
        __name__,
        {
            name: "._stats" if name == "Stats" else "._emitter"
            for name in __all__
            if name != "semconv"
        },
        __all__,
    )
