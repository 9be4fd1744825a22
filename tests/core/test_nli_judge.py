"""NLIJudge on real onnxruntime sessions.

No model ships, so these tests build small ONNX graphs with the model's interface
(``input_ids``, ``attention_mask``, ``token_type_ids`` -> ``logits`` over entailment /
neutral / contradiction) whose answer the test chooses, and run them through the
same tokenizer, session and decision code the real model goes through.
"""

from __future__ import annotations

import json
import logging
import pickle
import sys
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch._shared import guard as _guard
from groundwatch.judging.judges._nli_model import (
    MAX_HYPOTHESIS_PIECES,
    MAX_LENGTH,
    NLIEncoder,
    build_tokenizer,
    encode_pairs,
)
from groundwatch.judging.judges.local._calibration import LogisticModel
from groundwatch.judging.judges.nli import NLI_FEATURES, NLIJudge, load_combiner
from groundwatch.testing import GroundwatchTelemetry, capgw  # noqa: F401

from ..extras import require_nli_runtime

require_nli_runtime()

CONTEXT = [
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville. Today the business employs roughly 400 people and sells irrigation equipment "
    "across southern Europe. Its headquarters moved to Madrid in 2010."
]
PARAPHRASE = "A brother and sister founded Acme in a Seville garage."
STATED = "Acme Corporation was started in 1998 in a garage in Seville."

# The combiner's weight on the entailment probability (the rest zero): backed iff the model
# says entailment.
_ENTAILMENT = NLI_FEATURES.index("entailment")
COMBINER = LogisticModel(
    coef=tuple(10.0 if i == _ENTAILMENT else 0.0 for i in range(len(NLI_FEATURES))),
    intercept=-5.0,
)


