"""NLIJudge on ``transformers`` (the ``nli-transformers`` extra): a cross-encoder folder without
an ONNX file, and a Hugging Face Hub id read from the local cache with no network.

The models are tiny randomly initialised BERT classifiers built from a config and saved with
``save_pretrained``, the layout of every public NLI cross-encoder; the test computes each pair
with the model itself and checks the judge's probabilities, labels mapped from the config,
against it. PyTorch is too heavy for the README's test command, so this module skips there and
``.ci/run`` runs it in a venv of its own (``tests/extras.py``).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.judging.judges._nli_model import LABELS, TransformersEncoder, runtime_of
from groundwatch.testing import GroundwatchTelemetry, capgw  # noqa: F401

from ..extras import require_transformers_runtime

require_transformers_runtime()

import torch  # noqa: E402

CONTEXT = [
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville. Today the business employs roughly 400 people and sells irrigation equipment "
    "across southern Europe. Its headquarters moved to Madrid in 2010."
]
PARAPHRASE = "A brother and sister founded Acme in a Seville garage."
WORDS = (
    "acme corporation was started in 1998 by the siblings ana and luis ortega a garage seville "
    "brother sister founded today business employs people . , olives"
).split()
POSITIONS = 48
"""The tiny model's position embeddings: a longer pair must be cut to fit, not crash it."""
THREE_WAY = {0: "contradiction", 1: "entailment", 2: "neutral"}
TWO_WAY = {0: "not_entailment", 1: "entailment"}


def _save_tiny_bert(folder: Path, id2label: dict[int, str], seed: int) -> None:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), model_max_length=POSITIONS)
    tokenizer.save_pretrained(folder)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=POSITIONS,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # random weights big enough that the classes differ clearly
        model.classifier.weight.normal_(0, 3.0)
    model.save_pretrained(folder)


