"""What a LettuceDetect model reads and how its token labels become answer spans, as its
authors' ``TransformerDetector`` (``lettucedetect`` 0.2) does it.

Input layout: the tokenizer's pair template over (prompt, answer), ``[CLS] prompt [SEP] answer
[SEP]`` for ModernBERT, the prompt cut from its end (``only_first`` truncation) to
``max_length`` tokens; the answer is never cut. The answer's first token is found from the end:
the answer's own token count, then the final separator.

Long contexts: when the prompt with every passage does not fit beside the answer, the passages
are grouped greedily, in order, so that each group's prompt fits (counting each passage's line,
``passage N: text``, plus one token per newline between lines); each group is a prompt of its
own (its passages numbered from 1), every window is read, and each answer token's probability
of being hallucinated is the largest over the windows.

Spans: consecutive answer tokens labelled hallucinated (label 1) form a span; its confidence is
the largest of their probabilities. With one window a token is hallucinated when that label's
logit is the larger (argmax); with several, when its largest probability is at least 0.5.
Tokens without characters (offsets ``start == end``: special tokens) are skipped. Offsets are
relative to the answer's first token's start, as the authors compute them (so an answer that
starts with whitespace reads shifted; :class:`AnswerReading` keeps the shift). With several
windows the authors pair the aggregated tokens with the answer offsets of the tokens that have
characters, by position; that pairing is kept too, so that :func:`spans` returns what their
``predict(..., output_format="spans")`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._prompts import PROMPTS, format_prompt, passage_line

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

HALLUCINATED = 1
"""The output index of the "hallucinated" label (the models are trained with ``num_labels=2``:
0 supported, 1 hallucinated; their configs name them ``LABEL_0`` and ``LABEL_1``)."""

DEFAULT_MAX_LENGTH = 4096
"""Tokens per window, special tokens included: the authors' default (ModernBERT's models
were trained at this length; the EuroBERT ones read up to 8,192)."""

TRUNCATION = "only_first"
"""Which of the pair is cut when a window is too long: the prompt..."""
TRUNCATION_SIDE = "right"
"""...from its end (the tokenizer's default side, as the authors' code leaves it)."""

SPECIAL_AFTER_ANSWER = 1
"""Special tokens after the answer in the pair template (the final separator)."""


@dataclass(frozen=True)
class Window:
    """One (prompt, answer) input of the model."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    """Character offsets of each token in its own text (the prompt or the answer)."""
    answer_start: int
    """Index of the answer's first token."""


@dataclass(frozen=True)
class AnswerReading:
    """The model's reading of one answer: the authors' spans and the token probabilities."""

    spans: list[dict[str, Any]]
    """What ``lettucedetect``'s ``predict(..., output_format="spans")`` returns: ``start``,
    ``end`` (offsets from the answer's first token), ``text``, ``confidence``."""
    shift: int
    """Offset of the answer's first token in the answer: ``start + shift`` is a span's place in
    the answer (0 unless the answer starts with whitespace)."""
    tokens: list[tuple[int, int, float]]
    """The answer's tokens that have characters: ``(start, end, probability hallucinated)``,
    offsets in the answer."""


