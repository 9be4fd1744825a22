"""OpenTelemetry output of groundwatch: names (:mod:`.semconv`), spans, log events, metrics.

The integrations import :mod:`.semconv` (names only) when the application starts; the emitter
and the OpenTelemetry API it needs load when one of its names is first used (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("._emitter", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
