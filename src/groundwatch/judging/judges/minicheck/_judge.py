"""MiniCheck (Tang, Laban and Durrett, EMNLP 2024) as a judge: :class:`MiniCheckJudge`."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...._shared.errors import install_hint
from .._detectors import ClaimReading, DetectorJudge, Reading
from ..local import LocalJudge
from ._chunks import Chunk, chunks, words
from ._layout import THRESHOLD, Layout
from ._model import DEFAULT_BATCH, Model, OnnxModel, TorchModel

PASSAGE_SEPARATOR = "\n"
"""Joins the passages into the one document MiniCheck reads: a line break, which the authors'
splitter never reads across, so no sentence spans two passages."""


@dataclass(frozen=True)
class ClaimSupport:
    """MiniCheck's reading of one claim."""

    probability: float
    """The authors' raw probability that the document supports the claim: the highest over
    the document's chunks."""
    chunk: Chunk | None
    """The chunk that gave it (the first of equals); ``None`` for a document without text."""
    per_chunk: tuple[float, ...] = ()
    """The probability from each chunk, in document order (the authors'
    ``support_prob_per_chunk``)."""


class MiniCheckJudge(DetectorJudge):
    """The MiniCheck fact checkers (RoBERTa-L, DeBERTa-v3-L, Flan-T5-L) as a judge.

    ``model`` is a checkpoint folder as published (``lytang/MiniCheck-RoBERTa-Large``,
    ``lytang/MiniCheck-DeBERTa-v3-Large``, ``lytang/MiniCheck-Flan-T5-Large``; which one is read
    from its config), its hub id, or the folder ``groundwatch export-onnx --judge minicheck``
    wrote (onnxruntime, no PyTorch). :meth:`support` is the authors' ``MiniCheck.score`` on the
    same weights: the document split into sentences by NLTK's Punkt, packed into chunks (400
    word pieces for RoBERTa and DeBERTa, 500 words for Flan-T5), each (chunk, claim) pair read
    in the authors' input format, the claim's probability the highest over the chunks.

    As a judge, the passages are joined by line breaks into the document and each claim of the
    answer (the shared claim splitter's) is read against it, all of an answer's claims in
    batches. The authors' rule decides: a claim is supported when its probability is above 0.5
    (MiniCheck checks sentences, and its authors say to split a longer text into sentences
    first), so the answer is supported when all its claims are; its probability of being
    supported is its least-supported claim's (the aggregation the authors use for multi-
    sentence claims with Bespoke-MiniCheck). A supported claim's evidence is the local judge's
    sentence stating it where there is one, else the chunk that gave the claim its probability.

    Args:
        model: the checkpoint folder, the ONNX export's folder or the hub id.
        runtime: ``"torch"`` or ``"onnx"`` (default: by the folder).
        threads: onnxruntime's threads (PyTorch's are process-wide: set only when given).
        rules_first: the local judge's exact rules decide the claims they fire on first.
        local: the lexical judge that splits the claims.
        revision: a hub model's commit, branch or tag.
        chunk_size: overrides the authors' chunk size (as their ``score(chunk_size=...)``).
        max_length: overrides the authors' ``max_model_len``.
        batch_size: (chunk, claim) pairs per model call (the authors' default, 16).
    """

    name = "minicheck"
    threshold = THRESHOLD
    rule = (
        "MiniCheck: a claim is supported when its probability, the highest over the chunks of "
        "the passages, is above 0.5; the answer when all its claims are"
    )

    def __init__(
        self,
        model: str | Path,
        *,
        runtime: str | None = None,
        threads: int | None = None,
        rules_first: bool = False,
        local: LocalJudge | None = None,
        revision: str | None = None,
        chunk_size: int | None = None,
        max_length: int | None = None,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        for what, value in (("chunk_size", chunk_size), ("max_length", max_length)):
            if value is not None and value < 1:
                raise ValueError(f"{what} must be at least 1, got {value!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        self._model: Model | None = None
        super().__init__(
            model,
            runtime=runtime,
            threads=threads,
            rules_first=rules_first,
            local=local,
            revision=revision,
            chunk_size=chunk_size,
            max_length=max_length,
            batch_size=batch_size,
        )

    def _load(self) -> None:
        try:
            importlib.import_module("nltk")  # the authors' sentence splitter (_chunks)
        except ImportError as exc:
            extra = "detectors" if self.runtime == "onnx" else "detectors-torch"
            raise ImportError(
                f"MiniCheckJudge splits documents with NLTK's Punkt: {install_hint(extra)}"
            ) from exc
        max_length = self.options.get("max_length")
        if self.runtime == "onnx":
            self._model = OnnxModel(self.model, threads=self.threads or 1, max_length=max_length)
        else:
            self._model = TorchModel(
                self.model, revision=self.options.get("revision"), max_length=max_length
            )

    @property
    def layout(self) -> Layout:
        """The checkpoint's architecture and the authors' settings for it."""
        return self._loaded_model().layout

    def _loaded_model(self) -> Model:
        self._ensure_loaded()
        if self._model is None:  # pragma: no cover - _ensure_loaded raises instead
            raise RuntimeError("MiniCheck model not loaded")
        return self._model

    def support(self, document: str, claims: list[str]) -> list[float]:
        """Each claim's probability of being supported by ``document``, as the authors'
        ``MiniCheck(...).score(docs=[document] * len(claims), claims=claims)`` returns it (its
        ``raw_prob``); 0.0 for a document without text (the authors' code fails there)."""
        return [s.probability for s in self.read(document, claims)]

    def read(self, document: str, claims: Sequence[str]) -> list[ClaimSupport]:
        """Each claim's probability and the chunk of ``document`` that gave it."""
        model = self._loaded_model()
        layout = model.layout
        size = self.options.get("chunk_size") or layout.chunk_size
        parts = chunks(document, size, words if layout.counts_words else model.texts.pieces)
        if not parts:
            return [ClaimSupport(0.0, None) for _ in claims]
        texts = [layout.text(c.text, claim, model.texts.eos) for claim in claims for c in parts]
        probs = model.supported(texts, batch=int(self.options.get("batch_size", DEFAULT_BATCH)))
        out = []
        for k in range(len(claims)):
            row = probs[k * len(parts) : (k + 1) * len(parts)]
            best = max(range(len(row)), key=lambda i: (row[i], -i))
            out.append(ClaimSupport(row[best], parts[best], tuple(row)))
        return out

    def _read(
        self, answer: str, contexts: Sequence[str], question: str | None, claims: Sequence[str]
    ) -> Reading:
        document = PASSAGE_SEPARATOR.join(contexts)
        readings = self.read(document, claims)
        support = min((r.probability for r in readings), default=1.0)
        return Reading(
            support=support,
            hallucinated=support <= THRESHOLD,
            why=f"MiniCheck: least-supported claim {support:.0%}",
            claims=tuple(
                ClaimReading(support=r.probability, evidence=_passage_spans(r.chunk, contexts))
                for r in readings
            ),
        )

    def _backs(self, cr: ClaimReading) -> bool:
        # The authors' rule is strict: supported above the threshold.
        return cr.support > self.threshold and not cr.flagged


def _passage_spans(
    chunk: Chunk | None, contexts: Sequence[str]
) -> tuple[tuple[int, int, int], ...]:
    """Where a chunk of the joined document lies in the passages: ``(passage, start, end)``
    for each passage it covers."""
    if chunk is None:
        return ()
    out = []
    offset = 0
    for p, text in enumerate(contexts):
        start, end = max(chunk.start, offset), min(chunk.end, offset + len(text))
        if start < end:
            out.append((p, start - offset, end - offset))
        offset += len(text) + len(PASSAGE_SEPARATOR)
    return tuple(out)
