"""Cross-encoder folders as exported NLI models are laid out, with a tiny randomly initialised
model: ``config.json`` with ``id2label``, an ONNX graph over ``input_ids`` / ``attention_mask``
/ ``token_type_ids`` -> ``logits`` (embeddings, masked mean pooling, one hidden layer, a
classifier), optionally ``tokenizer.json``. The same model computes in numpy, so a test can
check what a runtime gives against it. Needs numpy, tokenizers and onnx (requirements-dev.txt;
callers guard with ``extras.require_nli_runtime``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HIDDEN = 8
WORDS = (
    "acme corporation was started in 1998 by the siblings ana and luis ortega a garage seville "
    "brother sister founded today business employs people . , olives"
).split()


class TinyCrossEncoder:
    """Random weights of a small classifier over word pieces, as an ONNX graph and in numpy."""

    def __init__(self, vocab: int, labels: int, seed: int) -> None:
        import numpy as np

        rng = np.random.default_rng(seed)
        self.words = rng.normal(0, 1, (vocab, HIDDEN)).astype(np.float32)
        self.types = rng.normal(0, 1, (2, HIDDEN)).astype(np.float32)
        self.w1 = rng.normal(0, 1, (HIDDEN, HIDDEN)).astype(np.float32)
        self.w2 = rng.normal(0, 2, (HIDDEN, labels)).astype(np.float32)
        self.b2 = rng.normal(0, 1, (labels,)).astype(np.float32)

    def logits(self, ids: list[int], types: list[int]) -> Any:
        import numpy as np

        x = self.words[ids] + self.types[types]
        return np.tanh(x.mean(axis=0) @ self.w1) @ self.w2 + self.b2

    def save(self, path: Path) -> None:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        inputs = [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ]
        nodes = [
            helper.make_node("Gather", ["words", "input_ids"], ["x_words"]),
            helper.make_node("Gather", ["types", "token_type_ids"], ["x_types"]),
            helper.make_node("Add", ["x_words", "x_types"], ["x"]),
            helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["mask_f", "last"], ["mask3"]),
            helper.make_node("Mul", ["x", "mask3"], ["masked"]),
            helper.make_node("ReduceSum", ["masked", "one"], ["summed"], keepdims=0),
            helper.make_node("ReduceSum", ["mask_f", "one"], ["count"], keepdims=1),
            helper.make_node("Div", ["summed", "count"], ["pooled"]),
            helper.make_node("MatMul", ["pooled", "w1"], ["h"]),
            helper.make_node("Tanh", ["h"], ["ht"]),
            helper.make_node("MatMul", ["ht", "w2"], ["z"]),
            helper.make_node("Add", ["z", "b2"], ["logits"]),
        ]
        weights = {
            "words": self.words,
            "types": self.types,
            "w1": self.w1,
            "w2": self.w2,
            "b2": self.b2,
            "one": np.array([1], dtype=np.int64),
            "last": np.array([2], dtype=np.int64),
        }
        graph = helper.make_graph(
            nodes,
            "tiny_cross_encoder",
            inputs,
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", None])],
            initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, str(path))


def tokenizer_file(path: Path) -> Any:
    """A small WordPiece tokenizer with BERT's pair template, saved as ``tokenizer.json``."""
    import tokenizers
    from tokenizers import models, normalizers, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.save(str(path))
    return tok


def cross_encoder_folder(
    root: Path, id2label: dict[int, str], *, tokenizer: bool, onnx_name: str = "model.onnx"
) -> tuple[Path, TinyCrossEncoder, Any]:
    """A cross-encoder folder; returns it, its model and the tokenizer it reads."""
    root.mkdir(parents=True)
    if tokenizer:
        tok = tokenizer_file(root / "tokenizer.json")
        vocab = tok.get_vocab_size()
    else:
        import tokenizers

        from groundwatch.judging.judges._minilm import build_tokenizer

        tok = None
        vocab = build_tokenizer(tokenizers)[0].get_vocab_size()
    model = TinyCrossEncoder(vocab, len(id2label), seed=len(id2label) + 7 * tokenizer)
    (root / onnx_name).parent.mkdir(parents=True, exist_ok=True)
    model.save(root / onnx_name)
    config = {
        "architectures": ["BertForSequenceClassification"],
        "model_type": "bert",
        "id2label": {str(k): v for k, v in id2label.items()},
        "label2id": {v: k for k, v in id2label.items()},
    }
    (root / "config.json").write_text(json.dumps(config))
    return root, model, tok
