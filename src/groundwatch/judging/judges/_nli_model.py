"""Entailment cross-encoders for :class:`~groundwatch.NLIJudge`: the input format of
groundwatch's own models, the class names of any model, and the two runtimes that read them.

One module owns how a (premise, hypothesis) pair becomes model input, so that training
(``training/train_nli.py``) and inference cannot drift apart: ``[CLS] premise [SEP] hypothesis
[SEP]``, segment ids 0 then 1, the uncased WordPiece vocabulary of all-MiniLM-L6-v2 (bundled as
``_minilm_vocab.txt.gz``), the hypothesis cut to ``MAX_HYPOTHESIS_PIECES`` and the premise to
what is left of ``MAX_LENGTH``.

No weights ship with groundwatch (``training/README.md`` says why). The caller names the model,
and :func:`runtime_of` says which runtime reads it:

* an ONNX file: the training format above, three classes in ``LABELS`` order (a ``config.json``
  beside it, as ``training/export_nli.py`` leaves, names its classes);
* a sequence-classification cross-encoder folder with an ONNX graph (``model.int8.onnx``,
  ``model_quantized.onnx`` or ``model.onnx``, at the top or in ``onnx/``), its ``config.json``
  whose ``id2label`` names the classes (entailment / neutral / contradiction, or two-way
  entailment / not entailment, in any order and common spellings) and its ``tokenizer.json``
  (the model's own tokenizer with its pair template; without one, the bundled MiniLM vocabulary
  and the training format above), run by onnxruntime (the ``nli`` extra): :class:`NLIEncoder`;
* a folder without ONNX (PyTorch or safetensors weights, ``config.json``, its tokenizer files),
  or a Hugging Face Hub id, run by ``transformers`` on PyTorch (the ``nli-transformers``
  extra): :class:`TransformersEncoder`. A hub id is resolved by ``transformers`` itself: from
  its cache, and downloaded only where the environment allows (``HF_HUB_OFFLINE=1`` forbids).

Whatever the model's classes, ``probabilities`` answers in ``LABELS`` columns; a two-way
model's "not entailment" is the neutral column and its contradiction column is zero.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..._shared.errors import install_hint
from ..._shared.weakhooks import reinit_after_fork
from ._minilm import LoadedAgainWhenUnpickled, build_tokenizer

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

ONNX_HINT = (
    f"NLIJudge runs an ONNX model with numpy, onnxruntime and tokenizers: {install_hint('nli')}"
)
TRANSFORMERS_HINT = (
    "NLIJudge runs a model without an ONNX file (or a hub id) with transformers on PyTorch: "
    f"{install_hint('nli-transformers')}"
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


def class_names(id2label: Mapping[Any, str] | None) -> tuple[str, ...]:
    """A model's classes in output order, from its config's ``id2label``; ``None`` (a bare
    model file in the training format) is ``LABELS``."""
    if id2label is None:
        return LABELS
    return tuple(str(id2label[k]) for k in sorted(id2label, key=int))


def label_columns(id2label: Mapping[Any, str] | None) -> list[int]:
    """For each of a model's outputs (``id2label`` of its config, keys output indices), the
    ``LABELS`` column it adds to; ``None`` (a bare model file) is ``LABELS`` order. Raises
    ``ValueError`` for a class name it cannot place (``LABEL_0`` and the like say nothing) or a
    model with no entailment class or more than one."""
    names = class_names(id2label)
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
        raise ValueError(f"the model has {problem}: {list(names)}")
    return columns


def _onnx_in(folder: Path) -> Path | None:
    """The ONNX graph of a cross-encoder folder, or ``None`` when it has none."""
    for name in ONNX_NAMES:
        if (folder / name).is_file():
            return folder / name
    found = sorted(folder.glob("*.onnx")) + sorted(folder.glob("onnx/*.onnx"))
    if len(found) > 1:
        raise FileNotFoundError(f"several ONNX files in {folder}, none named as expected: {found}")
    return found[0] if found else None


def runtime_of(model: str | Path) -> str:
    """Which runtime reads ``model``: ``"onnx"`` (an ONNX file, or a folder with one) or
    ``"transformers"`` (a folder with a ``config.json`` and no ONNX file, or a hub id: a name
    that is no path here, such as ``cross-encoder/nli-deberta-v3-base``).

    Raises:
        FileNotFoundError: a folder with neither, or a missing file that cannot be a hub id.
    """
    path = Path(model)
    if path.is_file():
        return "onnx"
    if path.is_dir():
        if _onnx_in(path) is not None:
            return "onnx"
        if (path / "config.json").is_file():
            return "transformers"
        raise FileNotFoundError(
            f"no model in {path}: neither an ONNX file ({', '.join(ONNX_NAMES)}) nor a "
            "config.json with weights for transformers"
        )
    if _is_hub_id(str(model)):
        return "transformers"
    raise FileNotFoundError(f"no NLI model at {model} (neither a file, a folder nor a hub id)")


_HUB_ID = re.compile(r"(?!\.)(?!.*\.\.)[\w.-]+(?:/[\w.-]+)?")
"""The hub's form: "name" or "owner/name" of letters, digits and ``-_.``; no path syntax (a
leading dot, ``..``, a third part)."""


def _is_hub_id(name: str) -> bool:
    return _HUB_ID.fullmatch(name) is not None and not name.endswith(".onnx")


def _find_files(path: Path) -> tuple[Path, Path | None, Path | None]:
    """(ONNX graph, config.json or None, tokenizer.json or None) of a model file or folder."""
    if path.is_dir():
        found = _onnx_in(path)
        if found is None:
            raise FileNotFoundError(f"no ONNX file in {path} (looked for {', '.join(ONNX_NAMES)})")
        onnx_file, folder = found, path
    else:
        onnx_file, folder = path, path.parent
    config, tokenizer = folder / "config.json", folder / "tokenizer.json"
    return (
        onnx_file,
        config if config.is_file() else None,
        tokenizer if tokenizer.is_file() and path.is_dir() else None,
    )


def _softmax_columns(xp: Any, logits: Any, columns: Sequence[int]) -> Any:
    """Class probabilities of ``logits`` (rows, outputs), summed into ``LABELS`` columns."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = xp.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    mapped = xp.zeros((len(logits), len(LABELS)), dtype=xp.float32)
    for output, column in enumerate(columns):
        mapped[:, column] += p[:, output]
    return mapped


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


