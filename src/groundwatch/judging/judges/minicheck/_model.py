"""A MiniCheck model on PyTorch or onnxruntime: texts in, probabilities of "supported" out.

Both runtimes encode with the checkpoint's own ``tokenizer.json`` read by ``tokenizers``: what
``AutoTokenizer(use_fast=True)``, the authors' call, encodes with on transformers 4.x, which
they used. transformers 5 rebuilds some tokenizers from their SentencePiece model instead
(Flan-T5's splits text after ``</s>`` differently), so the file is read directly; only a
checkpoint without one gets transformers' own conversion. The tokenizer is set up once as the
authors' call sets it (special tokens added, cut at the layout's ``max_length`` from the right,
no padding: batches are padded here with the model's pad id and masked) and never changed
afterwards, so threads can share it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._detectors import onnx_file, onnx_session, require
from ._layout import SUPPORTED, T5_LABEL_TOKENS, Layout, layout_of

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

NAME = "MiniCheckJudge"
DEFAULT_BATCH = 16
"""(chunk, claim) texts per model call: the authors' default batch size."""


class Texts:
    """How texts become model input, in the tokenizer the model was trained with."""

    def __init__(self, tokenizer: Any, layout: Layout, eos: str, pad_id: int, max_length: int):
        self.layout = layout
        self.eos = eos
        self.pad_id = pad_id
        self.max_length = max_length
        # Two copies: one counts a sentence's pieces without special tokens, the other encodes
        # model input; neither is reconfigured after this.
        self._count = type(tokenizer).from_str(tokenizer.to_str())
        self._count.no_padding()
        self._count.no_truncation()
        self._encode = type(tokenizer).from_str(tokenizer.to_str())
        self._encode.no_padding()
        self._encode.enable_truncation(max_length, strategy="longest_first", direction="right")

    def pieces(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text, without special tokens, at most ``max_length`` (the authors
        count a sentence with the tokenizer cut at the model's length)."""
        encoded = self._count.encode_batch(list(texts), add_special_tokens=False)
        return [min(len(e.ids), self.max_length) for e in encoded]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each model text's ids, special tokens added, cut at ``max_length``."""
        return [list(e.ids) for e in self._encode.encode_batch(list(texts))]


def tokenizer_file(source: str, revision: str | None = None) -> Path | None:
    """The checkpoint's ``tokenizer.json``: in its folder, or a hub model's from the hub cache
    (downloaded once where the environment allows); ``None`` where it has none."""
    folder = Path(source)
    if folder.is_dir():
        path = folder / "tokenizer.json"
        return path if path.is_file() else None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(source, "tokenizer.json", revision=revision))
    except Exception:  # none published, or offline and not cached: transformers' conversion
        return None


def published_tokenizer(
    source: str, revision: str | None, layout: Layout, transformers: Any
) -> Path | None:
    """:func:`tokenizer_file`, refusing a Flan-T5 checkpoint without one on transformers 5,
    whose conversion of its SentencePiece model splits text differently from the 4.x one the
    authors used (the scores would differ silently)."""
    found = tokenizer_file(source, revision)
    if found is None and layout.seq2seq and int(transformers.__version__.split(".")[0]) >= 5:
        raise ValueError(
            f"{source} has no tokenizer.json, and transformers {transformers.__version__} builds "
            "Flan-T5's tokenizer differently from the transformers 4.x MiniCheck's authors "
            "used: save one with transformers 4.x (AutoTokenizer.from_pretrained(...)"
            ".save_pretrained(the checkpoint's folder)) or run on transformers 4.x"
        )
    return found


def _softmax_supported(np: Any, logits: Any) -> list[float]:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return [float(p) for p in z[:, SUPPORTED] / z.sum(axis=1)]


class Model:
    """What both runtimes share: batching (similar lengths together, padded, masked)."""

    layout: Layout
    texts: Texts
    _np: Any

    def _logits(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> Any:
        """``(rows, 2)`` logits, unsupported then supported."""
        raise NotImplementedError

    def supported(self, texts: Sequence[str], batch: int = DEFAULT_BATCH) -> list[float]:
        """The probability of "supported" for each model text (a chunk and a claim)."""
        np = self._np
        encoded = self.texts.encode(texts)
        out = [0.0] * len(encoded)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        for b in range(0, len(order), batch):
            rows = order[b : b + batch]
            width = max(len(encoded[i]) for i in rows)
            ids = np.full((len(rows), width), self.texts.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : len(encoded[i])] = encoded[i]
                mask[r, : len(encoded[i])] = 1
            for i, p in zip(rows, _softmax_supported(np, self._logits(ids, mask)), strict=True):
                out[i] = p
        return out


class TorchModel(Model):
    """A checkpoint as published (or a hub id) through ``transformers`` on PyTorch (CPU)."""

    def __init__(
        self, source: str, revision: str | None = None, max_length: int | None = None
    ) -> None:
        np, torch, transformers = require("torch", NAME)
        self._np, self._torch = np, torch
        config = transformers.AutoConfig.from_pretrained(source, revision=revision)
        self.layout = layout_of(config.to_dict())
        published = published_tokenizer(source, revision, self.layout, transformers)
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(
            source, revision=revision, use_fast=True
        )
        backend = hf_tokenizer.backend_tokenizer
        self.texts = Texts(
            type(backend).from_file(str(published)) if published else backend,
            self.layout,
            eos=str(hf_tokenizer.eos_token),
            pad_id=int(hf_tokenizer.pad_token_id),
            max_length=max_length or self.layout.max_length,
        )
        if self.layout.seq2seq and transformers.__version__.startswith("5.0."):
            # transformers 5.0 reads the Flan-T5 checkpoint into a model whose scores differ
            # from the authors' (0.27 on the tiny test checkpoint; 4.40-4.57 and 5.1 on agree),
            # so the extra excludes it and a 5.0 installed by hand is refused, not trusted.
            raise ImportError(
                f"MiniCheck's Flan-T5 checkpoint scores wrongly on transformers "
                f"{transformers.__version__}: pip install 'transformers>=5.1' (or 4.x)"
            )
        auto = (
            transformers.AutoModelForSeq2SeqLM
            if self.layout.seq2seq
            else transformers.AutoModelForSequenceClassification
        )
        self._model = auto.from_pretrained(source, revision=revision).eval()
        self._labels = torch.tensor(T5_LABEL_TOKENS)

    def _logits(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> Any:
        torch = self._torch
        x, m = torch.from_numpy(ids), torch.from_numpy(mask)
        with torch.inference_mode():
            if self.layout.seq2seq:
                start = torch.zeros((len(ids), 1), dtype=torch.long)
                out = self._model(input_ids=x, attention_mask=m, decoder_input_ids=start)
                return out.logits[:, 0][:, self._labels].float().numpy()
            return self._model(input_ids=x, attention_mask=m).logits.float().numpy()


def _special(folder: Path, name: str) -> str | None:
    """A special token's text from the tokenizer's saved settings."""
    for file in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / file
        if path.is_file():
            value = json.loads(path.read_text("utf-8")).get(name)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                return value
    return None


class OnnxModel(Model):
    """A folder that :func:`~.export_onnx` wrote, on onnxruntime with ``tokenizers``."""

    def __init__(self, folder: str, threads: int = 1, max_length: int | None = None) -> None:
        np, _, tokenizers = require("onnx", NAME)
        self._np = np
        path = onnx_file(folder)
        if path is None:
            raise FileNotFoundError(f"no ONNX export in {folder}")
        root = Path(folder)
        config = json.loads((root / "config.json").read_text("utf-8"))
        self.layout = layout_of(config)
        tokenizer = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        eos = _special(root, "eos_token")
        if eos is None:
            raise ValueError(f"{folder}: tokenizer_config.json names no eos_token")
        self.texts = Texts(
            tokenizer,
            self.layout,
            eos=eos,
            pad_id=int(config.get("pad_token_id", 0)),
            max_length=max_length or self.layout.max_length,
        )
        self._session = onnx_session(path, threads)

    def _logits(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> Any:
        (logits,) = self._session.run(["logits"], {"input_ids": ids, "attention_mask": mask})
        return logits
