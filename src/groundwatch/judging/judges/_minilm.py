"""Contextual token vectors from all-MiniLM-L6-v2 (int8 ONNX), for meaning-aware alignment.

Optional: needs the ``semantic`` extra (``numpy``, ``onnxruntime``, ``tokenizers`` and
``groundwatch-minilm``, built in this repository by ``training/export_minilm.py``, which ships
the model as a 23 MB ONNX file, so nothing is downloaded at run time). The model's WordPiece
vocabulary (uncased BERT, Apache-2.0, as published with sentence-transformers/all-MiniLM-L6-v2)
is bundled as ``_minilm_vocab.txt.gz`` because the model package carries none.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..._shared.errors import install_hint
from ..._shared.weakhooks import reinit_after_fork

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

INSTALL_HINT = f"the semantic judge needs the semantic extra, {install_hint('semantic')}"

# The model file the judge was measured with; a different file is refused rather than trusted.
MODEL_SHA256 = "06fb2a204e20131917e970b052d4fd20aa6680da4dc34f6420babf18a1671ce0"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

# Window of word pieces per model call (plus [CLS] and [SEP]); longer texts are cut into
# overlapping windows so every piece is seen with some context on both sides.
WINDOW = 254
STRIDE = 200
BATCH = 16


@dataclass(frozen=True)
class TokenVectors:
    """Unit-length vectors of a text's word pieces, with their character offsets in the text."""

    vectors: NDArray[np.float32]
    offsets: list[tuple[int, int]]
    pieces: list[str]

    @property
    def nbytes(self) -> int:
        """Memory held, roughly: the vectors plus ~64 bytes per piece for offsets and text."""
        return int(self.vectors.nbytes) + 64 * len(self.offsets)


def _require() -> tuple[Any, Any, Any, Any]:
    try:
        import groundwatch_minilm
        import numpy
        import onnxruntime
        import tokenizers
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return numpy, onnxruntime, tokenizers, groundwatch_minilm


def _load_vocab() -> dict[str, int]:
    packed = resources.files(__package__).joinpath("_minilm_vocab.txt.gz").read_bytes()
    raw = gzip.decompress(packed)
    if hashlib.sha256(raw).hexdigest() != VOCAB_SHA256:
        raise RuntimeError("the bundled MiniLM vocabulary is damaged (checksum mismatch)")
    return {piece: i for i, piece in enumerate(raw.decode("utf-8").splitlines())}


def build_tokenizer(tokenizers: Any) -> tuple[Any, int, int]:
    """The WordPiece tokenizer of all-MiniLM-L6-v2 from the bundled vocabulary, with the ids
    of ``[CLS]`` and ``[SEP]`` (``tokenizers`` is the imported ``tokenizers`` package)."""
    vocab = _load_vocab()
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    tok.normalizer = tokenizers.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    return tok, vocab["[CLS]"], vocab["[SEP]"]


class LoadedAgainWhenUnpickled:
    """A model runtime that pickles as the arguments that load it (``_ARGS``, attribute names)
    and loads again (``_setup``) in the process that unpickles it: an onnxruntime session, a
    tokenizer or a PyTorch model does not travel to a worker process, the files it came from
    do."""

    _ARGS: tuple[str, ...] = ()

    def _setup(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._ARGS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._setup()


class MiniLMEncoder(LoadedAgainWhenUnpickled):
    """Runs the model on texts and returns one :class:`TokenVectors` per text.

    Thread-safe. Passage encodings are cached (least recently used first out, at most
    ``cache_bytes``), because retrieval hands the same popular chunks to many requests.
    Picklable: the ONNX session is rebuilt in the process that unpickles it.
    """

    _ARGS = ("threads", "cache_bytes")

    def __init__(self, threads: int = 1, cache_bytes: int = 32 << 20) -> None:
        self.threads = threads
        self.cache_bytes = cache_bytes
        self._setup()
        # A thread that held the cache lock does not exist in a forked child: a fresh lock.
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    def _setup(self) -> None:
        np, ort, tokenizers, model_pkg = _require()
        self._np = np
        path = model_pkg.model_path()
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != MODEL_SHA256:
            raise RuntimeError(f"unexpected MiniLM model file {path} (sha256 {digest[:12]}…)")
        options = ort.SessionOptions()
        # One thread by default: the judge runs beside the host's own work, not instead of it.
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._tokenizer, self._cls, self._sep = build_tokenizer(tokenizers)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, TokenVectors] = OrderedDict()
        self._cached_bytes = 0

    def encode(self, texts: list[str], *, cache: bool = False) -> list[TokenVectors]:
        """Token vectors of each text (all windows of a long text, concatenated)."""
        results: list[TokenVectors | None] = [None] * len(texts)
        todo: list[int] = []
        if cache:
            with self._lock:
                for i, text in enumerate(texts):
                    hit = self._cache.get(text)
                    if hit is not None:
                        self._cache.move_to_end(text)
                        results[i] = hit
                    else:
                        todo.append(i)
        else:
            todo = list(range(len(texts)))
        if todo:
            for i, tv in zip(todo, self._run([texts[i] for i in todo]), strict=True):
                results[i] = tv
                if cache:
                    self._remember(texts[i], tv)
        return [r for r in results if r is not None]

    def _remember(self, text: str, tv: TokenVectors) -> None:
        size = tv.nbytes
        if size > self.cache_bytes:
            return
        with self._lock:
            if text in self._cache:
                return
            self._cache[text] = tv
            self._cached_bytes += size
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= old.nbytes

    def _run(self, texts: list[str]) -> list[TokenVectors]:
        np = self._np
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        # (text index, first piece) of every window, so results can be put back together.
        windows: list[tuple[int, int, list[int]]] = []
        for t, enc in enumerate(encodings):
            ids = enc.ids
            if not ids:
                continue
            start = 0
            while True:
                windows.append((t, start, ids[start : start + WINDOW]))
                if start + WINDOW >= len(ids):
                    break
                start += STRIDE
        parts: list[list[Any]] = [[] for _ in texts]
        for b in range(0, len(windows), BATCH):
            batch = windows[b : b + BATCH]
            width = max(len(w[2]) for w in batch) + 2
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, (_, _, piece_ids) in enumerate(batch):
                n = len(piece_ids)
                ids[row, 0] = self._cls
                ids[row, 1 : n + 1] = piece_ids
                ids[row, n + 1] = self._sep
                mask[row, : n + 2] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, feed)[0]
            for row, (t, start, piece_ids) in enumerate(batch):
                vecs = hidden[row, 1 : len(piece_ids) + 1]
                # Pieces in the overlap of two windows keep the earlier window's vector.
                skip = 0 if start == 0 else WINDOW - STRIDE
                parts[t].append((start + skip, vecs[skip:]))
        out: list[TokenVectors] = []
        for t, enc in enumerate(encodings):
            if parts[t] and len(enc.ids):
                vecs = np.vstack([v for _, v in parts[t]]).astype(np.float32)
                norms = np.linalg.norm(vecs, axis=1, keepdims=True)
                vecs /= np.maximum(norms, 1e-9)
            else:
                vecs = np.zeros((0, 384), dtype=np.float32)
            out.append(TokenVectors(vecs, list(enc.offsets), list(enc.tokens)))
        return out