_RUNTIME_MODULES = {
    "onnx": ("numpy", "onnxruntime", "tokenizers"),
    "transformers": ("numpy", "torch", "transformers"),
}


def require(runtime: str = "onnx") -> tuple[Any, ...]:
    """The modules ``runtime`` needs (see :func:`runtime_of`), imported; ``ImportError`` with
    the line that installs them when one is missing."""
    try:
        return tuple(importlib.import_module(name) for name in _RUNTIME_MODULES[runtime])
    except ImportError as exc:
        raise ImportError(TRANSFORMERS_HINT if runtime == "transformers" else ONNX_HINT) from exc


class NLIEncoder(LoadedAgainWhenUnpickled):
    """Runs an ONNX cross-encoder on (premise, hypothesis) pairs.

    ``model_path`` is an ONNX file or a cross-encoder folder (the module doc says which files
    it reads); ``sha256`` checks the ONNX file. Thread-safe (onnxruntime sessions are).
    Picklable: the session is rebuilt in the process that unpickles it, from the same files,
    the ONNX one's checksum still matching.
    """

    _ARGS = ("model_path", "threads", "sha256")

    def __init__(self, model_path: str | Path, threads: int = 1, sha256: str | None = None):
        self.model_path = Path(model_path)
        self.threads = threads
        self.sha256 = sha256
        self._setup()

    def _setup(self) -> None:
        np, ort, tokenizers = require()
        self._np = np
        self.onnx_file, config, tokenizer_file = _find_files(self.model_path)
        id2label = None
        if config is not None:
            id2label = json.loads(config.read_text("utf-8")).get("id2label")
        self.labels = class_names(id2label)
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
        # A folder's own tokenizer encodes the pairs (its pair template adds the special tokens
        # and segments; a second copy, never cut, counts pieces); without one, the bundled
        # MiniLM vocabulary in the training format.
        self._own: Any = None
        self._pad = 0
        if tokenizer_file is None:
            self._tokenizer, self._cls, self._sep = build_tokenizer(tokenizers)
            return
        self._own = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self._own.no_padding()
        self._own.enable_truncation(MAX_LENGTH, strategy="longest_first")
        self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        for name in ("[PAD]", "<pad>"):
            if (pad := self._own.token_to_id(name)) is not None:
                self._pad = pad
                break

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        if self._own is None:
            return encode_pairs(self._tokenizer, self._cls, self._sep, pairs)
        return [(e.ids, e.type_ids) for e in self._own.encode_batch(list(pairs))]

    def pieces(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text (to choose a premise that fits)."""
        encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encoded]

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
            out[rows] = _softmax_columns(xp, logits[0], self._columns)
        result: NDArray[np.float32] = out
        return result


class TransformersEncoder(LoadedAgainWhenUnpickled):
    """Runs a sequence-classification cross-encoder with ``transformers`` on PyTorch (CPU).

    ``source`` is a folder that ``save_pretrained`` wrote or a hub id; ``revision`` pins a hub
    model's commit, branch or tag. The model's classes come from its config's ``id2label``, as
    for :class:`NLIEncoder`. Picklable: the model is loaded again from ``source`` in the process
    that unpickles it. Threads: PyTorch's own setting (``torch.set_num_threads``), which is the
    application's, as it holds for the whole process.
    """

    _ARGS = ("source", "revision")

    def __init__(self, source: str | Path, revision: str | None = None) -> None:
        self.source = str(source)
        self.revision = revision
        self._setup()
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    def _setup(self) -> None:
        np, torch, transformers = require("transformers")
        self._np, self._torch = np, torch
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(
            self.source, revision=self.revision
        )
        self._model = transformers.AutoModelForSequenceClassification.from_pretrained(
            self.source, revision=self.revision
        ).eval()
        id2label = self._model.config.id2label
        self.labels = class_names(id2label)
        self._columns = label_columns(id2label)
        limit = getattr(self._tokenizer, "model_max_length", MAX_LENGTH)
        self._max_length = min(MAX_LENGTH, limit) if isinstance(limit, int) else MAX_LENGTH
        # A fast tokenizer called with padding or truncation changes its own settings, and
        # raises "Already borrowed" when two threads do so at once.
        self._lock = threading.Lock()

    def pieces(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, in the model's own tokenizer."""
        with self._lock:
            encoded = self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]:
        """``(len(pairs), 3)`` class probabilities in ``LABELS`` order."""
        xp, torch = self._np, self._torch
        out = xp.zeros((len(pairs), len(LABELS)), dtype=xp.float32)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        for b in range(0, len(order), BATCH):
            rows = order[b : b + BATCH]
            with self._lock:
                batch = self._tokenizer(
                    [pairs[i][0] for i in rows],
                    [pairs[i][1] for i in rows],
                    padding=True,
                    truncation="longest_first",
                    max_length=self._max_length,
                    return_tensors="pt",
                )
            with torch.inference_mode():
                logits = self._model(**batch).logits.float().numpy()
            out[rows] = _softmax_columns(xp, logits, self._columns)
        result: NDArray[np.float32] = out
        return result


class PairClassifier(Protocol):
    """What :class:`~groundwatch.NLIJudge` needs of a model: its classes, how long a text is in
    its word pieces, and class probabilities of (premise, hypothesis) pairs in ``LABELS``
    columns."""

    labels: tuple[str, ...]

    def pieces(self, texts: Sequence[str]) -> list[int]: ...

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float32]: ...
