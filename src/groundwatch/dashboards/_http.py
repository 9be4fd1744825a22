"""One JSON request to a dashboard's REST API, and what its failure means for a retry.

The standard library's ``urllib``, not ``httpx``: the sinks send one request per batch of
writes (at most one a second under load, by the delivery's schedule), so a connection pool
saves a handshake a second at best, and ``urllib`` needs nothing installed beside the core
(``httpx`` arrives only with the ``openai`` extra, and a Phoenix or MLflow user has no reason to
install that). ``urllib`` also honours the usual proxy variables (``HTTPS_PROXY``,
``NO_PROXY``), as ``httpx`` does.

Requests run with OpenTelemetry's instrumentation suppressed, so an app that instruments
``urllib`` sees no spans of ours in its traces (and they do not come back to ``serve``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context

from .._shared.error_types import (
    ERROR_CONNECTION,
    ERROR_HTTP_PREFIX,
    ERROR_RATE_LIMITED,
    ERROR_TIMEOUT,
)
from .._shared.suppression import suppressed_context
from ._delivery import Outcome, Reply

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
"""Statuses that say "later" (the server busy, restarting, or behind a proxy that is)."""

MAX_REPLY_BYTES = 1 << 20
"""A reply is read up to this size (an error page must not fill memory)."""


@dataclass(frozen=True, slots=True)
class HttpReply:
    """A reply's status and body (the body read up to :data:`MAX_REPLY_BYTES`)."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON (``None`` when empty).

        Raises:
            ValueError: it is not JSON.
        """
        return json.loads(self.body) if self.body else None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class HttpFailure(Exception):
    """No reply: the server could not be reached, or did not answer within the deadline."""

    def __init__(self, error_type: str, detail: str) -> None:
        super().__init__(f"{error_type}: {detail}")
        self.error_type = error_type


def request(
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
) -> HttpReply:
    """Send one request with a JSON body (if any) and read the reply, whatever its status.

    Raises:
        HttpFailure: no reply (``connection`` or ``timeout``).
    """
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    all_headers = {"accept": "application/json", **(headers or {})}
    if data is not None:
        all_headers["content-type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    token = otel_context.attach(suppressed_context())
    try:
        with urllib.request.urlopen(req, timeout=max(0.001, timeout_s)) as response:
            return HttpReply(response.status, response.read(MAX_REPLY_BYTES))
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpReply(exc.code, exc.read(MAX_REPLY_BYTES))
    except TimeoutError as exc:
        raise HttpFailure(ERROR_TIMEOUT, str(exc)) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        kind = ERROR_TIMEOUT if isinstance(reason, TimeoutError) else ERROR_CONNECTION
        raise HttpFailure(kind, str(reason)) from None
    except (ConnectionError, OSError) as exc:
        raise HttpFailure(ERROR_CONNECTION, str(exc)) from None
    finally:
        otel_context.detach(token)


def status_reply(status: int) -> Reply:
    """The :class:`Reply` of a status that is not a success: retried when it says "later",
    failed for good otherwise."""
    if status == 429:
        return Reply(Outcome.RETRY, ERROR_RATE_LIMITED)
    error_type = f"{ERROR_HTTP_PREFIX}{status}"
    if status in RETRYABLE_STATUSES:
        return Reply(Outcome.RETRY, error_type)
    return Reply(Outcome.FAILED, error_type)


def failure_reply(failure: HttpFailure) -> Reply:
    """No reply at all: always worth another try (the server may be restarting)."""
    return Reply(Outcome.RETRY, failure.error_type)


def join(base: str, path: str) -> str:
    """``base`` (with or without a trailing slash, perhaps with a path prefix) and ``path``."""
    return f"{base.rstrip('/')}/{path.lstrip('/')}"
