"""NLIJudge(model=DIR): any sequence-classification cross-encoder folder with an ONNX file;
which runtime reads which model.

The folders here are built the way exported cross-encoders are laid out (``config.json`` with
``id2label``, an ONNX graph over ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ->
``logits``, optionally ``tokenizer.json``), with a tiny randomly initialised model: embeddings,
masked mean pooling, one hidden layer, a classifier. The test computes the same model in numpy
and checks the judge's probabilities against it, with the labels mapped from the config.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.judging.judges._nli_model import LABELS, NLIEncoder, label_columns, runtime_of
from groundwatch.judging.judges.nli import NLIJudge

from ..extras import require_nli_runtime
from ..nli_models import WORDS, TinyCrossEncoder, cross_encoder_folder

require_nli_runtime()

import numpy as np  # noqa: E402

CONTEXT = [
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville. Today the business employs roughly 400 people and sells irrigation equipment "
    "across southern Europe. Its headquarters moved to Madrid in 2010."
]
PARAPHRASE = "A brother and sister founded Acme in a Seville garage."


def _expected(model: TinyCrossEncoder, tok: Any, premise: str, hypothesis: str) -> Any:
    if tok is None:  # the bundled MiniLM vocabulary and the training format
        import tokenizers

        from groundwatch.judging.judges._nli_model import build_tokenizer, encode_pairs

        mini, cls, sep = build_tokenizer(tokenizers)
        ((ids, types),) = encode_pairs(mini, cls, sep, [(premise, hypothesis)])
    else:
        enc = tok.encode(premise, hypothesis)
        ids, types = enc.ids, enc.type_ids
    z = model.logits(ids, types)
    p = np.exp(z - z.max())
    return p / p.sum()


PAIRS = [
    ("Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega.", PARAPHRASE),
    ("Today the business employs roughly 400 people.", "Acme employs people."),
]


@pytest.mark.parametrize("tokenizer", [True, False])
def test_a_three_way_folder_maps_its_labels_in_config_order(
    tmp_path: Path, tokenizer: bool
) -> None:
    # The order of cross-encoder/nli-deberta-v3-base's config: contradiction first.
    id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
    folder, model, tok = cross_encoder_folder(tmp_path / "m", id2label, tokenizer=tokenizer)
    judge = NLIJudge(model=folder)
    assert judge.encoder is not None, judge.model_failures
    got = judge.encoder.probabilities(PAIRS)
    for row, (premise, hypothesis) in zip(got, PAIRS, strict=True):
        want = _expected(model, tok, premise, hypothesis)
        # Columns in LABELS order: entailment, neutral, contradiction.
        assert row.tolist() == pytest.approx([want[1], want[2], want[0]], abs=1e-5)
    assert judge.encoder.labels == ("contradiction", "entailment", "neutral")


@pytest.mark.parametrize(
    "names",
    [("entailment", "not_entailment"), ("NOT_ENTAILED", "ENTAILED"), ("non-entailment", "entail")],
)
def test_a_two_way_folder_gives_entailment_and_the_rest_as_neutral(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    folder, model, tok = cross_encoder_folder(
        tmp_path / "m", dict(enumerate(names)), tokenizer=True
    )
    encoder = NLIEncoder(folder)
    entail = 0 if names[0].lower().startswith("entail") else 1
    got = encoder.probabilities(PAIRS)
    for row, (premise, hypothesis) in zip(got, PAIRS, strict=True):
        want = _expected(model, tok, premise, hypothesis)
        assert row.tolist() == pytest.approx([want[entail], want[1 - entail], 0.0], abs=1e-5)


def test_the_judge_decides_by_the_folder_model_without_a_combiner(tmp_path: Path) -> None:
    folder, _, _ = cross_encoder_folder(
        tmp_path / "m", {0: "entailment", 1: "not_entailment"}, tokenizer=True
    )
    judge = NLIJudge(model=folder)
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
    (lexical,) = gw.evaluate(PARAPHRASE, CONTEXT).claims
    assert lexical.verdict == "unsupported"  # what the model changes, if it entails
    premise = "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a "
    assert judge.encoder is not None
    ((_, _, contra),) = judge.encoder.probabilities([(CONTEXT[0], PARAPHRASE)]).tolist()
    assert contra == 0.0
    window = judge.entailment(
        gw.LocalJudge().judge_with_features(PARAPHRASE, [gw.Passage(text=CONTEXT[0])], None),
        [gw.Passage(text=CONTEXT[0])],
    )[0]
    assert window is not None and window[3].quote.startswith(premise)
    backed = window[0] >= judge.min_probability
    assert claim.verdict == ("inferred" if backed else "unsupported")
    assert claim.confidence == pytest.approx(window[0] if backed else 1 - window[0], abs=1e-3)
    # Both outcomes occur with the random weights: the threshold decides.
    for threshold, verdict in ((0.0, "inferred"), (1.0, "unsupported")):
        strict = NLIJudge(model=folder, min_probability=threshold)
        assert [c.verdict for c in gw.evaluate(PARAPHRASE, CONTEXT, judge=strict).claims] == [
            verdict
        ]


def test_the_folder_prefers_the_int8_graph_and_finds_onnx_subfolders(tmp_path: Path) -> None:
    folder, _, _ = cross_encoder_folder(
        tmp_path / "a", {0: "entailment", 1: "not_entailment"}, tokenizer=True
    )
    (folder / "model.onnx").rename(folder / "model.int8.onnx")
    TinyCrossEncoder(4 + len(WORDS), 2, seed=99).save(folder / "model.onnx")
    assert NLIEncoder(folder).onnx_file == folder / "model.int8.onnx"
    nested, _, _ = cross_encoder_folder(
        tmp_path / "b",
        {0: "entailment", 1: "neutral", 2: "contradiction"},
        tokenizer=True,
        onnx_name="onnx/model.onnx",
    )
    assert NLIEncoder(nested).onnx_file == nested / "onnx" / "model.onnx"


def test_a_folder_judge_survives_pickling(tmp_path: Path) -> None:
    folder, _, _ = cross_encoder_folder(
        tmp_path / "m", {0: "contradiction", 1: "entailment", 2: "neutral"}, tokenizer=True
    )
    judge = NLIJudge(model=folder)
    clone = pickle.loads(pickle.dumps(judge))
    passages = [gw.Passage(text=t) for t in CONTEXT]
    assert clone.encoder is not None and clone.encoder is not judge.encoder
    assert clone.encoder.labels == judge.encoder.labels  # type: ignore[union-attr]
    assert clone.judge(PARAPHRASE, passages, None) == judge.judge(PARAPHRASE, passages, None)


@pytest.mark.parametrize(
    ("id2label", "problem"),
    [
        ({0: "LABEL_0", 1: "LABEL_1"}, "LABEL_0"),
        ({0: "neutral", 1: "contradiction"}, "no entailment"),
        ({0: "entailment", 1: "entailment"}, "more than one"),
    ],
)
def test_unreadable_labels_leave_lexical_verdicts_counted(
    tmp_path: Path, id2label: dict[int, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        label_columns(id2label)
    folder, _, _ = cross_encoder_folder(tmp_path / "m", id2label, tokenizer=True)
    before = sum(n for (where, _), n in guard.errors.items() if where == "nli_judge.load")
    judge = NLIJudge(model=folder)
    assert judge.encoder is None and judge.model_failures == 1
    after = sum(n for (where, _), n in guard.errors.items() if where == "nli_judge.load")
    assert after == before + 1
    assert (
        gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
        == gw.evaluate(PARAPHRASE, CONTEXT).claims
    )


def test_an_empty_folder_is_a_counted_load_failure(tmp_path: Path) -> None:
    judge = NLIJudge(model=tmp_path)
    assert judge.encoder is None and judge.model_failures == 1
    with pytest.raises(FileNotFoundError, match="no ONNX file"):
        NLIEncoder(tmp_path)
    with pytest.raises(FileNotFoundError, match="neither an ONNX file"):
        runtime_of(tmp_path)


def test_a_folder_without_onnx_or_a_hub_id_needs_the_transformers_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text('{"id2label": {"0": "entailment", "1": "neutral"}}')
    assert runtime_of(tmp_path) == "transformers"
    assert runtime_of("cross-encoder/nli-deberta-v3-base") == "transformers"
    monkeypatch.setitem(sys.modules, "transformers", None)  # import raises ImportError
    for model in (tmp_path, "cross-encoder/nli-deberta-v3-base"):
        with pytest.raises(ImportError, match=r'pip install -e "\.\[nli-transformers\]"') as raised:
            NLIJudge(model=model)
        hub = model == "cross-encoder/nli-deberta-v3-base"
        assert ("is no file or folder here, so a hub id" in str(raised.value)) is hub


@pytest.mark.parametrize(
    ("name", "runtime"),
    [
        ("cross-encoder/nli-deberta-v3-base", "transformers"),
        ("roberta-large-mnli", "transformers"),
        ("./models/missing", None),
        ("/abs/missing/model", None),
        ("a/b/c", None),
        ("missing/model.onnx", None),
        ("../up/name", None),
    ],
)
def test_a_name_that_is_no_path_here_is_read_as_a_hub_id(name: str, runtime: str | None) -> None:
    if runtime is None:
        with pytest.raises(FileNotFoundError, match="no NLI model"):
            runtime_of(name)
    else:
        assert runtime_of(name) == runtime


def test_a_revision_needs_a_hub_model(tmp_path: Path) -> None:
    folder, _, _ = cross_encoder_folder(
        tmp_path / "m", {0: "entailment", 1: "not_entailment"}, tokenizer=True
    )
    assert runtime_of(folder) == runtime_of(folder / "model.onnx") == "onnx"
    with pytest.raises(ValueError, match="revision pins a hub model"):
        NLIJudge(model=folder, revision="main")


def test_a_bare_onnx_file_keeps_the_three_labels_of_the_training_format() -> None:
    assert label_columns(None) == [0, 1, 2]
    assert LABELS == ("entailment", "neutral", "contradiction")


def test_the_model_is_the_first_argument_and_required(tmp_path: Path) -> None:
    folder, _, _ = cross_encoder_folder(
        tmp_path / "m", {0: "entailment", 1: "not_entailment"}, tokenizer=True
    )
    with pytest.raises(TypeError, match="model"):
        NLIJudge()  # type: ignore[call-arg]
    assert NLIJudge(folder).model == NLIJudge(model=folder).model == folder
    assert NLIJudge(folder).runtime == "onnx"
    assert gw.NLIJudge is NLIJudge
