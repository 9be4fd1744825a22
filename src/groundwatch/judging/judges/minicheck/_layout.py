"""The three MiniCheck checkpoints as their authors run them (``minicheck/inference.py``,
github.com/Liyan06/MiniCheck): which one a checkpoint is, and how a (chunk, claim) pair becomes
the model's input and its output a probability.

* ``lytang/MiniCheck-RoBERTa-Large`` (config ``model_type`` ``roberta``) and
  ``lytang/MiniCheck-DeBERTa-v3-Large`` (``deberta-v2``): sequence classifiers with two classes;
  class 1 is "supported". The input is the chunk and the claim joined by the tokenizer's end
  token (``</s>``, ``[SEP]``) as one text, which the tokenizer reads with its special tokens,
  cut at 512 (RoBERTa) or 2048 (DeBERTa) pieces. Chunks hold 400 word pieces.
* ``lytang/MiniCheck-Flan-T5-Large`` (``t5``): the text is ``"predict: " + chunk + "</s>" +
  claim``, cut at 2048 pieces; the decoder takes one step from token 0, and of its logits those
  of tokens 3 ("unsupported") and 209 ("supported") are compared. Chunks hold 500 words.

Every model's probability is the softmax over its two logits, column 1; a claim's probability
is the highest over the document's chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SUPPORTED = 1
"""The column of "supported" in the two logits (the authors' label 1)."""
T5_LABEL_TOKENS = (3, 209)
"""Flan-T5's vocabulary ids whose first-step logits are the two classes, unsupported first."""
T5_PREFIX = "predict: "
THRESHOLD = 0.5
"""The authors' decision: a claim is supported when its probability is above this."""


@dataclass(frozen=True)
class Layout:
    """One MiniCheck architecture's input format and defaults."""

    name: str
    """``roberta-large``, ``deberta-v3-large`` or ``flan-t5-large``: the authors' model name."""
    max_length: int
    """Pieces the tokenizer keeps of a chunk-and-claim text (and of a sentence, counted)."""
    chunk_size: int
    """A chunk's size in word pieces (or in words, where ``counts_words``)."""
    prefix: str = ""
    counts_words: bool = False
    seq2seq: bool = False

    def text(self, chunk: str, claim: str, eos: str) -> str:
        """The model's input text for one chunk and one claim."""
        return self.prefix + chunk + eos + claim


LAYOUTS: dict[str, Layout] = {
    "roberta": Layout("roberta-large", max_length=512, chunk_size=400),
    "deberta-v2": Layout("deberta-v3-large", max_length=2048, chunk_size=400),
    "t5": Layout(
        "flan-t5-large",
        max_length=2048,
        chunk_size=500,
        prefix=T5_PREFIX,
        counts_words=True,
        seq2seq=True,
    ),
}
"""By the config's ``model_type``."""


def layout_of(config: Mapping[str, Any]) -> Layout:
    """The layout of a checkpoint from its ``config.json`` (``ValueError`` for another model)."""
    kind = config.get("model_type")
    if kind not in LAYOUTS:
        raise ValueError(
            f"not a MiniCheck checkpoint: its config's model_type is {kind!r}; MiniCheckJudge "
            "reads lytang/MiniCheck-RoBERTa-Large, -DeBERTa-v3-Large and -Flan-T5-Large "
            f"(model_type {', '.join(sorted(LAYOUTS))})"
        )
    layout = LAYOUTS[kind]
    # A config without id2label is transformers' default: two classes.
    classes = config.get("num_labels") or len(config.get("id2label") or {}) or 2
    if not layout.seq2seq and classes != 2:
        raise ValueError(f"a MiniCheck classifier has two classes; this {kind} model has {classes}")
    return layout
