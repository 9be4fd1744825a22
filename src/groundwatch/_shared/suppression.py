"""OpenTelemetry's instrumentation suppression, in one place.

groundwatch suppresses instrumentation while a judge runs, so that a judge's own HTTP or LLM
calls create no spans in the user's traces and a judge that calls the framework itself does not
feed records back into the monitor; integrations ask :func:`suppressed` before they capture.
"""

from __future__ import annotations

from opentelemetry import context as otel_context

__all__ = ["SUPPRESS_INSTRUMENTATION_KEYS", "suppressed", "suppressed_context"]

SUPPRESS_INSTRUMENTATION_KEYS: tuple[str, ...] = (
    getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation"),
    "suppress_instrumentation",
)
"""The context keys OpenTelemetry instrumentations check: ``opentelemetry.context`` defines the
first (a private name, read here only, with its documented value as the fallback);
``opentelemetry-instrumentation``'s ``suppress_instrumentation`` also sets the plain string,
which older instrumentations read. Setting both needs no extra dependency."""


def suppressed_context() -> otel_context.Context:
    """The current context with instrumentation suppressed (both keys set)."""
    ctx = otel_context.get_current()
    for key in SUPPRESS_INSTRUMENTATION_KEYS:
        ctx = otel_context.set_value(key, True, ctx)
    return ctx


def suppressed() -> bool:
    """Whether instrumentation is suppressed in the current context."""
    # One context lookup: integrations ask this when an interaction starts.
    ctx = otel_context.get_current()
    return any(ctx.get(key) for key in SUPPRESS_INSTRUMENTATION_KEYS)
