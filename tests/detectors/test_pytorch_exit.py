"""A process with a PyTorch judge (HHEMJudge, NLIJudge on transformers) exits cleanly: no
``terminate called without an active exception`` (exit 134) after it has printed its result.

The judge runs on daemon threads; a model call still in flight on one when the interpreter
exits aborted the process (``groundwatch._shared.model_calls`` says
why and how the exit now waits for it). Each check runs a fresh interpreter several times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..extras import require_transformers_runtime
from .hhem_checkpoint import build

require_transformers_runtime()

RUNS = 4
# Big enough that a forward pass takes a while and runs PyTorch's own threads.
SIZES = {"d_model": 256, "d_kv": 32, "d_ff": 512, "num_heads": 8, "num_layers": 4}
CONTEXT = "The Eiffel Tower was built in 1889 and is 330 metres tall. " * 20

# Four daemon threads score without pause; the main thread ends as soon as one call returned,
# so the exit meets calls in flight (without the exit gate, every run of 8 aborted here).
IN_FLIGHT = """
import sys, threading
import groundwatch as gw
from groundwatch._shared.model_calls import InterpreterExiting

judge = gw.HHEMJudge(sys.argv[1])
pairs = [(sys.argv[2], "It is tall.")] * 8
scored = threading.Event()

def score() -> None:
    try:
        while True:
            judge.consistency(pairs)
            scored.set()
    except InterpreterExiting:
        pass

for _ in range(4):
    threading.Thread(target=score, daemon=True).start()
scored.wait()
print("done")
"""


NLI_IN_FLIGHT = """
import sys, threading
import groundwatch as gw

judge = gw.NLIJudge(sys.argv[1], min_probability=0.0)
passages = [gw.Passage(text=sys.argv[2])]
answer = " ".join(["The tower is tall."] * 8)
judged = threading.Event()

def score() -> None:
    while True:
        judge.judge(answer, passages, None)
        judged.set()

for _ in range(4):
    threading.Thread(target=score, daemon=True).start()
judged.wait()
print("done")
"""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hhem, _ = build(tmp_path_factory.mktemp("hhem-exit"), foundation_in_config=True, sizes=SIZES)
    return hhem


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_the_exit_waits_for_a_model_call_in_flight(checkpoint: Path) -> None:
    codes = []
    for _ in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-c", IN_FLIGHT, str(checkpoint), CONTEXT],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert done.stdout.strip() == "done", done.stderr[-2000:]
        assert "terminate called" not in done.stderr, done.stderr[-2000:]
        codes.append(done.returncode)
    assert codes == [0] * RUNS


def _bert(folder: Path) -> Path:
    """An NLI cross-encoder folder big enough that a forward pass runs a while."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True)
    words = "the eiffel tower was built in 1889 and is 330 metres tall it".split()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("\n".join([*specials, *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), model_max_length=512)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        intermediate_size=512,
        num_labels=3,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


def test_the_nli_judge_on_transformers_exits_cleanly_too(tmp_path: Path) -> None:
    # The same abort, through NLIJudge's transformers path (every run of 5 aborted without
    # the exit gate).
    model = _bert(tmp_path / "bert")
    context = "The Eiffel Tower was built in 1889 and is 330 metres tall. " * 6
    for _ in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-c", NLI_IN_FLIGHT, str(model), context],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert "terminate called" not in done.stderr, done.stderr[-2000:]
        assert "internal error" not in done.stderr, done.stderr[-2000:]
        assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr[-2000:]


def test_check_with_the_pytorch_judge_exits_with_its_gate_code(
    checkpoint: Path, tmp_path: Path
) -> None:
    rows = tmp_path / "rows.jsonl"
    answers = ["The Eiffel Tower is 330 metres tall.", "It was built in 1998. It is tall."]
    rows.write_text(
        "".join(
            json.dumps({"question": "q", "contexts": [CONTEXT], "answer": answers[i % 2]}) + "\n"
            for i in range(12)
        ),
        "utf-8",
    )
    command = [sys.executable, "-m", "groundwatch", "check", str(rows), "--judge", "hhem"]
    command += ["--model", str(checkpoint), "--max-hallucination-rate", "1"]
    for _ in range(2):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_env())
        assert "terminate called" not in done.stderr, done.stderr[-2000:]
        assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
        assert "result: PASS" in done.stdout
