"""``LettuceDetectJudge``: LettuceDetect's token classifiers as a full judge."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ...._shared.model_calls import MODEL_CALLS
from .._detectors import ClaimReading, DetectorJudge, Reading
from ..local import LocalJudge
from ._layout import DEFAULT_MAX_LENGTH, AnswerReading, Layout
from ._model import OnnxClassifier, TorchClassifier
from ._prompts import PROMPTS


class LettuceDetectJudge(DetectorJudge):
    """LettuceDetect (KR Labs): a token classifier that marks the answer's unsupported spans.

    Reads the checkpoints its authors publish: the English ModernBERT ones
    (``KRLabsOrg/lettucedect-base-modernbert-en-v1``, ``...-large-...``), TinyLettuce (Ettin
    encoders, the same architecture) and the multilingual EuroBERT ones (``lang=`` their
    language; they need a transformers release with EuroBERT built in: no repository code is
    run). The model reads the authors' prompt (question and numbered passages) paired with the
    answer, and labels each answer token (``_layout`` has the details).

    The answer's label is the authors' rule: hallucinated when the model flags any span (a
    token whose "hallucinated" probability wins, threshold 0.5). Each claim's verdict follows
    from it (``_detectors``): a claim holding a flagged span is ``unsupported``, its reason
    quoting the spans; ``hallucination_probability`` is the largest token probability of
    "hallucinated" over the answer, and a claim's support one minus the largest over its own
    tokens.

    Example::

        judge = LettuceDetectJudge("KRLabsOrg/lettucedect-base-modernbert-en-v1")
        judge.spans(["France's capital is Paris."], "The capital is Lyon.", "Capital?")

    Args:
        model: the checkpoint folder, its hub id, or a folder that ``groundwatch export-onnx
            --judge lettucedetect`` wrote (read by onnxruntime).
        lang: the prompt's language, the authors' codes: ``en``, ``de``, ``fr``, ``es``,
            ``it``, ``pl``, ``cn`` (Chinese), ``hu``.
        max_length: tokens per window (the authors' default 4,096).
        revision: the commit, branch or tag of a hub model.
        runtime, threads, rules_first, local: as for every detector judge
            (:class:`~groundwatch.judging.judges._detectors.DetectorJudge`).
    """

    name = "lettucedetect"
    threshold: ClassVar[float] = 0.5
    rule: ClassVar[str] = (
        "hallucinated when the model labels any answer token hallucinated (probability over 0.5)"
    )

    def __init__(
        self,
        model: str | Path,
        *,
        lang: str = "en",
        max_length: int = DEFAULT_MAX_LENGTH,
        revision: str | None = None,
        runtime: str | None = None,
        threads: int | None = None,
        rules_first: bool = False,
        local: LocalJudge | None = None,
    ) -> None:
        if lang not in PROMPTS:
            raise ValueError(f"lang must be one of {', '.join(PROMPTS)}, got {lang!r}")
        super().__init__(
            model,
            runtime=runtime,
            threads=threads,
            rules_first=rules_first,
            local=local,
            lang=lang,
            max_length=max_length,
            revision=revision,
        )

    def _load(self) -> None:
        classifier: TorchClassifier | OnnxClassifier
        if self.runtime == "onnx":
            classifier = OnnxClassifier(self.model, threads=self.threads or 1)
        else:
            classifier = TorchClassifier(self.model, revision=self.options["revision"])
        self._classifier = classifier
        self._layout = Layout(
            classifier.tokenizer, self.options["lang"], self.options["max_length"]
        )

    def reading(
        self, contexts: Sequence[str], answer: str, question: str | None = None
    ) -> AnswerReading:
        """The model's spans and token probabilities for one answer."""
        self._ensure_loaded()
        # Inside the exit gate, as the judge's own calls are (groundwatch._shared.model_calls).
        with MODEL_CALLS.call():
            return self._layout.read(contexts, question, answer, self._classifier.logits)

    def spans(
        self, contexts: Sequence[str], answer: str, question: str | None = None
    ) -> list[dict[str, Any]]:
        """The answer's unsupported spans, as ``lettucedetect``'s
        ``HallucinationDetector(method="transformer", model_path=...).predict(contexts, answer,
        question, output_format="spans")`` returns them on the same weights: dicts with
        ``start``, ``end``, ``text`` and ``confidence`` (the span's largest token probability of
        "hallucinated"), offsets from the answer's first token.

        Raises:
            ValueError: the answer alone does not fit the model's window.
        """
        return self.reading(contexts, answer, question).spans

    def _read(
        self, answer: str, contexts: Sequence[str], question: str | None, claims: Sequence[str]
    ) -> Reading:
        read = self._layout.read(contexts, question, answer, self._classifier.logits)
        flagged = [(s["start"] + read.shift, s["end"] + read.shift) for s in read.spans]
        worst = max((p for _, _, p in read.tokens), default=0.0)
        out = []
        at = 0
        for text in claims:
            start = answer.find(text, at)
            if start < 0:  # not a slice of the answer: nothing can be placed in it
                out.append(ClaimReading(support=1.0 - worst))
                continue
            end = at = start + len(text)
            inside = [p for s, e, p in read.tokens if s < end and e > start]
            out.append(
                ClaimReading(
                    support=1.0 - max(inside, default=worst),
                    flagged=tuple(
                        (max(s, start), min(e, end)) for s, e in flagged if s < end and e > start
                    ),
                )
            )
        hallucinated = bool(read.spans)
        why = (
            f"LettuceDetect: {len(read.spans)} unsupported span(s), largest token probability "
            f"{worst:.0%}"
            if hallucinated
            else f"LettuceDetect: no unsupported span (largest token probability {worst:.0%})"
        )
        return Reading(support=1.0 - worst, hallucinated=hallucinated, why=why, claims=tuple(out))
