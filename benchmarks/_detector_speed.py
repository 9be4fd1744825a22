"""``judge_speed.py --detectors``: the published detectors at their real sizes beside the local
judge, on one CPU core (``judge_speed.py``'s docstring says what is measured and how).

What each model reads for one answer (a 1,500-character context, a three-claim answer), in its
judge's layout, with token counts from the bundled WordPiece vocabulary (English text splits
into about as many pieces in the detectors' own vocabularies) plus each layout's special tokens:

* HHEM-2.1-Open: one row, its prompt over (premise = the context, hypothesis = the answer); the
  T5 encoder of flan-t5-base with a two-way head (``T5ForTokenClassification``, as the authors'
  ``HHEMv2ForSequenceClassification`` wraps it);
* MiniCheck: one row per claim, the context as one chunk, batched, in the authors' layout:
  RoBERTa-large and DeBERTa-v3-large sequence classifiers read ``chunk </s> claim`` with their
  tokenizer's own start and end; Flan-T5-large reads ``predict: chunk</s>claim</s>`` and
  decodes one step;
* LettuceDetect: one row, its prompt (question, numbered passage) paired with the answer; the
  ModernBERT base and large token classifiers.

Each model runs in a subprocess (``--one NAME RUNTIME``); ONNX exports (``--export NAME``, also
a subprocess, so PyTorch never loads in the measuring one) are cached in ``--cache``.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CONTEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the "
    "tower from 1887 to 1889. Locally nicknamed the Iron Lady, it was constructed as the "
    "centrepiece of the 1889 World's Fair, and to crown the centennial anniversary of the "
    "French Revolution. Although initially criticised by some of France's leading artists "
    "and intellectuals for its design, it has since become a global cultural icon of France "
    "and one of the most recognisable structures in the world. The tower received 5,889,000 "
    "visitors in 2022. The Eiffel Tower is the most visited monument with an entrance fee in "
    "the world. The tower is 330 metres tall, about the same height as an 81-storey building, "
    "and the tallest structure in Paris. Its base is square, measuring 125 metres on each "
    "side. During its construction, the Eiffel Tower surpassed the Washington Monument to "
    "become the tallest human-made structure in the world, a title it held for 41 years until "
    "the Chrysler Building in New York City was finished in 1930. It was the first structure "
    "in the world to surpass both the 200-metre and 300-metre mark in height. Due to the "
    "addition of a broadcasting aerial at the top of the tower in 1957, it is now taller than "
    "the Chrysler Building by 5.2 metres. Excluding transmitters, the Eiffel Tower is the "
    "second tallest free-standing structure in France after the Millau Viaduct. The tower "
    "has three levels for visitors, with restaurants on the first and second levels."
)[:1500]
QUESTION = "How tall is the Eiffel Tower and when was it built?"
CLAIMS = (
    "The Eiffel Tower is 330 metres tall.",
    "It was built from 1887 to 1889 for the World's Fair.",
    "It was the tallest structure in the world until 1925.",
)
ANSWER = " ".join(CLAIMS)


def _pieces(text: str) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    import tokenizers

    from groundwatch.judging.judges._minilm import build_tokenizer

    tok, _, _ = build_tokenizer(tokenizers)
    return len(tok.encode(text, add_special_tokens=False).ids)


def _lettuce_prompt() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from groundwatch.judging.judges.lettucedetect._prompts import format_prompt

    return format_prompt([CONTEXT], QUESTION, "en")


HHEM_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {}\n\nHypothesis: {}"
)


@dataclass(frozen=True)
class Detector:
    """One detector model as its judge runs it."""

    judge: str
    base: str
    rows: Callable[[], list[int]]
    """Token count of each row the model reads for the answer."""
    build: Callable[[], Any]
    """The PyTorch model with random weights of the real configuration."""
    decoder: bool = False
    """An encoder-decoder read for one decoding step."""


def _hhem() -> Any:
    from transformers import T5Config, T5ForTokenClassification

    config = T5Config(
        vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_heads=12,
        feed_forward_proj="gated-gelu", num_labels=2,
    )  # fmt: skip
    return T5ForTokenClassification(config)


def _roberta() -> Any:
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(
        vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1,
        pad_token_id=1, num_labels=2,
    )  # fmt: skip
    return RobertaForSequenceClassification(config)


def _deberta() -> Any:
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    config = DebertaV2Config(
        vocab_size=128100, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, max_position_embeddings=512, relative_attention=True,
        position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0,
        layer_norm_eps=1e-7, max_relative_positions=-1, num_labels=2,
    )  # fmt: skip
    return DebertaV2ForSequenceClassification(config)


def _flan_t5_large() -> Any:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24,
        num_decoder_layers=24, num_heads=16, feed_forward_proj="gated-gelu",
        tie_word_embeddings=False, decoder_start_token_id=0,
    )  # fmt: skip
    return T5ForConditionalGeneration(config)


def _modernbert(large: bool) -> Callable[[], Any]:
    def build() -> Any:
        from transformers import ModernBertConfig, ModernBertForTokenClassification

        sizes = (
            {"hidden_size": 1024, "intermediate_size": 2624, "num_hidden_layers": 28,
             "num_attention_heads": 16}
            if large
            else {"hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
                  "num_attention_heads": 12}
        )  # fmt: skip
        config = ModernBertConfig(
            vocab_size=50368, global_attn_every_n_layers=3, local_attention=128,
            classifier_pooling="mean", num_labels=2, **sizes,
        )  # fmt: skip
        return ModernBertForTokenClassification(config)

    return build


DETECTORS = {
    "hhem": Detector(
        "HHEM-2.1-Open",
        "flan-t5-base encoder",
        lambda: [_pieces(HHEM_PROMPT.format(CONTEXT, ANSWER)) + 1],
        _hhem,
    ),
    "minicheck-roberta": Detector(
        "MiniCheck",
        "RoBERTa-large",
        lambda: [_pieces(CONTEXT) + _pieces(c) + 3 for c in CLAIMS],
        _roberta,
    ),
    "minicheck-deberta": Detector(
        "MiniCheck",
        "DeBERTa-v3-large",
        lambda: [_pieces(CONTEXT) + _pieces(c) + 3 for c in CLAIMS],
        _deberta,
    ),
    "minicheck-flan-t5": Detector(
        "MiniCheck",
        "Flan-T5-large",
        lambda: [_pieces(f"predict: {CONTEXT}") + _pieces(c) + 2 for c in CLAIMS],
        _flan_t5_large,
        decoder=True,
    ),
    "lettucedetect-base": Detector(
        "LettuceDetect",
        "ModernBERT-base",
        lambda: [_pieces(_lettuce_prompt()) + _pieces(ANSWER) + 3],
        _modernbert(large=False),
    ),
    "lettucedetect-large": Detector(
        "LettuceDetect",
        "ModernBERT-large",
        lambda: [_pieces(_lettuce_prompt()) + _pieces(ANSWER) + 3],
        _modernbert(large=True),
    ),
}


def _wrapped(detector: Detector) -> Any:
    """The model as a module of (input_ids, attention_mask) -> logits (one decoding step for
    an encoder-decoder)."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            if detector.decoder:
                return self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    decoder_input_ids=torch.zeros_like(input_ids[:, :1]),
                ).logits
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

    return Logits(detector.build().eval())


