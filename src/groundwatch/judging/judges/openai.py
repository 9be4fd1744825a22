"""The LLM judge: claim verdicts from any OpenAI-compatible Chat Completions endpoint.

One request per answer. The model lists the answer's claims and gives each a verdict with a
verbatim quote from a numbered passage; groundwatch then checks every quote against its passage
(:mod:`groundwatch.judging.scoring`), so a verdict the passages do not back cannot count.

Works with OpenAI, Azure OpenAI (v1 endpoint or a client you build), vLLM, Ollama, LM Studio,
LiteLLM, llama.cpp servers and any other server that speaks ``POST /v1/chat/completions``,
without flags: the response format is negotiated from the server's answers (docs/llm-judge.md,
"Format negotiation"). Needs the ``openai`` package (the ``openai`` extra),
imported only when a judge is built.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import context as otel_context

from ..._shared import config
from ..._shared import error_types as et
from ..._shared.suppression import suppressed_context
from ...cli._errors import install_hint
from ...types import Judgement, Passage, Usage
from ._loop import LoopThread
from ._prompt import PROMPT_VERSION, RESPONSE_FORMATS, build_prompt
from ._reply import Checks, read_reply, to_claims
from ._resilience import CircuitBreaker, backoff_seconds, retry_after_seconds

if TYPE_CHECKING:
    from openai import AsyncOpenAI

_logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 16
"""Requests in flight at once per judge; 16 at 200 ms per reply is ~80 evaluations/s."""
DEFAULT_TIMEOUT_SECONDS = 60.0
"""Hard deadline for one request (connect to last byte)."""
DEFAULT_MAX_ATTEMPTS = 4
"""Tries per request on 429, 5xx, timeouts and connection errors (1 + 3 retries)."""
DEFAULT_BACKOFF_BASE_SECONDS = 0.5
DEFAULT_BACKOFF_CAP_SECONDS = 8.0
DEFAULT_MAX_RETRY_AFTER_SECONDS = 30.0
"""A server asking to wait longer than this is treated as a failure, not waited for."""
DEFAULT_MAX_CONTEXT_TOKENS = 3000
"""Passages over this estimate are cut to the sentences most relevant to the answer."""
DEFAULT_CACHE_SIZE = 1024
DEFAULT_FAILURE_THRESHOLD = 5
DEFAULT_RECOVERY_SECONDS = 30.0

DEFAULT_LENGTH_RETRY_TOKENS = 2048
"""Output budget of the one retry after a reply cut at its token limit, when the first
request set none (the server's own limit cut it): at least this, or twice what came back."""

INSTALL_HINT = f"OpenAIJudge needs the openai package, {install_hint('openai')}"

ResponseFormat = Literal["auto", "json_schema", "json_object", "none"]

_FORMAT_ORDER = ("json_schema", "json_object_schema", "json_object", "none")
"""What ``auto`` tries, best first. ``json_object_schema`` is JSON mode with the reply schema
attached (``{"type": "json_object", "schema": ...}``), which llama-cpp-python's server turns
into a grammar for exactly that schema while it refuses ``json_schema``; servers that refuse the
extra key get plain JSON mode next."""
_FORCED = {
    "json_schema": ("json_schema",),
    "json_object": ("json_object_schema", "json_object"),
    "none": ("none",),
}
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


def _safe_url(url: str | None) -> str | None:
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


class _CallFailed(Exception):
    def __init__(self, reason: str, error_type: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type


class OpenAIJudge:
    """Claim verdicts from an LLM behind any OpenAI-compatible Chat Completions endpoint.

    ``judge()`` is a coroutine; ``groundwatch.evaluate(answer, contexts, judge=OpenAIJudge(...))``
    runs it from synchronous code. It never raises: failures come back as a ``Judgement`` with
    ``error`` set, which scores as label ``error``.

    Requests run on a private event loop thread owned by the judge, so one judge can serve sync
    callers, any event loop and the monitor's worker at once, with one concurrency limit and one
    circuit breaker. Call :meth:`close` to stop it (it is a daemon thread otherwise).

    Args:
        model: the model (or deployment) name sent with each request; also reported as
            ``gen_ai.request.model``.
        base_url: the endpoint, e.g. ``http://localhost:11434/v1`` for Ollama; default
            ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: the key; default ``OPENAI_API_KEY``. Servers that need none (Ollama, vLLM,
            LM Studio) get a placeholder when a ``base_url`` is given. Never logged or shown.
        client: an ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) to use instead of building
            one; it is copied with ``max_retries=0`` and used only from the judge's own loop.
        name: the judge's name in results and telemetry.
        concurrency: requests in flight at once (env ``GROUNDWATCH_JUDGE_CONCURRENCY``).
        timeout_seconds: deadline per request.
        max_attempts: tries per request on 429, 5xx, timeouts and connection errors; waits
            follow ``Retry-After`` when given, else jittered exponential backoff.
        response_format: ``"auto"`` (no flag needed for any server) tries JSON-schema
            structured output, then JSON mode with the schema attached, then plain JSON mode,
            then no ``response_format`` (the reply parsed tolerantly). An error answer whose
            body names the response format, whatever its status (llama-cpp-python answers
            500), moves to the next at once, without a retry and without counting towards the
            circuit breaker; what the server accepted is remembered per base URL and model
            (:attr:`negotiated_format`). Or force ``"json_schema"``, ``"json_object"`` or
            ``"none"``; a forced format the server refuses is ``format_unsupported``.
        max_context_tokens: estimated-token budget for the passages; over it they are cut to
            the sentences most relevant to the answer (env
            ``GROUNDWATCH_JUDGE_MAX_CONTEXT_TOKENS``).
        temperature: sent as is; ``None`` leaves it out (for models that refuse it).
        max_output_tokens: sent as ``max_tokens`` when set. A reply cut at the limit
            (``finish_reason="length"``) is asked again once with twice the budget (at least
            ``DEFAULT_LENGTH_RETRY_TOKENS``), then is ``error_type="truncated"``.
        cache_size: answers remembered (LRU); a repeat costs no request. 0 turns it off.
        failure_threshold: consecutive failed requests (5xx, timeout, connection) that open the
            circuit breaker; while open the judge fails fast with ``error_type="circuit_open"``.
        recovery_seconds: how long the breaker stays open before one probe request is let
            through.
        min_quote_overlap: share of a supported/inferred claim's content words its quote must
            share, else the verdict is downgraded (an injection defence; 0 turns it off).
        checks: ``False`` turns off the lexical anti-injection checks (claim vs quote, claims
            not in the answer, sentences left out). Quote verification in scoring stays.
        default_headers, default_query, extra_body: passed to the client / request (e.g. an
            ``api-version`` query for older Azure deployments, vLLM sampling options).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        name: str = "openai",
        concurrency: int | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        response_format: ResponseFormat = "auto",
        max_context_tokens: int | None = None,
        temperature: float | None = 0.0,
        max_output_tokens: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        recovery_seconds: float = DEFAULT_RECOVERY_SECONDS,
        backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS,
        backoff_cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS,
        max_retry_after_seconds: float = DEFAULT_MAX_RETRY_AFTER_SECONDS,
        min_quote_overlap: float = Checks.min_quote_overlap,
        checks: bool = True,
        default_headers: Mapping[str, str] | None = None,
        default_query: Mapping[str, object] | None = None,
        extra_body: Mapping[str, object] | None = None,
    ) -> None:
        try:
            import openai  # noqa: F401  (the judge's one optional dependency)
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        if not model:
            raise ValueError("model is required")
        if response_format != "auto" and response_format not in _FORCED:
            raise ValueError(f"response_format must be auto or one of {tuple(_FORCED)}")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.model = model
        self.name = name
        self.base_url = base_url or (None if client else os.environ.get("OPENAI_BASE_URL"))
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if client is None and not key:
            if not self.base_url:
                raise ValueError(
                    "no API key: pass api_key= or set OPENAI_API_KEY (or give base_url= for a "
                    "server that needs no key)"
                )
            key = "not-needed"
        self._api_key = key
        # Every secret that could end up in an error message, whichever one is in use.
        client_key = getattr(client, "api_key", None) if client is not None else None
        self._secrets = tuple(
            k
            for k in {key, os.environ.get("OPENAI_API_KEY"), client_key}
            if isinstance(k, str) and len(k) >= 4 and k != "not-needed"
        )
        self._given_client = client
        self.concurrency = concurrency or config.env_int(
            config.JUDGE_CONCURRENCY, DEFAULT_CONCURRENCY
        )
        self.timeout_seconds = timeout_seconds
        self.max_attempts = max_attempts
        self.response_format: ResponseFormat = response_format
        self.max_context_tokens = max_context_tokens or config.env_int(
            config.JUDGE_MAX_CONTEXT_TOKENS, DEFAULT_MAX_CONTEXT_TOKENS
        )
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.cache_size = cache_size
        self.backoff_base_seconds = backoff_base_seconds
        self.backoff_cap_seconds = backoff_cap_seconds
        self.max_retry_after_seconds = max_retry_after_seconds
        self._checks = Checks(min_quote_overlap=min_quote_overlap, enabled=checks)
        self._default_headers = dict(default_headers or {})
        self._default_query = dict(default_query or {})
        self._extra_body = dict(extra_body or {})
        self._formats = _FORMAT_ORDER if response_format == "auto" else _FORCED[response_format]
        self._format_index = 0
        self._endpoint = (_safe_url(self.base_url) or "", model)
        self._negotiated: str | None = None
        if response_format == "auto":
            with _NEGOTIATED_LOCK:
                known = _NEGOTIATED.get(self._endpoint)
            if known is not None:
                self._format_index = _FORMAT_ORDER.index(known)
        self._breaker = CircuitBreaker(failure_threshold, recovery_seconds)
        self._last_failure: str | None = None
        """What the circuit's last failure was, said with every call it turns away."""
        self._cache: OrderedDict[str, Judgement] = OrderedDict()
        self._loop = LoopThread(f"groundwatch-judge-{name}")
        self._client: AsyncOpenAI | None = None
        self._client_pid = os.getpid()
        self._closing = 0
        self._semaphore: asyncio.Semaphore | None = None
        self._rng = random.Random()
        self.stats = OpenAIJudgeStats()
        self._fingerprint = json.dumps(
            {
                "model": model,
                "base_url": _safe_url(self.base_url),
                "temperature": temperature,
                "max_output_tokens": max_output_tokens,
                "max_context_tokens": self.max_context_tokens,
                "checks": asdict(self._checks),
                "extra_body": sorted(self._extra_body),
            },
            sort_keys=True,
            default=str,
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={_safe_url(self.base_url)!r}, "
            f"name={self.name!r}, concurrency={self.concurrency})"
        )

    @property
    def response_format_in_use(self) -> str:
        """The ``response_format`` the judge currently sends (it steps down when refused)."""
        return self._formats[self._format_index]

    @property
    def negotiated_format(self) -> str | None:
        """The ``response_format`` the endpoint accepted (``json_schema``,
        ``json_object_schema``, ``json_object`` or ``none``), once a request went through;
        ``None`` before. With ``"auto"`` it is learnt
        from the server's answers and remembered for the same base URL and model."""
        return self._negotiated

    @property
    def circuit_state(self) -> str:
        """``closed``, ``open`` or ``half_open``."""
        return self._breaker.state

    # --- public entry ------------------------------------------------------------------------

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None = None
    ) -> Judgement:
        """Claims of ``answer`` with verdicts and quoted evidence; never raises."""
        closing = self._closing
        try:
            return await self._loop.run(self._judge(answer, list(contexts), question))
        except asyncio.CancelledError:
            if self._closing == closing:
                raise  # the caller was cancelled, not us
            return Judgement(
                model=self.model,
                error="the judge was closed during the request",
                error_type=et.ERROR_INTERNAL,
            )
        except Exception as exc:  # our own bug or a dead loop: report it, do not raise
            _logger.debug("openai judge failed unexpectedly", exc_info=True)
            return Judgement(
                model=self.model,
                error=self._redact(f"internal error: {type(exc).__name__}: {exc}")[:300],
                error_type=et.ERROR_INTERNAL,
            )

    def close(self) -> None:
        """Close the HTTP client and stop the judge's event loop thread.

        Evaluations still in flight end as ``error`` (``error_type="internal"``). Using the judge
        afterwards starts a new loop and client.
        """
        self._closing += 1
        client = self._client
        self._client = None
        self._semaphore = None

        async def _close() -> None:
            if client is not None:
                await client.close()

        self._loop.stop(_close())

    async def aclose(self) -> None:
        """:meth:`close` for async code (runs it in a thread, not blocking the loop)."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> OpenAIJudge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals -----------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return _SECRET_PATTERNS.sub(_REDACTED, text)

    def _cache_key(self, answer: str, passages: Sequence[Passage], question: str | None) -> str:
        payload = json.dumps(
            [self._fingerprint, PROMPT_VERSION, answer, [p.text for p in passages], question],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def _get_client(self) -> AsyncOpenAI:
        if self._client_pid != os.getpid():
            # A forked child: the parent's client and semaphore belong to a loop that did not
            # survive the fork.
            self._client, self._semaphore, self._client_pid = None, None, os.getpid()
        if self._client is None:
            from openai import AsyncOpenAI

            # Our own retry loop (Retry-After, jitter, circuit breaker) replaces the client's.
            if self._given_client is not None:
                self._client = self._given_client.with_options(max_retries=0)
            else:
                self._client = AsyncOpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout_seconds,
                    default_headers=self._default_headers or None,
                    default_query=self._default_query or None,
                )
        return self._client

    async def _judge(self, answer: str, passages: list[Passage], question: str | None) -> Judgement:
        # The judge's own HTTP calls must not show up in the user's traces (or re-enter
        # instrumentations that feed groundwatch).
        token = otel_context.attach(suppressed_context())
        try:
            result = await self._judge_unsuppressed(answer, passages, question)
        finally:
            otel_context.detach(token)
        self.stats.evaluations += 1
        if result.error is not None:
            self.stats.errors += 1
        return result

    async def _judge_unsuppressed(
        self, answer: str, passages: list[Passage], question: str | None
    ) -> Judgement:
        if not isinstance(answer, str) or not all(isinstance(p, Passage) for p in passages):
            return Judgement(
                model=self.model,
                error="the answer must be a string and the contexts Passage objects",
                error_type=et.ERROR_INVALID_INPUT,
            )
        key = self._cache_key(answer, passages, question) if self.cache_size > 0 else ""
        cached = self._cache.get(key) if key else None
        if cached is not None:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            return cached.model_copy(update={"usage": Usage()}, deep=True)
        usage = Usage()
        try:
            items, trimmed = await self._ask(answer, passages, question, usage)
        except _CallFailed as failure:
            return Judgement(
                model=self.model, usage=usage, error=failure.reason, error_type=failure.error_type
            )
        if trimmed:
            self.stats.trimmed += 1
        conversion = to_claims(items, answer, passages, self._checks)
        self.stats.downgraded += conversion.downgraded
        self.stats.dropped += conversion.dropped
        self.stats.added += conversion.added
        self.stats.quotes_snapped += conversion.snapped
        judgement = Judgement(
            claims=conversion.claims, model=self.model, usage=usage, truncated=bool(trimmed)
        )
        if key:
            self._cache[key] = judgement.model_copy(deep=True)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return judgement

    async def _ask(
        self, answer: str, passages: list[Passage], question: str | None, usage: Usage
    ) -> tuple[list[dict[str, Any]], bool]:
        """The claim objects of one answer: one request, plus at most one retry for an
        unusable reply and one, with a larger output budget, for a reply cut at its limit."""
        budget = self.max_output_tokens
        reply_retried = length_retried = False
        while True:
            # A fresh marker code per request, retries included.
            prompt = build_prompt(
                answer, passages, question, max_context_tokens=self.max_context_tokens
            )
            reply = await self._complete(prompt.messages, usage, budget)
            if reply.refusal or reply.finish_reason == "content_filter":
                why = reply.refusal or "the reply was stopped by the endpoint's content filter"
                raise _CallFailed(self._redact(f"the model refused: {why}")[:300], et.ERROR_REFUSED)
            if reply.finish_reason == "length":
                if not length_retried:
                    length_retried = True
                    self.stats.length_retries += 1
                    budget = max(
                        2 * (budget or reply.completion_tokens), DEFAULT_LENGTH_RETRY_TOKENS
                    )
                    _logger.debug("reply cut at its token limit; retrying with %d", budget)
                    continue
                raise _CallFailed(
                    f"the reply was cut at its token limit twice (last max_tokens={budget})",
                    et.ERROR_TRUNCATED,
                )
            items, tolerant = read_reply(reply.content)
            if reply.content is not None:
                self.stats.replies += 1
                self.stats.tolerant_replies += tolerant
            if items is not None:
                return items, bool(prompt.trimmed)
            if reply_retried:
                raise _CallFailed(
                    "the model's reply was not usable JSON claim verdicts (twice)",
                    et.ERROR_BAD_REPLY,
                )
            reply_retried = True
            self.stats.reply_retries += 1
            _logger.debug("unusable reply from %s, retrying once", self.model)

    def _request_kwargs(
        self, messages: list[dict[str, str]], fmt: str, max_tokens: int | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "timeout": self.timeout_seconds,
        }
        response_format = RESPONSE_FORMATS[fmt]
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self._extra_body:
            kwargs["extra_body"] = self._extra_body
        return kwargs

    async def _complete(
        self, messages: list[dict[str, str]], usage: Usage, max_tokens: int | None
    ) -> _Reply:
        """One logical request: retried on transient errors, format stepped down on refusal."""
        import openai

        client = self._get_client()
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        attempt = 0
        while True:
            if not self._breaker.allow():
                self.stats.circuit_rejections += 1
                # The last failure first: it names the cause and the address.
                raise _CallFailed(
                    f"{self._last_failure or 'repeated failures'}; the endpoint's circuit is "
                    f"open, next probe in {self._breaker.retry_in():.1f}s",
                    et.ERROR_CIRCUIT_OPEN,
                )
            format_index = self._format_index
            fmt = self._formats[format_index]
            delay: float | None = None
            failure: _CallFailed
            async with self._semaphore:
                self.stats.requests += 1
                usage.calls += 1
                started = time.monotonic()
                try:
                    response = await asyncio.wait_for(
                        client.chat.completions.create(
                            **self._request_kwargs(messages, fmt, max_tokens)
                        ),
                        self.timeout_seconds,
                    )
                except (asyncio.TimeoutError, openai.APITimeoutError):
                    failure = _CallFailed(
                        f"no reply within {self.timeout_seconds:g}s", et.ERROR_TIMEOUT
                    )
                    self._last_failure = failure.reason
                    self._breaker.record_failure()
                except openai.APIConnectionError as exc:
                    # The client says only "Connection error."; the cause (refused, no such
                    # host, TLS) and the address are what a person needs to fix --base-url.
                    failure = _CallFailed(
                        self._redact(
                            f"connection failed to {self._endpoint[0] or 'the endpoint'}: "
                            f"{_root_cause(exc)}"
                        )[:300],
                        et.ERROR_CONNECTION,
                    )
                    self._last_failure = failure.reason[:200]
                    self._breaker.record_failure()
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    message = self._redact(f"HTTP {status}: {exc.message}")[:300]
                    if status in _FORMAT_STATUSES and fmt != "none" and _names_format(exc):
                        # The server told us what it accepts: not a fault, not a retry.
                        self._breaker.release()
                        if format_index + 1 < len(self._formats):
                            self._step_down_format(format_index, message)
                            continue
                        raise _CallFailed(
                            f"the endpoint does not accept response_format={fmt} ({message}); "
                            f'use response_format="auto"',
                            et.ERROR_FORMAT_UNSUPPORTED,
                        ) from None
                    if status == 429 or status >= 500 or status == 408:
                        if status != 429:
                            self._last_failure = message[:200]
                            self._breaker.record_failure()
                        else:
                            self._breaker.release()
                        failure = _CallFailed(
                            message,
                            et.ERROR_RATE_LIMITED
                            if status == 429
                            else f"{et.ERROR_HTTP_PREFIX}{status}",
                        )
                        delay = retry_after_seconds(exc.response.headers)
                        if delay is not None and delay > self.max_retry_after_seconds:
                            raise _CallFailed(
                                f"{message} (server asked to wait {delay:.0f}s, more than "
                                f"max_retry_after_seconds)",
                                failure.error_type,
                            ) from None
                    else:
                        self._breaker.release()
                        raise _CallFailed(message, f"{et.ERROR_HTTP_PREFIX}{status}") from None
                except Exception as exc:
                    # The endpoint answered with something the client could not read (HTML
                    # from a proxy, a malformed body): not transient, not worth a retry.
                    self._breaker.release()
                    raise _CallFailed(
                        self._redact(f"unreadable response: {type(exc).__name__}: {exc}")[:300],
                        et.ERROR_BAD_REPLY,
                    ) from None
                except BaseException:
                    self._breaker.release()  # cancelled: a probe must not stay pending forever
                    raise
                else:
                    self._breaker.record_success()
                    self._accepted(fmt)
                    return self._read_response(response, usage)
                finally:
                    _logger.debug(
                        "judge request to %s took %.3fs", self.model, time.monotonic() - started
                    )
            attempt += 1
            if attempt >= self.max_attempts:
                raise failure
            self.stats.retries += 1
            if delay is None:
                delay = backoff_seconds(
                    attempt - 1, self.backoff_base_seconds, self.backoff_cap_seconds, self._rng
                )
            else:
                delay += self._rng.uniform(0, 0.1 * delay + 0.01)
            _logger.debug("%s; retry %d in %.2fs", failure.reason, attempt, delay)
            await asyncio.sleep(delay)

    def _read_response(self, response: Any, usage: Usage) -> _Reply:
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
            return _Reply(None, None, None, completion_tokens)
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        refusal = getattr(message, "refusal", None)
        finish = getattr(choice, "finish_reason", None)
        return _Reply(
            content if isinstance(content, str) else None,
            finish if isinstance(finish, str) else None,
            refusal if isinstance(refusal, str) and refusal.strip() else None,
            completion_tokens,
        )

    def _accepted(self, fmt: str) -> None:
        if self._negotiated == fmt:
            return
        self._negotiated = fmt
        if self.response_format != "auto":
            return
        with _NEGOTIATED_LOCK:
            known = _NEGOTIATED.get(self._endpoint)
            _NEGOTIATED[self._endpoint] = fmt
        if known != fmt:
            _logger.info(
                "judge endpoint %s (model %s) accepts response_format=%s",
                self._endpoint[0] or "default",
                self.model,
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


@dataclass(frozen=True)
class _Reply:
    content: str | None
    finish_reason: str | None
    refusal: str | None
    completion_tokens: int


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _names_format(exc: Any) -> bool:
    """Whether an error response is about ``response_format`` (see ``_FORMAT_HINT``)."""
    text = f"{getattr(exc, 'message', '')} {getattr(exc, 'body', '')}"
    return _FORMAT_HINT.search(text) is not None