def _constant_model(path: Path, logits: tuple[float, float, float]) -> Path:
    """An ONNX graph that reads all three inputs and answers ``logits`` for every pair."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    nodes = [
        *(
            helper.make_node("Cast", [i.name], [f"{i.name}_f"], to=TensorProto.FLOAT)
            for i in inputs
        ),
        helper.make_node("Sum", [f"{i.name}_f" for i in inputs], ["total"]),
        helper.make_node("ReduceSum", ["total", "axes"], ["per_row"], keepdims=1),
        helper.make_node("Mul", ["per_row", "zero"], ["nothing"]),
        helper.make_node("Add", ["nothing", "answer"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constant_nli",
        inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            onnx.numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
            onnx.numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
            onnx.numpy_helper.from_array(np.array([logits], dtype=np.float32), "answer"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nli")
    return {
        "entailment": _constant_model(root / "entail.onnx", (6.0, 0.0, 0.0)),
        "neutral": _constant_model(root / "neutral.onnx", (0.0, 6.0, 0.0)),
        "contradiction": _constant_model(root / "contra.onnx", (0.0, 0.0, 6.0)),
    }


def _judge(models: dict[str, Path], says: str, **kwargs: object) -> NLIJudge:
    return NLIJudge(models[says], COMBINER, **kwargs)  # type: ignore[arg-type]


def _exact(ev: gw.Evaluation) -> None:
    for claim in ev.claims:
        for e in claim.evidence:
            assert e.quote == CONTEXT[e.passage][e.start : e.end]


@pytest.mark.parametrize(
    ("says", "answer", "verdict", "label"),
    [
        ("entailment", PARAPHRASE, "inferred", "grounded"),
        ("entailment", STATED, "supported", "grounded"),
        ("neutral", STATED, "unsupported", "hallucinated"),
        ("neutral", PARAPHRASE, "unsupported", "hallucinated"),
        ("contradiction", PARAPHRASE, "contradicted", "hallucinated"),
    ],
)
def test_the_three_classes_map_to_the_four_verdicts(
    models: dict[str, Path], says: str, answer: str, verdict: str, label: str
) -> None:
    ev = gw.evaluate(answer, CONTEXT, judge=_judge(models, says))
    (claim,) = ev.claims
    assert claim.verdict == verdict
    assert ev.label == label
    assert ev.evidence_rejected == 0
    _exact(ev)
    if verdict == "unsupported":
        assert claim.evidence == []
        assert "does not entail" in claim.reason
    else:
        assert claim.evidence, claim
    if verdict in ("inferred", "contradicted"):
        # The premise the model read is the evidence: the aligned sentence with its neighbours
        # (the first sentence has one).
        (e,) = claim.evidence
        assert e.quote.startswith("Acme Corporation was started in 1998")
        assert e.quote.endswith("across southern Europe.")


def test_the_lexical_judge_already_decides_the_same_claims_otherwise(
    models: dict[str, Path],
) -> None:
    # Guards the table above: the model changed these verdicts, the rules did not decide them.
    assert [c.verdict for c in gw.evaluate(PARAPHRASE, CONTEXT).claims] == ["unsupported"]
    assert [c.verdict for c in gw.evaluate(STATED, CONTEXT).claims] == ["supported"]


def test_backing_needs_the_combiner_probability_the_judge_asks_for(
    models: dict[str, Path],
) -> None:
    # The entailment model gives p = sigmoid(10 * 0.995 - 5) ~ 0.993 for every claim.
    assert gw.evaluate(PARAPHRASE, CONTEXT, judge=_judge(models, "entailment")).label == "grounded"
    strict = _judge(models, "entailment", min_probability=0.999)
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=strict).claims
    assert claim.verdict == "unsupported"


def test_a_contradiction_needs_a_sure_model(models: dict[str, Path]) -> None:
    judge = _judge(models, "contradiction", contradiction_threshold=1.0)
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
    assert claim.verdict == "unsupported"


@pytest.mark.parametrize(
    ("answer", "verdict", "reason"),
    [
        # A conflicting number: the rule says contradicted, whatever the model says.
        ("Acme Corporation was started in 2005 in a garage in Seville.", "contradicted", "number"),
        # A name the context never mentions.
        ("Acme Corporation was started by Pedro Alvarez in Seville.", "unsupported", "names"),
        # A number the context lacks.
        ("Acme Corporation employs 950 engineers in Seville.", "unsupported", "number"),
    ],
)
def test_lexical_vetoes_win_over_the_model(
    models: dict[str, Path], answer: str, verdict: str, reason: str
) -> None:
    lexical = gw.evaluate(answer, CONTEXT).claims
    for says in ("entailment", "contradiction"):
        ev = gw.evaluate(answer, CONTEXT, judge=_judge(models, says))
        assert [c.verdict for c in ev.claims] == [verdict]
        assert ev.claims == lexical
        assert reason in ev.claims[0].reason


def test_chinese_claims_keep_their_lexical_verdicts(models: dict[str, Path]) -> None:
    context = ["该公司于1998年在塞维利亚成立，目前约有400名员工。"]
    answer = "该公司的员工来自世界各地。"
    ev = gw.evaluate(answer, context, judge=_judge(models, "entailment"))
    assert ev.claims == gw.evaluate(answer, context).claims


def test_the_judge_survives_pickling_for_the_worker_process(models: dict[str, Path]) -> None:
    judge = _judge(models, "entailment")
    clone = pickle.loads(pickle.dumps(judge))
    passages = [gw.Passage(text=t) for t in CONTEXT]
    assert clone.encoder is not None and clone.encoder is not judge.encoder
    assert clone.judge(PARAPHRASE, passages, None) == judge.judge(PARAPHRASE, passages, None)
    assert clone.judge(PARAPHRASE, passages, None).claims[0].verdict == "inferred"


def test_a_monitor_scores_with_it_in_its_worker_process(
    models: dict[str, Path],
    capgw: GroundwatchTelemetry,  # noqa: F811
) -> None:
    # The judge travels to the worker process pickled; the model session is rebuilt there.
    monitor = capgw.monitor(judge=_judge(models, "entailment"), executor="process")
    monitor.record(question="Who founded Acme?", contexts=CONTEXT, answer=PARAPHRASE)
    ((record, evaluation),) = capgw.results()
    assert record.answer == PARAPHRASE
    assert evaluation.label == "grounded"
    assert [c.verdict for c in evaluation.claims] == ["inferred"]


def test_a_model_file_that_cannot_load_leaves_lexical_verdicts_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The guard logs a place once a minute: an earlier test's load failure must not hide this one.
    monkeypatch.setattr(_guard, "_last_logged", {})
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx model")
    before = sum(n for (where, _), n in _guard.errors.items() if where == "nli_judge.load")
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        judge = NLIJudge(bad, COMBINER)
    assert judge.encoder is None
    assert judge.model_failures == 1
    after = sum(n for (where, _), n in _guard.errors.items() if where == "nli_judge.load")
    assert after == before + 1
    assert "nli_judge.load" in caplog.text
    for answer in (PARAPHRASE, STATED):
        assert (
            gw.evaluate(answer, CONTEXT, judge=judge).claims == gw.evaluate(answer, CONTEXT).claims
        )


def test_a_checksum_mismatch_is_refused_and_counted(models: dict[str, Path]) -> None:
    judge = NLIJudge(models["entailment"], COMBINER, sha256="0" * 64)
    assert judge.encoder is None and judge.model_failures == 1


def test_a_model_that_raises_leaves_lexical_verdicts_counted(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = _judge(models, "entailment")
    assert judge.encoder is not None

    def broken(pairs: object) -> object:
        raise RuntimeError("onnxruntime exploded")

    monkeypatch.setattr(judge.encoder, "probabilities", broken)
    before = _guard.errors[("nli_judge.model", "RuntimeError")]
    ev = gw.evaluate(PARAPHRASE + " " + STATED, CONTEXT, judge=judge)
    assert [c.verdict for c in ev.claims] == ["unsupported", "supported"]
    assert judge.model_failures == 1
    assert _guard.errors[("nli_judge.model", "RuntimeError")] == before + 1


def test_the_model_reads_at_most_max_claims_per_answer(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = _judge(models, "entailment", max_claims=1)
    assert judge.encoder is not None
    seen: list[int] = []
    real = judge.encoder.probabilities

    def counting(pairs: list[tuple[str, str]]) -> object:
        seen.append(len(pairs))
        return real(pairs)

    monkeypatch.setattr(judge.encoder, "probabilities", counting)
    ev = gw.evaluate(
        f"{PARAPHRASE} {PARAPHRASE.replace('Seville', 'the Seville')}", CONTEXT, judge=judge
    )
    assert seen == [1]
    assert [c.verdict for c in ev.claims] == ["inferred", "unsupported"]


def test_pairs_are_bounded_and_formatted_as_in_training() -> None:
    import tokenizers

    tok, cls, sep = build_tokenizer(tokenizers)
    premise = "The harvest of olives in Jaén starts in November. " * 80
    hypothesis = "Olives are picked in Jaén. " * 40
    ((ids, seg),) = encode_pairs(tok, cls, sep, [(premise, hypothesis)])
    assert len(ids) == len(seg) == MAX_LENGTH
    assert ids[0] == cls and ids[-1] == sep
    first_sep = ids.index(sep)
    assert seg[: first_sep + 1] == [0] * (first_sep + 1)
    assert seg[first_sep + 1 :] == [1] * (MAX_LENGTH - first_sep - 1)
    assert MAX_LENGTH - first_sep - 2 == MAX_HYPOTHESIS_PIECES
    ((short, short_seg),) = encode_pairs(tok, cls, sep, [("Olives grow.", "Olives exist.")])
    p, h = (tok.encode(t, add_special_tokens=False).ids for t in ("Olives grow.", "Olives exist."))
    assert short == [cls, *p, sep, *h, sep]
    assert short_seg == [0] * (len(p) + 2) + [1] * (len(h) + 1)


def test_a_long_window_falls_back_to_its_best_sentence(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sentences of about 390 characters: the window of three is longer than the model reads.
    before, after = (
        "The cooperative lists " + ", ".join(f"grove {i} by the river" for i in numbers) + "."
        for numbers in (range(16), range(20, 36))
    )
    assert max(len(before), len(after)) < 400  # one sentence each, not cut into chunks
    context = [f"{before} Acme Corporation was started in a garage in Seville long ago. {after}"]
    judge = _judge(models, "entailment")
    assert judge.encoder is not None
    read: list[str] = []
    real = judge.encoder.probabilities

    def spy(pairs: list[tuple[str, str]]) -> object:
        read.extend(p for p, _ in pairs)
        return real(pairs)

    monkeypatch.setattr(judge.encoder, "probabilities", spy)
    ev = gw.evaluate("Acme began in a Seville garage.", context, judge=judge)
    assert read == ["Acme Corporation was started in a garage in Seville long ago."]
    (claim,) = ev.claims
    (e,) = claim.evidence
    assert e.quote == read[0] == context[0][e.start : e.end]


def test_more_windows_let_the_model_find_the_one_that_entails(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Separate passages: the windows do not overlap, so the claim has two distinct candidates.
    context = [
        "The cooperative sells irrigation pumps to farms in the valley.",
        "Several shops line the old market street.",
        "The cooperative was set up by local farmers after the long drought.",
    ]
    answer = "Local farmers set up the cooperative that sells pumps."
    read: list[list[str]] = []
    aligned: list[str] = []

    def spy_on(judge: NLIJudge) -> None:
        import numpy as np

        def only_other_windows_entail(pairs: list[tuple[str, str]]) -> object:
            read.append([p for p, _ in pairs])
            return np.array(
                [[0.02, 0.97, 0.01] if p in aligned else [0.97, 0.02, 0.01] for p, _ in pairs]
            )

        assert judge.encoder is not None
        monkeypatch.setattr(judge.encoder, "probabilities", only_other_windows_entail)

    one = _judge(models, "entailment")
    aligned.append("nothing yet")
    spy_on(one)
    gw.evaluate(answer, context, judge=one)
    ((first,),) = read  # one claim, one window: the aligned one
    aligned[:] = [first]
    read.clear()
    (claim,) = gw.evaluate(answer, context, judge=one).claims
    assert claim.verdict == "unsupported"

    three = _judge(models, "entailment", windows=3)
    spy_on(three)
    read.clear()
    ev = gw.evaluate(answer, context, judge=three)
    ((premises),) = read
    assert premises[0] == first and len(premises) > 1
    (claim,) = ev.claims
    assert claim.verdict == "inferred"
    (e,) = claim.evidence
    assert e.quote != first and e.quote in premises
    assert e.quote == context[e.passage][e.start : e.end]


def test_the_encoder_gives_probabilities_in_label_order(models: dict[str, Path]) -> None:
    encoder = NLIEncoder(models["contradiction"])
    probs = encoder.probabilities([("a b c", "d"), ("a much longer premise here", "e f")])
    assert probs.shape == (2, 3)
    assert probs.argmax(axis=1).tolist() == [2, 2]
    assert abs(float(probs.sum()) - 2.0) < 1e-5


def test_combiner_files_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "combiner.json"
    good.write_text(json.dumps({"features": list(NLI_FEATURES), "model": COMBINER.to_json()}))
    assert load_combiner(good) == LogisticModel.from_json(COMBINER.to_json())
    bad = tmp_path / "bad.json"
    bad.write_text('{"features": ["x"], "model": {"coef": [1.0], "intercept": 0.0}}')
    with pytest.raises(ValueError, match="combiner features"):
        load_combiner(bad)


def test_missing_extra_raises_with_the_install_hint(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r'NLIJudge runs an ONNX model.*-e "\.\[nli\]"'):
        NLIJudge(models["entailment"], COMBINER)


def test_bad_arguments_are_refused(models: dict[str, Path]) -> None:
    bad = (
        {"threads": 0},
        {"max_claims": -1},
        {"contradiction_threshold": 1.5},
        {"min_probability": -0.1},
        {"windows": 0},
    )
    for kwargs in bad:
        with pytest.raises(ValueError):
            _judge(models, "entailment", **kwargs)
    wrong = LogisticModel(coef=(1.0,), intercept=0.0)
    with pytest.raises(ValueError, match="coefficients"):
        NLIJudge(models["entailment"], wrong)