def _batch(rows: list[int], vocab: int = 30000) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    width = max(rows)
    ids = rng.integers(5, vocab, size=(len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, n in enumerate(rows):
        mask[r, :n] = 1
    return ids, mask


def export(name: str, cache: Path, int8: bool = False) -> Path:
    """The ONNX export of ``name`` in ``cache`` (written when missing); with ``int8``, its
    weights quantised to int8 (onnxruntime's dynamic quantisation, as ``export-onnx --int8``)."""
    folder = cache / name
    graph = folder / "model.onnx"
    if int8:
        small = folder / "model.int8.onnx"
        if not small.is_file():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(export(name, cache)), str(folder / "partial.int8.onnx"),
                             weight_type=QuantType.QInt8)  # fmt: skip
            (folder / "partial.int8.onnx").rename(small)
        return small
    if graph.is_file():
        return graph
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = _wrapped(DETECTORS[name])
    ids, mask = _batch([32, 24])
    sizes = {0: "batch", 1: "sequence"}
    with torch.inference_mode():
        torch.onnx.export(
            model,
            (torch.from_numpy(ids), torch.from_numpy(mask)),
            str(folder / "partial.onnx"),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={"input_ids": sizes, "attention_mask": sizes, "logits": sizes},
            opset_version=17,
            dynamo=False,
        )
    (folder / "partial.onnx").rename(graph)
    return graph


def measure(name: str, runtime: str, repeat: int, cache: Path) -> dict[str, Any]:
    """Answers per second and peak memory of one model on one runtime, in this process."""
    if name == "local":
        sys.path.insert(0, str(ROOT / "src"))
        import groundwatch as gw

        judge = gw.LocalJudge()

        def run() -> None:
            gw.evaluate(ANSWER, [CONTEXT], QUESTION, judge=judge)

        rows: list[int] = []
    else:
        rows = DETECTORS[name].rows()
        ids, mask = _batch(rows)
        if runtime in ("onnx", "onnx-int8"):
            import onnxruntime as ort

            graph = "model.int8.onnx" if runtime == "onnx-int8" else "model.onnx"

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(
                str(cache / name / graph), options, providers=["CPUExecutionProvider"]
            )

            def run() -> None:
                session.run(["logits"], {"input_ids": ids, "attention_mask": mask})
        else:
            import torch

            torch.set_num_threads(1)
            torch.manual_seed(0)
            model = _wrapped(DETECTORS[name])
            t_ids, t_mask = torch.from_numpy(ids), torch.from_numpy(mask)

            def run() -> None:
                with torch.inference_mode():
                    model(t_ids, t_mask)

    run()  # warm-up: lazy initialisation, allocator
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "name": name,
        "runtime": runtime,
        "rows": rows,
        "seconds": statistics.median(times),
        "peak_mb": peak_kb / 1024,
    }


