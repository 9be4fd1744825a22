"""The ``error.type`` values of a failed evaluation, and the one function that maps any failure
onto them.

A ground-floor module on purpose (it imports nothing of groundwatch): the judges name their
failures with these values and the telemetry exports them (:mod:`groundwatch.telemetry.semconv`
re-exports every name), and neither has to import the other for them. The list is documented
in docs/llm-judge.md ("Errors").
"""

from __future__ import annotations

import re
from typing import Final

# error.type values set by the runtime (others are exception class names).
ERROR_TIMEOUT: Final = "timeout"
ERROR_SHUTDOWN: Final = "shutdown"
ERROR_FORK: Final = "fork"
ERROR_INVALID_INPUT: Final = "invalid_input"
ERROR_SAMPLER: Final = "sampler_error"
ERROR_INTERNAL: Final = "internal"

# --- error.type of a failed evaluation (Evaluation.error_type; docs/llm-judge.md "Errors") ------
# Every failure a judge or the runtime reports ends with one of these; HTTP statuses without a
# name of their own are "http_<status>" (ERROR_HTTP_PREFIX + the code, e.g. "http_401").
ERROR_HTTP_PREFIX: Final = "http_"
ERROR_CONNECTION: Final = "connection"
ERROR_RATE_LIMITED: Final = "rate_limited"
ERROR_CIRCUIT_OPEN: Final = "circuit_open"
ERROR_FORMAT_UNSUPPORTED: Final = "format_unsupported"
ERROR_BAD_REPLY: Final = "bad_reply"
ERROR_TRUNCATED: Final = "truncated"
ERROR_REFUSED: Final = "refused"
ERROR_TRANSPORT: Final = "transport"
"""A record the producer could not send to the queue (``groundwatch.evaluations.dropped``)."""
ERROR_TYPES: Final = (
    ERROR_TIMEOUT,
    ERROR_CONNECTION,
    ERROR_RATE_LIMITED,
    ERROR_CIRCUIT_OPEN,
    ERROR_FORMAT_UNSUPPORTED,
    ERROR_BAD_REPLY,
    ERROR_TRUNCATED,
    ERROR_REFUSED,
    ERROR_INVALID_INPUT,
    ERROR_TRANSPORT,
    ERROR_INTERNAL,
)
"""The named error types; with ``http_<status>`` they are the whole documented list."""

# --- error.type of a write a dashboard sink lost (docs/dashboards.md "When a write is lost") ----
# Counted in groundwatch.errors under the sink's component (``phoenix``, ``mlflow``). A write that
# failed for good carries its last failure's type from the list above (``connection``,
# ``timeout``, ``rate_limited``, ``http_<status>``, ``bad_reply``, ``internal``); these name the
# causes that list has no word for.
ERROR_QUEUE_FULL: Final = "queue_full"
"""The sink's bounded queue was full: the write was refused on the worker thread."""
ERROR_SPAN_NOT_FOUND: Final = "span_not_found"
"""The server never showed the span the write annotates within the sink's wait for it."""
DELIVERY_ERROR_TYPES: Final = (
    ERROR_QUEUE_FULL,
    ERROR_SPAN_NOT_FOUND,
    ERROR_SHUTDOWN,
    ERROR_TIMEOUT,
    ERROR_CONNECTION,
    ERROR_RATE_LIMITED,
    ERROR_BAD_REPLY,
    ERROR_INVALID_INPUT,
    ERROR_INTERNAL,
)
"""The ``error.type`` values of a dashboard sink's lost writes; with ``http_<status>`` (a
refusal), the whole list."""

# Causes named by the runtime or by exception classes that have a documented type of their own.
_ERROR_ALIASES = {
    "judge_unresponsive": ERROR_TIMEOUT,
    "TimeoutError": ERROR_TIMEOUT,
    "ConnectionError": ERROR_CONNECTION,
    "ConnectionRefusedError": ERROR_CONNECTION,
    "ConnectionResetError": ERROR_CONNECTION,
}


def documented_error_type(error_type: str | None) -> str:
    """The documented error type (:data:`ERROR_TYPES` or ``http_<status>``) for a failure:
    a known cause maps to its type, anything else (an exception class name, a runtime fault
    such as a lost worker process) is ``internal``. Every judge's failure passes through here,
    so ``Evaluation.error_type`` and the ``error.type`` attributes take one list of values."""
    if error_type in ERROR_TYPES:
        return error_type
    http = ERROR_HTTP_PREFIX
    if error_type and error_type.startswith(http) and error_type[len(http) :].isdigit():
        return error_type
    return _ERROR_ALIASES.get(error_type or "", ERROR_INTERNAL)


_RAISED = re.compile(r"([A-Z_][\w.]*): ")
"""How a judge that raised names its exception in ``Judgement.error``: ``"<class>: <message>"``
(``judging.judges._base.judgement_from_error`` writes it)."""


def exception_type(error_type: str | None, error: str | None) -> str | None:
    """The class of the exception behind a failed evaluation, where a judge raised one
    (``exception.type`` in OpenTelemetry's conventions: ``ValueError``), else ``None``. Only
    ``internal`` failures come from an exception the judge did not name itself."""
    if error_type != ERROR_INTERNAL or not error:
        return None
    found = _RAISED.match(error)
    return found.group(1) if found else None
