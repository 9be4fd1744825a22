"""The LLM judge's endpoint: one logical Chat Completions request, retried on transient errors
(``Retry-After``, jittered backoff), behind a circuit breaker and a concurrency limit, with the
``response_format`` negotiated from the server's answers, and its errors classified and
redacted. What the request asks and how its reply is read are the judge's (:mod:`._judge`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ...._shared import error_types as et
from .._prompt import RESPONSE_FORMATS
from .._resilience import CircuitBreaker, backoff_seconds, retry_after_seconds

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ....types import Usage

__all__ = [
    "FORCED_FORMATS",
    "CallFailed",
    "ChatEndpoint",
    "EndpointSettings",
    "OpenAIJudgeStats",
    "Reply",
    "ResponseFormat",
    "safe_url",
]

_logger = logging.getLogger(__name__)

ResponseFormat = Literal["auto", "json_schema", "json_object", "none"]

_FORMAT_ORDER = ("json_schema", "json_object_schema", "json_object", "none")
"""What ``auto`` tries, best first. ``json_object_schema`` is JSON mode with the reply schema
attached (``{"type": "json_object", "schema": ...}``), which llama-cpp-python's server turns
into a grammar for exactly that schema while it refuses ``json_schema``; servers that refuse the
extra key get plain JSON mode next."""
FORCED_FORMATS = {
    "json_schema": ("json_schema",),
    "json_object": ("json_object_schema", "json_object"),
    "none": ("none",),
}
"""What a forced ``response_format`` sends, in order."""
# An error body naming one of these answers "which response_format do you accept", whatever
# the status code: llama-cpp-python's server answers json_schema with a 500 carrying its
# request-validation error (loc body.response_format.type), LM Studio json_object with a 400
# "'response_format.type' must be 'json_schema' or 'text'", LiteLLM a provider without
# structured output with a 400 UnsupportedParamsError naming ['response_format'], vLLM an
# unknown type with a 400, FastAPI servers with a 422.
_FORMAT_HINT = re.compile(
    r"response_format|response format|json_schema|json_object|schema|structured output"
    r"|guided|grammar",
    re.I,
)
_FORMAT_STATUSES = frozenset({400, 415, 422, 500, 501})

# The format each endpoint accepted, by (base URL without secrets, model): a second judge for
# the same server does not probe again. Shared by the judges of this process.
_NEGOTIATED: dict[tuple[str, str], str] = {}
_NEGOTIATED_LOCK = threading.Lock()
_SECRET_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+|api[-_]key[\"'=:\s]+\S+)", re.I)
_REDACTED = "[REDACTED]"


def safe_url(url: str | None) -> str | None:
    """The URL without credentials or query string (both may hold secrets)."""
    if not url:
        return url
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _root_cause(exc: BaseException) -> str:
    """The innermost exception behind ``exc`` (an ``APIConnectionError`` wraps httpx's, which
    wraps the socket's ``ConnectionRefusedError`` or ``gaierror``), as ``Type: message``."""
    inner = exc
    for _ in range(10):  # a chain is short; a cycle must not loop
        nxt = inner.__cause__ or inner.__context__
        if nxt is None:
            break
        inner = nxt
    return f"{type(inner).__name__}: {inner}" if inner is not exc else str(exc)


@dataclass
class OpenAIJudgeStats:
    """Counters of what the judge did, for benchmarks and debugging (metrics go via the runtime).

    ``requests`` counts every HTTP request; ``retries``, ``reply_retries``, ``length_retries``
    and ``format_fallbacks`` are the extra ones, so ``requests - retries - reply_retries -
    length_retries - format_fallbacks`` is one per evaluation that reached the endpoint.
    ``replies`` counts replies read (HTTP 200 with content), ``tolerant_replies`` those that
    were not exactly the JSON asked for (fenced, with prose or a ``<think>`` block, repaired).
    """

    evaluations: int = 0
    requests: int = 0
    retries: int = 0
    reply_retries: int = 0
    length_retries: int = 0
    format_fallbacks: int = 0
    replies: int = 0
    tolerant_replies: int = 0
    cache_hits: int = 0
    circuit_rejections: int = 0
    errors: int = 0
    downgraded: int = 0
    dropped: int = 0
    added: int = 0
    quotes_snapped: int = 0
    trimmed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class CallFailed(Exception):
    """A request that ended without a usable reply: ``reason`` for the judgement's ``error``,
    ``error_type`` for its ``error_type``."""

    def __init__(self, reason: str, error_type: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type


@dataclass(frozen=True)
class Reply:
    """The parts of a completion the judge reads."""

    content: str | None
    finish_reason: str | None
    refusal: str | None
    completion_tokens: int


@dataclass(frozen=True)
class EndpointSettings:
    """How the judge reaches its endpoint (the judge's arguments of the same names)."""

    model: str
    base_url: str | None
    api_key: str
    client: AsyncOpenAI | None
    secrets: tuple[str, ...]
    """Every secret that could end up in an error message, whichever one is in use."""
    concurrency: int
    timeout_seconds: float
    max_attempts: int
    response_format: ResponseFormat
    temperature: float | None
    failure_threshold: int
    recovery_seconds: float
    backoff_base_seconds: float
    backoff_cap_seconds: float
    max_retry_after_seconds: float
    default_headers: Mapping[str, str]
    default_query: Mapping[str, object]
    extra_body: Mapping[str, object]


class ChatEndpoint:
    """One OpenAI-compatible endpoint as the judge uses it; used only from the judge's loop."""

    def __init__(self, settings: EndpointSettings, stats: OpenAIJudgeStats) -> None:
        self.settings = settings
        self.stats = stats
        fmt = settings.response_format
        self._formats = _FORMAT_ORDER if fmt == "auto" else FORCED_FORMATS[fmt]
        self._format_index = 0
        self.shown_url = safe_url(settings.base_url)
        """The base URL without credentials or query string, for messages and the cache key."""
        self.address = (self.shown_url or "", settings.model)
        """(base URL without secrets, model): the key of the negotiation memory."""
        self.negotiated: str | None = None
        if fmt == "auto":
            with _NEGOTIATED_LOCK:
                known = _NEGOTIATED.get(self.address)
            if known is not None:
                self._format_index = _FORMAT_ORDER.index(known)
        self.breaker = CircuitBreaker(settings.failure_threshold, settings.recovery_seconds)
        self._last_failure: str | None = None
        """What the circuit's last failure was, said with every call it turns away."""
        self._client: AsyncOpenAI | None = None
        self._client_pid = os.getpid()
        self._semaphore: asyncio.Semaphore | None = None
        self._rng = random.Random()

    @property
    def format_in_use(self) -> str:
        """The ``response_format`` sent now (it steps down when refused)."""
        return self._formats[self._format_index]

    def redact(self, text: str) -> str:
        """``text`` without the key in use, any other known key, or anything shaped like a key
        or a bearer token."""
        for secret in self.settings.secrets:
            text = text.replace(secret, _REDACTED)
        return _SECRET_PATTERNS.sub(_REDACTED, text)

    def detach(self) -> AsyncOpenAI | None:
        """Forget the client (the caller closes it) and the concurrency limit of its loop."""
        client, self._client, self._semaphore = self._client, None, None
        return client

    def _get_client(self) -> AsyncOpenAI:
        if self._client_pid != os.getpid():
            # A forked child: the parent's client and semaphore belong to a loop that did not
            # survive the fork.
            self._client, self._semaphore, self._client_pid = None, None, os.getpid()
        if self._client is None:
            from openai import AsyncOpenAI

            s = self.settings
            # Our own retry loop (Retry-After, jitter, circuit breaker) replaces the client's.
            if s.client is not None:
                self._client = s.client.with_options(max_retries=0)
            else:
                self._client = AsyncOpenAI(
                    api_key=s.api_key,
                    base_url=s.base_url,
                    max_retries=0,
                    timeout=s.timeout_seconds,
                    default_headers=dict(s.default_headers) or None,
                    default_query=dict(s.default_query) or None,
                )
        return self._client

    def _request_kwargs(
        self, messages: list[dict[str, str]], fmt: str, max_tokens: int | None
    ) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": messages,
            "timeout": s.timeout_seconds,
        }
        response_format = RESPONSE_FORMATS[fmt]
        if response_format is not None:
            kwargs["response_format"] = response_format
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if s.extra_body:
            kwargs["extra_body"] = s.extra_body
        return kwargs

    async def complete(
        self, messages: list[dict[str, str]], usage: Usage, max_tokens: int | None
    ) -> Reply:
        """One logical request: retried on transient errors, format stepped down on refusal.

        Raises:
            CallFailed: no usable reply (the reason is redacted).
        """
        import openai

        s = self.settings
        client = self._get_client()
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(s.concurrency)
        attempt = 0
        while True:
            if not self.breaker.allow():
                self.stats.circuit_rejections += 1
                # The last failure first: it names the cause and the address.
                raise CallFailed(
                    f"{self._last_failure or 'repeated failures'}; the endpoint's circuit is "
                    f"open, next probe in {self.breaker.retry_in():.1f}s",
                    et.ERROR_CIRCUIT_OPEN,
                )
            format_index = self._format_index
            fmt = self._formats[format_index]
            delay: float | None = None
            failure: CallFailed
            async with self._semaphore:
                self.stats.requests += 1
                usage.calls += 1
                started = time.monotonic()
                try:
                    response = await asyncio.wait_for(
                        client.chat.completions.create(
                            **self._request_kwargs(messages, fmt, max_tokens)
                        ),
                        s.timeout_seconds,
                    )
                except (asyncio.TimeoutError, openai.APITimeoutError):
                    failure = CallFailed(
                        f"no reply within {s.timeout_seconds:g}s", et.ERROR_TIMEOUT
                    )
                    self._last_failure = failure.reason
                    self.breaker.record_failure()
                except openai.APIConnectionError as exc:
                    # The client says only "Connection error."; the cause (refused, no such
                    # host, TLS) and the address are what a person needs to fix --base-url.
                    failure = CallFailed(
                        self.redact(
                            f"connection failed to {self.address[0] or 'the endpoint'}: "
                            f"{_root_cause(exc)}"
                        )[:300],
                        et.ERROR_CONNECTION,
                    )
                    self._last_failure = failure.reason[:200]
                    self.breaker.record_failure()
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    message = self.redact(f"HTTP {status}: {exc.message}")[:300]
                    if status in _FORMAT_STATUSES and fmt != "none" and _names_format(exc):
                        # The server told us what it accepts: not a fault, not a retry.
                        self.breaker.release()
                        if format_index + 1 < len(self._formats):
                            self._step_down_format(format_index, message)
                            continue
                        raise CallFailed(
                            f"the endpoint does not accept response_format={fmt} ({message}); "
                            f'use response_format="auto"',
                            et.ERROR_FORMAT_UNSUPPORTED,
                        ) from None
                    if status == 429 or status >= 500 or status == 408:
                        if status != 429:
                            self._last_failure = message[:200]
                            self.breaker.record_failure()
                        else:
                            self.breaker.release()
                        failure = CallFailed(
                            message,
                            et.ERROR_RATE_LIMITED
                            if status == 429
                            else f"{et.ERROR_HTTP_PREFIX}{status}",
                        )
                        delay = retry_after_seconds(exc.response.headers)
                        if delay is not None and delay > s.max_retry_after_seconds:
                            raise CallFailed(
                                f"{message} (server asked to wait {delay:.0f}s, more than "
                                f"max_retry_after_seconds)",
                                failure.error_type,
                            ) from None
                    else:
                        self.breaker.release()
                        raise CallFailed(message, f"{et.ERROR_HTTP_PREFIX}{status}") from None
                except Exception as exc:
                    # The endpoint answered with something the client could not read (HTML
                    # from a proxy, a malformed body): not transient, not worth a retry.
                    self.breaker.release()
                    raise CallFailed(
                        self.redact(f"unreadable response: {type(exc).__name__}: {exc}")[:300],
                        et.ERROR_BAD_REPLY,
                    ) from None
                except BaseException:
                    self.breaker.release()  # cancelled: a probe must not stay pending forever
                    raise
                else:
                    self.breaker.record_success()
                    self._accepted(fmt)
                    return self._read_response(response, usage)
                finally:
                    _logger.debug(
                        "judge request to %s took %.3fs", s.model, time.monotonic() - started
                    )
            attempt += 1
            if attempt >= s.max_attempts:
                raise failure
            self.stats.retries += 1
            if delay is None:
                delay = backoff_seconds(
                    attempt - 1, s.backoff_base_seconds, s.backoff_cap_seconds, self._rng
                )
            else:
                delay += self._rng.uniform(0, 0.1 * delay + 0.01)
            _logger.debug("%s; retry %d in %.2fs", failure.reason, attempt, delay)
            await asyncio.sleep(delay)

    def _read_response(self, response: Any, usage: Usage) -> Reply:
        """The parts of a completion the judge uses, read defensively: OpenAI-compatible servers
        differ in what they fill in, and an odd field must end as ``bad_reply``, never as an
        ``AttributeError``."""
        u = getattr(response, "usage", None)
        prompt_tokens = _int(getattr(u, "prompt_tokens", 0))
        completion_tokens = _int(getattr(u, "completion_tokens", 0))
        usage.input_tokens += prompt_tokens
        usage.output_tokens += completion_tokens
        self.stats.input_tokens += prompt_tokens
        self.stats.output_tokens += completion_tokens
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            return Reply(None, None, None, completion_tokens)
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        refusal = getattr(message, "refusal", None)
        finish = getattr(choice, "finish_reason", None)
        return Reply(
            content if isinstance(content, str) else None,
            finish if isinstance(finish, str) else None,
            refusal if isinstance(refusal, str) and refusal.strip() else None,
            completion_tokens,
        )

    def _accepted(self, fmt: str) -> None:
        if self.negotiated == fmt:
            return
        self.negotiated = fmt
        if self.settings.response_format != "auto":
            return
        with _NEGOTIATED_LOCK:
            known = _NEGOTIATED.get(self.address)
            _NEGOTIATED[self.address] = fmt
        if known != fmt:
            _logger.info(
                "judge endpoint %s (model %s) accepts response_format=%s",
                self.address[0] or "default",
                self.settings.model,
                fmt,
            )

    def _step_down_format(self, used_index: int, message: str) -> None:
        # Several requests in flight may be refused at once; step down once, not per request.
        self.stats.format_fallbacks += 1
        if self._format_index == used_index:
            self._format_index += 1
            _logger.debug(
                "endpoint refused response_format %s (%s); trying %s",
                self._formats[used_index],
                message,
                self._formats[self._format_index],
            )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _names_format(exc: Any) -> bool:
    """Whether an error response is about ``response_format`` (see ``_FORMAT_HINT``)."""
    text = f"{getattr(exc, 'message', '')} {getattr(exc, 'body', '')}"
    return _FORMAT_HINT.search(text) is not None
