"""The LLM judge: claim verdicts from any OpenAI-compatible Chat Completions endpoint.

One request per answer. The model lists the answer's claims and gives each a verdict with a
verbatim quote from a numbered passage; groundwatch then checks every quote against its passage
(:mod:`groundwatch.judging.scoring`), so a verdict the passages do not back cannot count.

Works with OpenAI, Azure OpenAI (v1 endpoint or a client you build), vLLM, Ollama, LM Studio,
LiteLLM, llama.cpp servers and any other server that speaks ``POST /v1/chat/completions``,
without flags: the response format is negotiated from the server's answers (docs/llm-judge.md,
"Format negotiation"). Needs the ``openai`` package (the ``openai`` extra),
imported only when a judge is built.

The judge (:mod:`._judge`: settings, cache, one answer's prompt and reply) is apart from its
endpoint (:mod:`._endpoint`: one request, its retries, circuit breaker and format negotiation).
"""

from __future__ import annotations

from ._endpoint import OpenAIJudgeStats, ResponseFormat
from ._judge import (
    DEFAULT_BACKOFF_BASE_SECONDS,
    DEFAULT_BACKOFF_CAP_SECONDS,
    DEFAULT_CACHE_SIZE,
    DEFAULT_CONCURRENCY,
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_LENGTH_RETRY_TOKENS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_RETRY_AFTER_SECONDS,
    DEFAULT_RECOVERY_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    INSTALL_HINT,
    OpenAIJudge,
)

__all__ = [
    "DEFAULT_BACKOFF_BASE_SECONDS",
    "DEFAULT_BACKOFF_CAP_SECONDS",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_LENGTH_RETRY_TOKENS",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "DEFAULT_MAX_RETRY_AFTER_SECONDS",
    "DEFAULT_RECOVERY_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "INSTALL_HINT",
    "OpenAIJudge",
    "OpenAIJudgeStats",
    "ResponseFormat",
]
