"""Deterministic stand-ins for the parts of a LlamaIndex pipeline that need a model."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"[A-Z][^.\n]*\.")
_STOP = frozenset("the a an is of in to and what how which who when does do was it its".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class ContextAnswerLLM(CustomLLM):
    """Answers with the sentence of the prompt's context that best matches the question.

    The question is the prompt's last ``Query:`` line (query engines) or last ``user:`` line
    (chat); a condense-question prompt gets the follow-up message back. Extractive and grounded,
    so the pipelines under test behave like real RAG.
    """

    def _answer(self, prompt: str) -> str:
        lines = [line.strip() for line in prompt.splitlines() if line.strip()]
        question = ""
        for prefix in ("Follow Up Input:", "Query:", "user:"):
            found = [line[len(prefix) :] for line in lines if line.startswith(prefix)]
            if found:
                question = found[-1].strip()
                break
        if "Standalone question" in prompt:
            return question  # condensing a chat turn: the latest message stands alone
        body = prompt.replace(question, " ")
        best, best_overlap = "I don't know.", 0
        wanted = _words(question)
        for sentence in _SENTENCE.findall(body):
            overlap = len(wanted & _words(sentence))
            if overlap > best_overlap:
                best, best_overlap = sentence.strip(), overlap
        return best

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="context-answer")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        answer = self._answer(prompt)
        tokens = re.findall(r"\S+\s*", answer)

        def gen() -> CompletionResponseGen:
            text = ""
            for token in tokens:
                text += token
                yield CompletionResponse(text=text, delta=token)

        return gen()


class BagOfWordsEmbedding(BaseEmbedding):
    """Hashes words into a small vector, so retrieval depends on the query's words."""

    dim: int = 512

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for word in _words(text):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        if not any(vec):
            vec[0] = 1.0
        return vec

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)