def _child(args: list[str]) -> dict[str, Any] | None:
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        print(f"  {' '.join(args)} failed: {done.stderr.strip()[-400:]}", flush=True)
        return None
    if not done.stdout.strip():
        return {}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compare(repeat: int, cache: Path, only: list[str] | None, int8: bool = False) -> int:
    """Measure every detector on both runtimes beside the local judge; print the table."""
    names = [n for n in DETECTORS if not only or n in only]
    local = _child(["--one", "local", "python", "--repeat", str(max(repeat, 20))])
    assert local, "the local judge did not run"
    print(
        f"one answer: {len(CONTEXT)}-character context, {len(CLAIMS)} claims; one thread; "
        f"median of {repeat} after a warm-up",
        flush=True,
    )
    header = (
        f"{'judge':<15}{'model':<22}{'runtime':<10}{'tokens/row':>18}{'answers/s':>11}"
        f"{'ms/answer':>11}{'peak MB':>9}{'x local':>9}{'onnx/pt':>9}"
    )
    print(header)
    print(
        f"{'local':<15}{'LocalJudge':<22}{'python':<10}{'':>18}{1 / local['seconds']:>11.1f}"
        f"{local['seconds'] * 1000:>11.2f}{local['peak_mb']:>9.0f}{1:>9.0f}{'':>9}",
        flush=True,
    )
    for name in names:
        d = DETECTORS[name]
        got: dict[str, dict[str, Any]] = {}
        for runtime in ("torch", "onnx", "onnx-int8") if int8 else ("torch", "onnx"):
            export_args = ["--export", name, "--cache", str(cache)]
            if runtime == "onnx-int8":
                export_args.append("--int8")
            if runtime != "torch" and _child(export_args) is None:
                continue
            result = _child(
                ["--one", name, runtime, "--repeat", str(repeat), "--cache", str(cache)]
            )
            if result is None:
                continue
            got[runtime] = result
            ratio = ""
            if runtime != "torch" and "torch" in got:
                ratio = f"{got['torch']['seconds'] / result['seconds']:.2f}"
            rows = "+".join(str(n) for n in result["rows"])
            print(
                f"{d.judge:<15}{d.base:<22}{runtime:<10}{rows:>18}{1 / result['seconds']:>11.2f}"
                f"{result['seconds'] * 1000:>11.0f}{result['peak_mb']:>9.0f}"
                f"{result['seconds'] / local['seconds']:>9.0f}{ratio:>9}",
                flush=True,
            )
    print(
        "x local: how many times longer than the local judge's whole evaluate; onnx/pt: "
        "PyTorch's time over onnxruntime's (above 1: ONNX faster); onnx-int8: the export's "
        "weights quantised to int8"
    )
    return 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    where = Path(argv[argv.index("--cache") + 1]) if "--cache" in argv else Path("/tmp")
    if argv[0] == "--export":
        export(argv[1], where, int8="--int8" in argv)
    else:
        repeats = int(argv[argv.index("--repeat") + 1])
        print(json.dumps(measure(argv[1], argv[2], repeats, where)))
