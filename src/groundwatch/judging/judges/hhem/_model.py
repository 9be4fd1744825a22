"""HHEM-2.1-Open without its remote code: the checkpoint's files read, the model built from
them, and the two runtimes that score (premise, hypothesis) pairs.

What the authors' ``HHEMv2ForSequenceClassification`` is, and what is built here from the same
files (``transformers`` classes only, no ``trust_remote_code``):

* its config (``model_type`` ``HHEMv2``) names the foundation model (``foundation``, default
  ``google/flan-t5-base``) and the prompt (``prompt``, default :data:`PROMPT`); the published
  ``config.json`` names neither, so the defaults apply, and either is read when present;
* the network is ``T5ForTokenClassification`` built from the foundation's config (two labels),
  with the checkpoint's weights under ``t5.`` (``t5.transformer.shared.weight``,
  ``t5.transformer.encoder.block...``, ``t5.classifier...``). The published file leaves out
  ``t5.transformer.encoder.embed_tokens.weight``, which is ``shared`` (tied under transformers
  4.x, where it was saved): it is filled from ``shared`` here, which is what transformers 5
  gets wrong when it loads the remote code (the embedding is left random);
* ``predict(pairs)``: each pair formatted into the prompt (``text1`` the premise, ``text2`` the
  hypothesis), tokenised by the foundation's tokenizer (its ``</s>`` appended, no truncation),
  padded; the classifier's logits at the first position (the prompt's ``<pad>``), softmax, and
  the probability of class 1, "consistent".

The ONNX export (:func:`export_onnx`) holds the same network from the input ids to those two
logits, the foundation's tokenizer as ``tokenizer.json`` (the tokenizer transformers built, so
both runtimes encode alike) and the HHEM config with its prompt and foundation written out.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._detectors import onnx_file, onnx_session, quantize_int8, require

FOUNDATION = "google/flan-t5-base"
"""The authors' default foundation model (their config class's ``foundation``)."""

PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\n"
    "Premise: {text1}\n\nHypothesis: {text2}"
)
"""The authors' default prompt (their config class's ``prompt``): ``text1`` the premise,
``text2`` the hypothesis."""

CONSISTENT = 1
"""The class whose probability ``predict`` returns: consistent (0 is hallucinated)."""

MODEL_TYPE = "HHEMv2"
BATCH = 8
"""Pairs per forward pass (sorted by length, so that padding stays small)."""
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _file(model: str, name: str, revision: str | None) -> Path | None:
    """``name`` in the folder ``model``, or from the hub id ``model`` at ``revision`` (the
    cache first; a download only where the environment allows); ``None`` when the repository
    has no such file.

    Raises:
        OSError: a hub file that is neither cached nor downloadable here (the message says how
            to fix it).
    """
    folder = Path(model)
    if folder.is_dir():
        return folder / name if (folder / name).is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import (  # type: ignore[attr-defined]  # both versions have them here
        EntryNotFoundError,
        LocalEntryNotFoundError,
    )

    try:
        return Path(hf_hub_download(model, name, revision=revision))
    except LocalEntryNotFoundError as exc:
        raise OSError(
            f"{model}: {name} is not in the Hugging Face cache and cannot be downloaded here "
            "(HF_HUB_OFFLINE, or no network): download it once where there is network, or pass "
            "the model's folder"
        ) from exc
    except EntryNotFoundError:
        return None


def hhem_config(model: str, revision: str | None = None) -> dict[str, Any]:
    """The checkpoint's ``config.json``, checked to be HHEM-2.1's.

    Raises:
        ValueError: no config, or one of another model type.
    """
    found = _file(model, "config.json", revision)
    if found is None:
        raise ValueError(f"{model} has no config.json: not an HHEM-2.1-Open checkpoint")
    config: dict[str, Any] = json.loads(found.read_text("utf-8"))
    if config.get("model_type") != MODEL_TYPE:
        raise ValueError(
            f"{model} is a {config.get('model_type')!r} model, not HHEM-2.1-Open "
            f"(model_type {MODEL_TYPE!r}); for an entailment cross-encoder use NLIJudge"
        )
    return config


def _state_dict(torch: Any, model: str, revision: str | None) -> dict[str, Any]:
    """The classifier's weights, the ``t5.`` prefix taken off, ``embed_tokens`` filled."""
    missing: OSError | None = None
    for name in WEIGHT_FILES:
        try:
            found = _file(model, name, revision)
        except OSError as exc:  # not cached: the other file may be
            missing = missing or exc
            continue
        if found is None:
            continue
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            raw = load_file(str(found))
        else:
            raw = torch.load(str(found), map_location="cpu", weights_only=True)
        break
    else:
        if missing is not None:
            raise missing
        raise ValueError(f"{model} has no weights ({' or '.join(WEIGHT_FILES)})")
    outside = sorted(k for k in raw if not k.startswith("t5."))
    if outside:
        raise ValueError(f"{model}: weights outside the t5 classifier: {outside[:3]}")
    state = {k.removeprefix("t5."): v for k, v in raw.items()}
    state.setdefault("transformer.encoder.embed_tokens.weight", state["transformer.shared.weight"])
    return state


