"""The token classifier itself, on PyTorch or onnxruntime: token ids in, logits out.

Both runtimes read one window at a time, unpadded, as the authors' code does (an answer is
read in one window unless its passages overflow ``max_length``, so there is rarely anything to
batch: all of an answer's claims are read in that one pass).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._detectors import onnx_file, onnx_session, require
from ._layout import HALLUCINATED

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

NAME = "LettuceDetectJudge"

EUROBERT_HINT = (
    "LettuceDetect's EuroBERT models need transformers 5.3 or later, which has the EuroBERT "
    'architecture built in (pip install -U "transformers>=5.3"); groundwatch never runs a '
    "model repository's own code (trust_remote_code)"
)

MODERNBERT_HINT = (
    "LettuceDetect's English models (ModernBERT, TinyLettuce) need transformers 4.48 or later "
    '(pip install -U "transformers>=4.48")'
)


def check_labels(config: dict[str, Any], where: str) -> None:
    """A LettuceDetect model has two outputs per token; raises ``ValueError`` otherwise."""
    labels = config.get("id2label") or {}
    if len(labels) not in (0, 2) or config.get("num_labels", 2) != 2:
        raise ValueError(
            f"{where} is no LettuceDetect token classifier: it has {len(labels)} labels, not 2 "
            f"(supported, hallucinated = {HALLUCINATED})"
        )


class TorchClassifier:
    """A checkpoint as published (or a hub id) through ``transformers`` on PyTorch (CPU)."""

    def __init__(self, source: str, revision: str | None = None) -> None:
        _, torch, transformers = require("torch", NAME)
        self._torch = torch
        try:
            config = transformers.AutoConfig.from_pretrained(source, revision=revision)
        except ValueError as exc:  # an architecture this transformers lacks
            said = str(exc).lower()
            if "eurobert" in said or "trust_remote_code" in said:
                raise ValueError(f"{source}: {EUROBERT_HINT} ({exc})") from exc
            if "modernbert" in said:
                raise ValueError(f"{source}: {MODERNBERT_HINT} ({exc})") from exc
            raise
        check_labels(config.to_dict(), source)
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(source, revision=revision)
        # The fast tokenizer's own tokenizers.Tokenizer: what transformers encodes with.
        self.tokenizer: Any = hf_tokenizer.backend_tokenizer
        self._model = transformers.AutoModelForTokenClassification.from_pretrained(
            source, revision=revision
        ).eval()

    def logits(self, windows: Sequence[Sequence[int]]) -> list[NDArray[np.float32]]:
        """Each window's ``(tokens, 2)`` logits."""
        torch = self._torch
        out = []
        with torch.inference_mode():
            for ids in windows:
                x = torch.tensor([list(ids)], dtype=torch.long)
                logits = self._model(input_ids=x, attention_mask=torch.ones_like(x)).logits
                out.append(logits[0].float().numpy().copy())  # no tensor outlives the call
        return out


class OnnxClassifier:
    """A folder that :func:`~.export_onnx` wrote, on onnxruntime with ``tokenizers``."""

    def __init__(self, folder: str, threads: int = 1) -> None:
        np, _, tokenizers = require("onnx", NAME)
        self._np = np
        path = onnx_file(folder)
        if path is None:
            raise FileNotFoundError(f"no ONNX export in {folder}")
        config_file = Path(folder) / "config.json"
        check_labels(json.loads(config_file.read_text("utf-8")), folder)
        self.tokenizer: Any = tokenizers.Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self._session = onnx_session(path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def logits(self, windows: Sequence[Sequence[int]]) -> list[NDArray[np.float32]]:
        """Each window's ``(tokens, 2)`` logits."""
        np = self._np
        out = []
        for ids in windows:
            x = np.asarray([list(ids)], dtype=np.int64)
            feed = {"input_ids": x, "attention_mask": np.ones_like(x)}
            (logits,) = self._session.run(
                ["logits"], {k: v for k, v in feed.items() if k in self._inputs}
            )
            out.append(logits[0].astype(np.float32))
        return out