class Layout:
    """Encodes (passages, question, answer) into model windows and reads the model's output.

    ``tokenizer`` is the checkpoint's ``tokenizers.Tokenizer`` (its pair template adds the
    special tokens); ``lang`` one of :data:`~._prompts.PROMPTS`. Thread-safe: the two copies of
    the tokenizer are configured once and only encode afterwards.
    """

    def __init__(self, tokenizer: Any, lang: str = "en", max_length: int = DEFAULT_MAX_LENGTH):
        if lang not in PROMPTS:
            raise ValueError(f"lang must be one of {', '.join(PROMPTS)}, got {lang!r}")
        if max_length < 8:
            raise ValueError(f"max_length must be at least 8, got {max_length!r}")
        self.lang = lang
        self.max_length = max_length
        cls = type(tokenizer)
        self._pairs = cls.from_str(tokenizer.to_str())
        self._pairs.no_padding()
        self._pairs.enable_truncation(
            max_length, stride=0, strategy=TRUNCATION, direction=TRUNCATION_SIDE
        )
        self._plain = cls.from_str(tokenizer.to_str())
        self._plain.no_padding()
        self._plain.no_truncation()

    def count(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self._plain.encode(text, add_special_tokens=False).ids)

    def groups(self, contexts: Sequence[str], question: str | None, answer: str) -> list[list[str]]:
        """The passages grouped so that each group's prompt fits beside the answer."""
        budget = self.max_length - self.count(answer) - 3
        if self.count(format_prompt(contexts, question, self.lang)) <= budget:
            return [list(contexts)]
        room = budget - self.count(format_prompt([""], question, self.lang))
        if room <= 0:  # the instructions and the answer alone overflow: one window, cut
            return [list(contexts)]
        sizes = [self.count(passage_line(i, p, self.lang)) for i, p in enumerate(contexts)]
        groups: list[list[str]] = []
        group: list[str] = []
        used = 0
        for passage, size in zip(contexts, sizes, strict=True):
            cost = size + (1 if group else 0)  # the newline before a passage's line
            if group and used + cost > room:
                groups.append(group)
                group, used, cost = [], 0, size
            group.append(passage)
            used += cost
        if group:
            groups.append(group)
        return groups or [list(contexts)]

    def windows(self, contexts: Sequence[str], question: str | None, answer: str) -> list[Window]:
        """The model's inputs for one answer (one window unless the passages overflow)."""
        answer_tokens = self.count(answer)
        out = []
        for group in self.groups(contexts, question, answer):
            prompt = format_prompt(group, question, self.lang)
            try:
                encoding = self._pairs.encode(prompt, answer)
            except Exception as exc:  # tokenizers says "Truncation error: ..."
                raise ValueError(
                    f"the answer ({answer_tokens} tokens) does not fit the model's "
                    f"{self.max_length}-token window beside the instructions: {exc}"
                ) from exc
            start = len(encoding.ids) - answer_tokens - SPECIAL_AFTER_ANSWER
            out.append(Window(list(encoding.ids), list(encoding.offsets), start))
        return out

    def read(
        self,
        contexts: Sequence[str],
        question: str | None,
        answer: str,
        logits_of: Callable[[Sequence[Sequence[int]]], list[NDArray[np.float32]]],
    ) -> AnswerReading:
        """Run the model (``logits_of``: each window's ``(tokens, labels)`` logits) on the
        answer's windows and read its spans and token probabilities."""
        windows = self.windows(contexts, question, answer)
        logits = logits_of([w.ids for w in windows])
        probs = [_softmax(x) for x in logits]
        first = windows[0]
        n = len(first.ids)
        shift = first.offsets[first.answer_start][0] if 0 <= first.answer_start < n else 0
        if len(windows) == 1:
            p = probs[0][:, HALLUCINATED]
            flagged = logits[0].argmax(axis=-1) == HALLUCINATED
            answer_p = [float(x) for x in p[first.answer_start :]]
            spans = _spans(
                answer,
                [
                    (s - shift, e - shift, bool(flagged[i]), answer_p[i - first.answer_start])
                    for i in range(first.answer_start, n)
                    for s, e in [first.offsets[i]]
                    if s != e
                ],
            )
        else:
            per_window = [
                x[w.answer_start :, HALLUCINATED] for w, x in zip(windows, probs, strict=True)
            ]
            answer_p = [
                max(float(x[t]) for x in per_window if t < len(x))
                for t in range(len(per_window[0]))
            ]
            with_chars = [
                (s - shift, e - shift) for s, e in first.offsets[first.answer_start :] if s != e
            ]
            # The authors pair token t with the t-th answer offset that has characters.
            spans = _spans(
                answer,
                [(*with_chars[t], q >= 0.5, q) for t, q in enumerate(answer_p[: len(with_chars)])],
            )
        tokens = [
            (s, e, answer_p[i - first.answer_start])
            for i in range(max(first.answer_start, 0), n)
            for s, e in [first.offsets[i]]
            if s != e
        ]
        return AnswerReading(spans=spans, shift=shift, tokens=tokens)


def _softmax(logits: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    out: NDArray[np.float32] = e / e.sum(axis=-1, keepdims=True)
    return out


def _spans(answer: str, tokens: Sequence[tuple[int, int, bool, float]]) -> list[dict[str, Any]]:
    """Runs of flagged tokens as spans: ``(start, end, flagged, probability)`` per token."""
    spans: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for start, end, flagged, p in tokens:
        if flagged:
            if current is None:
                current = {"start": start, "end": end, "confidence": p}
            else:
                current["end"] = end
                current["confidence"] = max(current["confidence"], p)
        elif current is not None:
            current["text"] = answer[current["start"] : current["end"]]
            spans.append(current)
            current = None
    if current is not None:
        current["text"] = answer[current["start"] : current["end"]]
        spans.append(current)
    return spans
