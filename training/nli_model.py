"""The entailment cross-encoder's input format and its ONNX runtime (experimental, not shipped).

One module owns how a (premise, hypothesis) pair becomes model input, so that the training
script (``training/train_nli.py``) and inference cannot drift apart: ``[CLS] premise [SEP]
hypothesis [SEP]``, segment ids 0 then 1, the uncased WordPiece vocabulary of
all-MiniLM-L6-v2 (bundled as ``_minilm_vocab.txt.gz``), the hypothesis cut to
``MAX_HYPOTHESIS_PIECES`` and the premise to what is left of ``max_length``.

It lives in ``training/`` beside :mod:`nli_judge` (out of the wheel until a model ships).

The project's models are fine-tuned from all-MiniLM-L6-v2 (``training/README.md``), exported to
ONNX and quantised to int8. No weights are shipped with the package: ``NLIEncoder`` reads a
model the caller names, either

* an ONNX file: the training format above, three classes in ``LABELS`` order (a
  ``config.json`` beside it, as ``training/export_nli.py`` leaves, names its classes), or
* a sequence-classification cross-encoder folder: an ONNX graph (``model.int8.onnx``,
  ``model_quantized.onnx`` or ``model.onnx``, at the top or in ``onnx/``), ``config.json``
  whose ``id2label`` names the classes (entailment / neutral / contradiction, or two-way
  entailment / not entailment, in any order and common spellings), and ``tokenizer.json``
  (the model's own tokenizer with its pair template; without one, the bundled MiniLM
  vocabulary and the training format above).

Whatever the model's classes, ``NLIEncoder.probabilities`` answers in ``LABELS`` columns; a
two-way model's "not entailment" is the neutral column and its contradiction column is zero.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundwatch._errors import install_hint
from groundwatch._weakhooks import reinit_after_fork
from groundwatch.judging.judges._minilm import build_tokenizer

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

ONNX_NAMES = (
    "model.int8.onnx",
    "model_quantized.onnx",
    "onnx/model_quantized.onnx",
    "model.onnx",
    "onnx/model.onnx",
)
"""Where a cross-encoder folder's ONNX graph is looked for, first found first (int8 first:
``training/export_nli.py`` and Optimum's quantiser write those names)."""

_COLUMN_OF = {
    **dict.fromkeys(("entailment", "entailed", "entail", "entails", "supported"), 0),
    **dict.fromkeys(("neutral", "not_entailment", "not_entailed", "non_entailment"), 1),
    **dict.fromkeys(("contradiction", "contradicted", "contradict", "contradicts"), 2),
}


def label_columns(id2label: Mapping[Any, str] | None) -> list[int]:
    """For each of a model's outputs (``id2label`` of its config, keys output indices), the
    ``LABELS`` column it adds to; ``None`` (a bare model file) is ``LABELS`` order. Raises
    ``ValueError`` for a class name it cannot place (``LABEL_0`` and the like say nothing) or a
    model with no entailment class or more than one."""
    if id2label is None:
        return list(range(len(LABELS)))
    names = [str(id2label[k]) for k in sorted(id2label, key=int)]
    columns = []
    for name in names:
        key = name.strip().lower().replace("-", "_").replace(" ", "_")
        if key not in _COLUMN_OF:
            raise ValueError(
                f"cannot read the model's class {name!r}: its config's id2label must name "
                "entailment, neutral, contradiction or not_entailment"
            )
        columns.append(_COLUMN_OF[key])
    if columns.count(0) != 1:
        problem = "no entailment class" if 0 not in columns else "more than one entailment class"
        raise ValueError(f"the model has {problem}: {names}")
    return columns


