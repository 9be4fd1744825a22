"""The demo's application: a help-centre RAG chain built from langchain-core parts.

An in-memory vector store over the bundled corpus (English and Chinese passages, retrieved with
a hashed bag-of-words embedding), a prompt, and a scripted chat model that answers from the
retrieved text: faithfully at first, drifting from it after a set share of the requests
(:class:`Script`). LangChain is imported inside :func:`build_chain`, never by the core package.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..judging.text.lexical import CJK, CJK_CHAR
from . import data

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable


def _words(text: str) -> list[str]:
    """Lower-case words, plus single characters and bigrams of Chinese text."""
    out = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]
    for run_ in re.findall(f"[{CJK}]+", text):
        out.extend(run_)
        out.extend(run_[i : i + 2] for i in range(len(run_) - 1))
    return out


_STOP = frozenset(
    "a an the of to in on at for by with and or is are was were be it its this that as from do "
    "does did how what when can i my is".split()
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.findall(r"[^.!?。！？]+[.!?。！？]?", text) if s.strip()]


def _is_chinese(text: str) -> bool:
    return bool(CJK_CHAR.search(text))


@dataclass
class Script:
    """What the scripted model does on each call: faithful at first, drifting later."""

    requests: int
    seed: int
    drift_at: int
    calls: int = 0
    drifted: list[bool] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hallucination_probability(self, i: int) -> float:
        if i < self.drift_at:
            return 0.03
        ramp = max(1.0, 0.08 * self.requests)
        return 0.03 + 0.67 * min(1.0, (i - self.drift_at + 1) / ramp)

    def answer(self, question: str, context: str) -> str:
        with self.lock:
            i = self.calls
            self.calls += 1
        rng = random.Random(self.seed * 1_000_003 + i)
        passages = [p for p in context.split("\n\n") if p.strip()]
        top = passages[0] if passages else ""
        qwords = set(_words(question))
        sents = _sentences(top) or [top]
        best = max(sents, key=lambda s: len(qwords & set(_words(s))))
        zh = _is_chinese(top)
        drift = rng.random() < self.hallucination_probability(i)
        with self.lock:
            self.drifted.append(drift)
        if not drift:
            return best
        invention = rng.choice(data.INVENTIONS_ZH if zh else data.INVENTIONS_EN)
        roll = rng.random()
        if roll < 0.55:
            return best + ("" if zh else " ") + invention
        if roll < 0.8:
            return invention
        # A changed number: a contradiction that a purely lexical check can miss.
        changed = re.sub(r"\d+", lambda m: str(int(m.group(0)) * 3 + 1), best, count=1)
        return changed + ("" if zh else " ") + invention if changed == best else changed


def build_chain(script: Script) -> Runnable[str, str]:
    """The help-centre RAG chain, from langchain-core parts (imported here, lazily)."""
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    class HashedBagOfWords(Embeddings):
        """A deterministic bag-of-words embedding (hashed words and Chinese bigrams).

        langchain-core's DeterministicFakeEmbedding hashes the whole text into one random
        vector, so retrieval with it is random; this one makes the retrieval relevant.
        """

        size = 512

        def _embed(self, text: str) -> list[float]:
            vec = [0.0] * self.size
            for w in _words(text):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big")
                vec[h % self.size] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            return [v / norm for v in vec]

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [self._embed(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return self._embed(text)

    class ScriptedChatModel(BaseChatModel):
        """Answers from the context in its prompt, as the script says."""

        script: Any

        @property
        def _llm_type(self) -> str:
            return "groundwatch-demo-scripted"

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            system = str(messages[0].content) if messages else ""
            question = str(messages[-1].content) if messages else ""
            context = system.split("Context:\n", 1)[-1]
            answer = self.script.answer(question.removeprefix("Question: "), context)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])

    store = InMemoryVectorStore(HashedBagOfWords())
    store.add_documents(
        [
            Document(page_content=text, id=pid, metadata={"language": lang})
            for pid, lang, text in data.PASSAGES
        ]
    )
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the context only.\n\nContext:\n{context}"),
            ("human", "Question: {question}"),
        ]
    )

    def format_docs(docs: Sequence[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    chain: Runnable[str, str] = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | ScriptedChatModel(script=script)
        | StrOutputParser()
    )
    return chain
