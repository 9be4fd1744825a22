"""OpenTelemetry output of groundwatch: names (:mod:`.semconv`), spans, log events, metrics."""

from . import semconv
from ._emitter import Stats, Telemetry, cap_content, scrub_secrets

__all__ = ["Stats", "Telemetry", "cap_content", "scrub_secrets", "semconv"]