def _find_files(path: Path) -> tuple[Path, Path | None, Path | None]:
    """(ONNX graph, config.json or None, tokenizer.json or None) of a model file or folder."""
    if path.is_dir():
        for name in ONNX_NAMES:
            if (path / name).is_file():
                onnx_file = path / name
                break
        else:
            found = sorted(path.glob("*.onnx")) + sorted(path.glob("onnx/*.onnx"))
            if len(found) != 1:
                raise FileNotFoundError(
                    f"no ONNX file in {path} (looked for {', '.join(ONNX_NAMES)})"
                    if not found
                    else f"several ONNX files in {path}, none named as expected: {found}"
                )
            onnx_file = found[0]
        folder = path
    else:
        onnx_file, folder = path, path.parent
    config, tokenizer = folder / "config.json", folder / "tokenizer.json"
    return (
        onnx_file,
        config if config.is_file() else None,
        tokenizer if tokenizer.is_file() and path.is_dir() else None,
    )


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


def require() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import onnxruntime
        import tokenizers
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return numpy, onnxruntime, tokenizers


class NLIEncoder:
    """Runs an ONNX cross-encoder on (premise, hypothesis) pairs.

    ``model_path`` is an ONNX file or a cross-encoder folder (the module doc says which files
    it reads); ``sha256`` checks the ONNX file. Thread-safe (onnxruntime sessions are).
    Picklable: the session is rebuilt in the process that unpickles it, from the same files,
    the ONNX one's checksum still matching.
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
        np, ort, tokenizers = require()
        self._np = np
        self.onnx_file, config, tokenizer_file = _find_files(self.model_path)
        id2label = None
        if config is not None:
            id2label = json.loads(config.read_text("utf-8")).get("id2label")
        # The training format's bare file has no config: its classes are LABELS.
        self.labels: tuple[str, ...] = (
            LABELS if id2label is None else tuple(id2label[k] for k in sorted(id2label, key=int))
        )
        self._columns = label_columns(id2label)
        raw = self.onnx_file.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if self.sha256 is not None and digest != self.sha256:
            raise RuntimeError(f"unexpected NLI model file {self.onnx_file} ({digest[:12]}…)")
        self.sha256 = digest
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
        self._names = {i.name for i in self._session.get_inputs()}
        self._tokenizer, self._cls, self._sep = build_tokenizer(tokenizers)
        # A folder's own tokenizer (its pair template adds the special tokens and segments);
        # None: the bundled MiniLM vocabulary in the training format.
        self._own: Any = None
        if tokenizer_file is not None:
            self._own = tokenizers.Tokenizer.from_file(str(tokenizer_file))
            self._own.no_padding()
            self._own.enable_truncation(MAX_LENGTH, strategy="longest_first")
            self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
            self._tokenizer.no_padding()
            self._tokenizer.no_truncation()
        self._pad = 0
        if self._own is not None:
            for name in ("[PAD]", "<pad>"):
                if (pad := self._own.token_to_id(name)) is not None:
                    self._pad = pad
                    break
        self._lock = threading.Lock()

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        if self._own is None:
            return encode_pairs(self._tokenizer, self._cls, self._sep, pairs)
        return [(e.ids, e.type_ids) for e in self._own.encode_batch(list(pairs))]

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
        """``(len(pairs), 3)`` class probabilities in ``LABELS`` order, whatever the model's
        own classes (mapped from its config)."""
        xp = self._np
        encoded = self._encode(pairs)
        out = xp.zeros((len(pairs), len(LABELS)), dtype=xp.float32)
        # Similar lengths together: padding is wasted compute.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
        for b in range(0, len(order), BATCH):
            rows = order[b : b + BATCH]
            width = max(len(encoded[i][0]) for i in rows)
            ids = xp.full((len(rows), width), self._pad, dtype=xp.int64)
            types = xp.zeros((len(rows), width), dtype=xp.int64)
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
            p /= p.sum(axis=1, keepdims=True)
            mapped = xp.zeros((len(rows), len(LABELS)), dtype=xp.float32)
            for output, column in enumerate(self._columns):
                mapped[:, column] += p[:, output]
            out[rows] = mapped
        result: NDArray[np.float32] = out
        return result