def _reference(folder: Path, premise: str, hypothesis: str) -> list[float]:
    """The model's own probabilities for one pair, unpadded, in ``LABELS`` columns."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    batch = tokenizer(premise, hypothesis, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        p = model(**batch).logits.softmax(-1)[0].tolist()
    out = [0.0, 0.0, 0.0]
    for i, name in model.config.id2label.items():
        column = {"entailment": 0, "neutral": 1, "not_entailment": 1, "contradiction": 2}[name]
        out[column] += p[int(i)]
    return out


PAIRS = [
    ("Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega.", PARAPHRASE),
    ("Today the business employs roughly 400 people.", "Acme employs people."),
    # Longer than the model's 48 positions: cut to fit.
    (" ".join(["acme corporation was started in a garage"] * 12), "Acme was started."),
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("transformers_models")
    _save_tiny_bert(root / "three", THREE_WAY, seed=3)
    _save_tiny_bert(root / "two", TWO_WAY, seed=2)
    return {"three": root / "three", "two": root / "two"}


@pytest.mark.parametrize("kind", ["three", "two"])
def test_a_folder_without_onnx_runs_on_transformers_with_its_labels_mapped(
    folders: dict[str, Path], kind: str
) -> None:
    folder = folders[kind]
    assert not list(folder.glob("*.onnx")) and runtime_of(folder) == "transformers"
    judge = gw.NLIJudge(model=folder)
    assert judge.runtime == "transformers" and judge.model_failures == 0
    assert isinstance(judge.encoder, TransformersEncoder)
    assert set(judge.encoder.labels) == set((THREE_WAY if kind == "three" else TWO_WAY).values())
    got = judge.encoder.probabilities(PAIRS)  # batched and padded together
    assert got.shape == (len(PAIRS), len(LABELS))
    for row, (premise, hypothesis) in zip(got.tolist(), PAIRS, strict=True):
        assert row == pytest.approx(_reference(folder, premise, hypothesis), abs=1e-5)
    if kind == "two":
        assert got[:, 2].tolist() == [0.0] * len(PAIRS)
    assert judge.encoder.pieces(["acme corporation", "olives"]) == [2, 1]


def test_the_judge_decides_by_the_transformers_model(folders: dict[str, Path]) -> None:
    (lexical,) = gw.evaluate(PARAPHRASE, CONTEXT).claims
    assert lexical.verdict == "unsupported"  # what the model changes
    outcomes = {
        "inferred": gw.NLIJudge(folders["three"], min_probability=0.0),
        "unsupported": gw.NLIJudge(
            folders["three"], min_probability=1.0, contradiction_threshold=1.0
        ),
        "contradicted": gw.NLIJudge(
            folders["three"], min_probability=1.0, contradiction_threshold=0.0
        ),
    }
    for verdict, judge in outcomes.items():
        (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
        assert claim.verdict == verdict, claim.reason
        assert "entailment" in claim.reason and judge.model_failures == 0


def test_it_survives_pickling_and_concurrent_calls(folders: dict[str, Path]) -> None:
    judge = gw.NLIJudge(model=folders["three"])
    clone = pickle.loads(pickle.dumps(judge))
    assert clone.encoder is not judge.encoder and isinstance(clone.encoder, TransformersEncoder)
    passages = [gw.Passage(text=t) for t in CONTEXT]
    assert clone.judge(PARAPHRASE, passages, None) == judge.judge(PARAPHRASE, passages, None)
    assert judge.encoder is not None
    want = judge.encoder.probabilities(PAIRS).ravel().tolist()
    encoder = judge.encoder
    texts = [p for p, _ in PAIRS]
    pieces = encoder.pieces(texts)

    def call(i: int) -> Any:
        # Both calls at once: the fast tokenizer raises "Already borrowed" when two threads
        # change its padding and truncation settings at the same time.
        return encoder.pieces(texts) if i % 2 else encoder.probabilities(PAIRS).ravel()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(400)))
    assert all(r == pieces for r in results[1::2])
    assert all(r.tolist() == pytest.approx(want, abs=1e-6) for r in results[::2])


def test_a_monitor_scores_with_it_in_its_worker_process(
    folders: dict[str, Path],
    capgw: GroundwatchTelemetry,  # noqa: F811
) -> None:
    # The judge travels to the child interpreter pickled; the model loads again there.
    judge = gw.NLIJudge(folders["three"], min_probability=0.0)
    monitor = capgw.monitor(judge=judge, executor="process")
    monitor.record(question="Who founded Acme?", contexts=CONTEXT, answer=PARAPHRASE)
    ((record, evaluation),) = capgw.results()
    assert record.answer == PARAPHRASE
    assert [c.verdict for c in evaluation.claims] == ["inferred"]
    assert "entailment" in evaluation.claims[0].reason


def test_a_checksum_is_refused_for_a_model_without_onnx(folders: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="sha256 checks an ONNX file"):
        gw.NLIJudge(model=folders["two"], sha256="0" * 64)


def test_a_folder_that_cannot_load_leaves_lexical_verdicts_counted(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')  # no weights, no tokenizer
    before = sum(n for (where, _), n in guard.errors.items() if where == "nli_judge.load")
    judge = gw.NLIJudge(model=tmp_path)
    assert judge.encoder is None and judge.model_failures == 1
    assert sum(n for (where, _), n in guard.errors.items() if where == "nli_judge.load") == (
        before + 1
    )
    lexical = gw.evaluate(PARAPHRASE, CONTEXT).claims
    assert gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims == lexical


HUB_SCRIPT = """
import json, sys
import groundwatch as gw

out = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    judge = gw.NLIJudge(**kwargs, min_probability=0.0)
    claims = gw.evaluate(sys.argv[2], [sys.argv[3]], judge=judge).claims
    out[name] = [judge.runtime, judge.model_failures, [c.verdict for c in claims]]
print(json.dumps(out))
"""


def _hub_cache(root: Path, repo_id: str, folder: Path, commit: str) -> None:
    """``folder`` laid out as huggingface_hub's cache holds a downloaded ``repo_id``."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in folder.iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_a_hub_id_is_read_from_the_cache_with_no_network(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    _hub_cache(tmp_path / "hub", "groundwatch-tests/tiny-nli", folders["three"], commit)
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",  # a download attempt fails at once instead of reaching out
    }
    asks = {
        "hub": {"model": "groundwatch-tests/tiny-nli"},
        "pinned": {"model": "groundwatch-tests/tiny-nli", "revision": commit},
        "absent": {"model": "groundwatch-tests/absent"},
    }
    done = subprocess.run(
        [sys.executable, "-c", HUB_SCRIPT, json.dumps(asks), PARAPHRASE, CONTEXT[0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # Read from the cache, the model decides (min_probability 0 backs every claim it reads).
    assert got["hub"] == got["pinned"] == ["transformers", 0, ["inferred"]]
    # Not in the cache and no network: a counted load failure, the lexical verdicts stand.
    assert got["absent"] == ["transformers", 1, ["unsupported"]]
