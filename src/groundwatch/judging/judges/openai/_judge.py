"""The LLM judge itself: its settings, its answer cache and event loop, and one answer's
judging (the prompt, the retries an unusable or cut reply earns, the reply's claims). The
request itself, with its retries, circuit breaker and format negotiation, is
:mod:`._endpoint`'s.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context

from ...._shared import config
from ...._shared import error_types as et
from ...._shared.errors import install_hint
from ...._shared.suppression import suppressed_context
from ....types import Judgement, Passage, Usage
from .._loop import LoopThread
from .._prompt import PROMPT_VERSION, build_prompt
from .._reply import Checks, read_reply, to_claims
from ._endpoint import (
    FORCED_FORMATS,
    CallFailed,
    ChatEndpoint,
    EndpointSettings,
    OpenAIJudgeStats,
    ResponseFormat,
)

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
        if response_format != "auto" and response_format not in FORCED_FORMATS:
            raise ValueError(f"response_format must be auto or one of {tuple(FORCED_FORMATS)}")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.name = name
        base_url = base_url or (None if client else os.environ.get("OPENAI_BASE_URL"))
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if client is None and not key:
            if not base_url:
                raise ValueError(
                    "no API key: pass api_key= or set OPENAI_API_KEY (or give base_url= for a "
                    "server that needs no key)"
                )
            key = "not-needed"
        # Every secret that could end up in an error message, whichever one is in use.
        client_key = getattr(client, "api_key", None) if client is not None else None
        secrets = tuple(
            k
            for k in {key, os.environ.get("OPENAI_API_KEY"), client_key}
            if isinstance(k, str) and len(k) >= 4 and k != "not-needed"
        )
        self.max_context_tokens = max_context_tokens or config.env_int(
            config.JUDGE_MAX_CONTEXT_TOKENS, DEFAULT_MAX_CONTEXT_TOKENS
        )
        self.max_output_tokens = max_output_tokens
        self.cache_size = cache_size
        self._checks = Checks(min_quote_overlap=min_quote_overlap, enabled=checks)
        self.stats = OpenAIJudgeStats()
        self._endpoint = ChatEndpoint(
            EndpointSettings(
                model=model,
                base_url=base_url,
                api_key=key or "",
                client=client,
                secrets=secrets,
                concurrency=concurrency
                or config.env_int(config.JUDGE_CONCURRENCY, DEFAULT_CONCURRENCY),
                timeout_seconds=timeout_seconds,
                max_attempts=max_attempts,
                response_format=response_format,
                temperature=temperature,
                failure_threshold=failure_threshold,
                recovery_seconds=recovery_seconds,
                backoff_base_seconds=backoff_base_seconds,
                backoff_cap_seconds=backoff_cap_seconds,
                max_retry_after_seconds=max_retry_after_seconds,
                default_headers=dict(default_headers or {}),
                default_query=dict(default_query or {}),
                extra_body=dict(extra_body or {}),
            ),
            self.stats,
        )
        self._cache: OrderedDict[str, Judgement] = OrderedDict()
        self._loop = LoopThread(f"groundwatch-judge-{name}")
        self._closing = 0
        self._fingerprint = json.dumps(
            {
                "model": model,
                "base_url": self._endpoint.shown_url,
                "temperature": temperature,
                "max_output_tokens": max_output_tokens,
                "max_context_tokens": self.max_context_tokens,
                "checks": asdict(self._checks),
                "extra_body": sorted(extra_body or {}),
            },
            sort_keys=True,
            default=str,
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={self._endpoint.shown_url!r}, "
            f"name={self.name!r}, concurrency={self.concurrency})"
        )

    # The endpoint's settings, read-only: the endpoint holds them (one copy, used per request).

    @property
    def model(self) -> str:
        """The model (or deployment) name sent with each request."""
        return self._endpoint.settings.model

    @property
    def base_url(self) -> str | None:
        """The endpoint (``None``: the client's default, OpenAI's)."""
        return self._endpoint.settings.base_url

    @property
    def concurrency(self) -> int:
        """Requests in flight at once."""
        return self._endpoint.settings.concurrency

    @property
    def timeout_seconds(self) -> float:
        return self._endpoint.settings.timeout_seconds

    @property
    def max_attempts(self) -> int:
        return self._endpoint.settings.max_attempts

    @property
    def response_format(self) -> ResponseFormat:
        """As given: ``auto`` or the forced format (:attr:`response_format_in_use` says what is
        sent now)."""
        return self._endpoint.settings.response_format

    @property
    def temperature(self) -> float | None:
        return self._endpoint.settings.temperature

    @property
    def response_format_in_use(self) -> str:
        """The ``response_format`` the judge currently sends (it steps down when refused)."""
        return self._endpoint.format_in_use

    @property
    def negotiated_format(self) -> str | None:
        """The ``response_format`` the endpoint accepted (``json_schema``,
        ``json_object_schema``, ``json_object`` or ``none``), once a request went through;
        ``None`` before. With ``"auto"`` it is learnt
        from the server's answers and remembered for the same base URL and model."""
        return self._endpoint.negotiated

    @property
    def circuit_state(self) -> str:
        """``closed``, ``open`` or ``half_open``."""
        return self._endpoint.breaker.state

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
        client = self._endpoint.detach()

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
        return self._endpoint.redact(text)

    def _cache_key(self, answer: str, passages: Sequence[Passage], question: str | None) -> str:
        payload = json.dumps(
            [self._fingerprint, PROMPT_VERSION, answer, [p.text for p in passages], question],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

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
        except CallFailed as failure:
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
            reply = await self._endpoint.complete(prompt.messages, usage, budget)
            if reply.refusal or reply.finish_reason == "content_filter":
                why = reply.refusal or "the reply was stopped by the endpoint's content filter"
                raise CallFailed(self._redact(f"the model refused: {why}")[:300], et.ERROR_REFUSED)
            if reply.finish_reason == "length":
                if not length_retried:
                    length_retried = True
                    self.stats.length_retries += 1
                    budget = max(
                        2 * (budget or reply.completion_tokens), DEFAULT_LENGTH_RETRY_TOKENS
                    )
                    _logger.debug("reply cut at its token limit; retrying with %d", budget)
                    continue
                raise CallFailed(
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
                raise CallFailed(
                    "the model's reply was not usable JSON claim verdicts (twice)",
                    et.ERROR_BAD_REPLY,
                )
            reply_retried = True
            self.stats.reply_retries += 1
            _logger.debug("unusable reply from %s, retrying once", self.model)