class _FirstLogits:
    """Builds the module that maps (input ids, attention mask) to the two logits at the first
    position: the forward pass ``predict`` reads, and what the ONNX export holds."""

    @staticmethod
    def make(torch: Any, net: Any) -> Any:
        class FirstLogits(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                encoder = self.net.transformer
                hidden = encoder(input_ids=input_ids, attention_mask=attention_mask)
                # T5ForTokenClassification's dropout is the identity in eval mode.
                return self.net.classifier(hidden.last_hidden_state[:, 0, :])

        return FirstLogits().eval()


class TorchHHEM:
    """HHEM-2.1-Open on PyTorch through ``transformers``, built from the checkpoint's files.

    ``model`` is the checkpoint's folder or hub id (``revision`` pins a hub id); ``tokenizer``
    the foundation's folder (tokenizer files and its ``config.json``), else the foundation the
    config names (or the authors' default, ``google/flan-t5-base``). Thread-safe.
    """

    def __init__(
        self, model: str, revision: str | None = None, tokenizer: str | Path | None = None
    ) -> None:
        np, torch, transformers = require("torch", "HHEMJudge")
        self._np, self._torch = np, torch
        self.config = hhem_config(model, revision)
        self.prompt: str = self.config.get("prompt") or PROMPT
        self.foundation = str(tokenizer or self.config.get("foundation") or FOUNDATION)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.foundation)
        t5_config = transformers.AutoConfig.from_pretrained(self.foundation)
        net = transformers.T5ForTokenClassification(t5_config)
        net.load_state_dict(_state_dict(torch, model, revision), strict=True)
        self.net = net.eval()
        self.forward = _FirstLogits.make(torch, self.net)
        # A fast tokenizer called with padding changes its own settings, and raises "Already
        # borrowed" when two threads do so at once.
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> dict[str, Any]:
        with self._lock:
            return dict(self.tokenizer(list(texts), return_tensors="pt", padding=True))

    def consistency(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The probability that each premise supports its hypothesis (class 1)."""
        torch = self._torch
        texts = [self.prompt.format(text1=p, text2=h) for p, h in pairs]
        out = [0.0] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for b in range(0, len(order), BATCH):
            rows = order[b : b + BATCH]
            batch = self.encode([texts[i] for i in rows])
            with torch.inference_mode():
                logits = self.forward(batch["input_ids"], batch["attention_mask"])
                probs = torch.softmax(logits.float(), dim=-1)[:, CONSISTENT]
            for i, p in zip(rows, probs.tolist(), strict=True):
                out[i] = float(p)
        return out


class OnnxHHEM:
    """HHEM-2.1-Open from an ONNX export (:func:`export_onnx`), run by onnxruntime with the
    foundation's tokenizer in ``tokenizers``: no PyTorch. Thread-safe."""

    def __init__(self, folder: str, threads: int = 1) -> None:
        np, _ort, tokenizers = require("onnx", "HHEMJudge")
        self._np = np
        path = Path(folder)
        graph = onnx_file(path)
        if graph is None:
            raise ValueError(f"{folder} holds no ONNX export of HHEM")
        self.config = hhem_config(folder)
        self.prompt: str = self.config.get("prompt") or PROMPT
        self.tokenizer = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.pad = int(self.config.get("pad_token_id", 0))
        self.session = onnx_session(graph, threads)

    def consistency(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The probability that each premise supports its hypothesis (class 1)."""
        np = self._np
        texts = [self.prompt.format(text1=p, text2=h) for p, h in pairs]
        encoded = [e.ids for e in self.tokenizer.encode_batch(texts)]
        out = [0.0] * len(texts)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        for b in range(0, len(order), BATCH):
            rows = order[b : b + BATCH]
            width = max(len(encoded[i]) for i in rows)
            ids = np.full((len(rows), width), self.pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : len(encoded[i])] = encoded[i]
                mask[r, : len(encoded[i])] = 1
            (logits,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
            z = logits - logits.max(axis=1, keepdims=True)
            p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
            for r, i in enumerate(rows):
                out[i] = float(p[r, CONSISTENT])
        return out


def export_onnx(
    model: str | Path,
    out: str | Path,
    *,
    int8: bool = False,
    revision: str | None = None,
    tokenizer: str | Path | None = None,
) -> Path:
    """Write an ONNX export of the HHEM checkpoint ``model`` into the folder ``out``:
    ``model.onnx`` (``model.int8.onnx`` with ``int8``), ``tokenizer.json`` and ``config.json``
    (the checkpoint's, its prompt and foundation written out, and the pad id). Needs the
    ``detectors-torch`` extra; :class:`HHEMJudge` then reads ``out`` with onnxruntime."""
    hhem = TorchHHEM(str(model), revision=revision, tokenizer=tokenizer)
    torch = hhem._torch
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    sample = hhem.encode([hhem.prompt.format(text1="a b", text2="c"), hhem.prompt])
    with tempfile.TemporaryDirectory() as scratch:
        graph = Path(scratch) / "model.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notes
            torch.onnx.export(
                hhem.forward,
                (sample["input_ids"], sample["attention_mask"]),
                str(graph),
                input_names=["input_ids", "attention_mask"],
                output_names=["logits"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "logits": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        for name in ("model.onnx", "model.int8.onnx"):
            (target / name).unlink(missing_ok=True)
        if int8:
            quantize_int8(graph, target / "model.int8.onnx")
        else:
            shutil.copyfile(graph, target / "model.onnx")
    hhem.tokenizer.backend_tokenizer.save(str(target / "tokenizer.json"))
    config = {
        **hhem.config,
        "prompt": hhem.prompt,
        "foundation": hhem.config.get("foundation") or FOUNDATION,
        "pad_token_id": int(hhem.tokenizer.pad_token_id or 0),
        "exported_from": {"model": str(model), "revision": revision},
    }
    (target / "config.json").write_text(json.dumps(config, indent=2), "utf-8")
    return target
