"""The entailment cross-encoder's input format and its ONNX runtime (experimental, not shipped).

One module owns how a (premise, hypothesis) pair becomes model input, so that the training
script (``training/train_nli.py``) and inference cannot drift apart: ``[CLS] premise [SEP]
hypothesis [SEP]``, segment ids 0 then 1, the uncased WordPiece vocabulary of
all-MiniLM-L6-v2 (bundled as ``_minilm_vocab.txt.gz``), the hypothesis cut to
``MAX_HYPOTHESIS_PIECES`` and the premise to what is left of ``max_length``.

The model is a three-way classifier (``LABELS``) fine-tuned from all-MiniLM-L6-v2 on SNLI and
synthetic grounding pairs, exported to ONNX and quantised to int8 (``training/README.md``).
No weights are shipped with the package: ``NLIEncoder`` reads a model file the caller names.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import install_hint
from ..._weakhooks import reinit_after_fork
from ._minilm import build_tokenizer

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# No "nli" extra exists while the model is not shipped; the semantic extra has the runtime.
INSTALL_HINT = (
    'the experimental NLI judge needs numpy, onnxruntime and tokenizers, which the "semantic" '
    f"extra installs, {install_hint('semantic')}"
)

LABELS = ("entailment", "neutral", "contradiction")
"""The model's output classes, in the order of its logits."""

MAX_LENGTH = 256
"""Word pieces per pair at most, special tokens included."""
MAX_HYPOTHESIS_PIECES = 64
"""Word pieces of the hypothesis (the claim) at most; claims are short sentences."""
BATCH = 16


def encode_pairs(
    tokenizer: Any,
    cls: int,
    sep: int,
    pairs: Sequence[tuple[str, str]],
    max_length: int = MAX_LENGTH,
) -> list[tuple[list[int], list[int]]]:
    """``(input ids, segment ids)`` of each (premise, hypothesis) pair, unpadded."""
    premises = tokenizer.encode_batch([p for p, _ in pairs], add_special_tokens=False)
    hypotheses = tokenizer.encode_batch([h for _, h in pairs], add_special_tokens=False)
    out: list[tuple[list[int], list[int]]] = []
    for prem, hyp in zip(premises, hypotheses, strict=True):
        h = list(hyp.ids[:MAX_HYPOTHESIS_PIECES])
        p = list(prem.ids[: max(0, max_length - 3 - len(h))])
        ids = [cls, *p, sep, *h, sep]
        out.append((ids, [0] * (len(p) + 2) + [1] * (len(h) + 1)))
    return out


def premise_pieces(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """How many word pieces each text is (to choose a premise that fits)."""
    return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def _require() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import onnxruntime
        import tokenizers
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return numpy, onnxruntime, tokenizers


class NLIEncoder:
    """Runs the int8 ONNX cross-encoder on (premise, hypothesis) pairs.

    Thread-safe (onnxruntime sessions are). Picklable: the session is rebuilt in the process
    that unpickles it, from the same file, whose checksum must still match.
    """

    def __init__(self, model_path: str | Path, threads: int = 1, sha256: str | None = None):
        self.model_path = Path(model_path)
        self.threads = threads
        self.sha256 = sha256
        self._setup()
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    def _setup(self) -> None:
        np, ort, tokenizers = _require()
        self._np = np
        raw = self.model_path.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if self.sha256 is not None and digest != self.sha256:
            raise RuntimeError(f"unexpected NLI model file {self.model_path} ({digest[:12]}…)")
        self.sha256 = digest
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
        self._names = {i.name for i in self._session.get_inputs()}
        self._tokenizer, self._cls, self._sep = build_tokenizer(tokenizers)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "threads": self.threads, "sha256": self.sha256}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.model_path = state["model_path"]
        self.threads = state["threads"]
        self.sha256 = state["sha256"]
        self._setup()

    def pieces(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text."""
        return premise_pieces(self._tokenizer, texts)

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]:
        """``(len(pairs), 3)`` class probabilities in ``LABELS`` order."""
        xp = self._np
        encoded = encode_pairs(self._tokenizer, self._cls, self._sep, pairs)
        out = xp.zeros((len(pairs), len(LABELS)), dtype=xp.float32)
        # Similar lengths together: padding is wasted compute.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
        for b in range(0, len(order), BATCH):
            rows = order[b : b + BATCH]
            width = max(len(encoded[i][0]) for i in rows)
            ids = xp.zeros((len(rows), width), dtype=xp.int64)
            types = xp.zeros_like(ids)
            mask = xp.zeros_like(ids)
            for r, i in enumerate(rows):
                seq, seg = encoded[i]
                ids[r, : len(seq)] = seq
                types[r, : len(seg)] = seg
                mask[r, : len(seq)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            logits = self._session.run(None, {k: v for k, v in feed.items() if k in self._names})
            z = logits[0] - logits[0].max(axis=1, keepdims=True)
            p = xp.exp(z)
            out[rows] = p / p.sum(axis=1, keepdims=True)
        result: NDArray[np.float32] = out
        return result
