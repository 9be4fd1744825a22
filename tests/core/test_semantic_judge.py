"""SemanticJudge on the real all-MiniLM-L6-v2 int8 model (the ``semantic`` extra)."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time

import pytest

import groundwatch as gw
from groundwatch.judging.judges import _minilm
from groundwatch.judging.judges.semantic import DEFAULT_SUPPORT_THRESHOLD

from ..extras import require_semantic_extra

require_semantic_extra()

CONTEXT = [
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville. Today the business employs roughly 400 people and sells irrigation equipment "
    "across southern Europe. Its headquarters moved to Madrid in 2010."
]
PARAPHRASE = "A brother and sister founded Acme in a Seville garage."


@pytest.fixture(scope="module")
def judge() -> gw.SemanticJudge:
    return gw.SemanticJudge()


def test_paraphrase_the_local_judge_rejects_is_inferred_with_located_evidence(
    judge: gw.SemanticJudge,
) -> None:
    local = gw.evaluate(PARAPHRASE, CONTEXT, judge=gw.LocalJudge())
    assert local.label == "hallucinated"
    assert [c.verdict for c in local.claims] == ["unsupported"]

    ev = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge)
    assert ev.label == "grounded"
    (claim,) = ev.claims
    assert claim.verdict == "inferred"
    assert "other words" in claim.reason
    assert claim.confidence is not None and claim.confidence <= 0.75
    (evidence,) = claim.evidence
    assert evidence.quote == CONTEXT[evidence.passage][evidence.start : evidence.end]
    assert evidence.quote.startswith("Acme Corporation was started in 1998")
    assert ev.evidence_rejected == 0


def test_its_probability_comes_from_its_own_answer_model(judge: gw.SemanticJudge) -> None:
    from groundwatch.judging.probability import answer_vector, shipped_models

    ev = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge)
    local = gw.evaluate(PARAPHRASE, CONTEXT, judge=gw.LocalJudge())
    model = shipped_models()["semantic"]["latin"]
    x = answer_vector(ev.label, [c.verdict for c in ev.claims], [c.confidence for c in ev.claims])
    assert ev.hallucination_probability == pytest.approx(model.probability(x))
    # The paraphrase the second look backs reads less likely hallucinated than the local
    # judge's rejection of it.
    assert local.hallucination_probability is not None
    assert ev.hallucination_probability < local.hallucination_probability


def test_the_calibrated_second_look_decides_by_probability() -> None:
    judge = gw.SemanticJudge(calibrated=True)
    assert judge.local.calibration is not None
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
    assert claim.verdict == "inferred"
    assert claim.confidence is not None and 0.5 <= claim.confidence < 1.0
    (other,) = gw.evaluate(
        "The company makes rockets for space tourism.", CONTEXT, judge=judge
    ).claims
    assert other.verdict == "unsupported"
    assert "meaning match only" in other.reason


def test_unrelated_claim_stays_unsupported_with_its_meaning_match(
    judge: gw.SemanticJudge,
) -> None:
    ev = gw.evaluate("The company makes rockets for space tourism.", CONTEXT, judge=judge)
    assert ev.label == "hallucinated"
    (claim,) = ev.claims
    assert claim.verdict == "unsupported"
    assert "meaning match only" in claim.reason
    assert claim.evidence == []


def test_meaning_scores_are_the_second_looks_scores_for_every_claim(
    judge: gw.SemanticJudge,
) -> None:
    unrelated = "The company also sponsors a football club in Lisbon."
    paraphrase, other = judge.meaning_scores([PARAPHRASE, unrelated], [gw.Passage(text=CONTEXT[0])])
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).claims
    assert f"meaning match {paraphrase:.0%}" in claim.reason  # the score the second look reported
    assert paraphrase >= DEFAULT_SUPPORT_THRESHOLD > other
    assert judge.meaning_scores([PARAPHRASE], []) is None


@pytest.mark.parametrize(
    ("answer", "verdict", "reason"),
    [
        # A changed number is the lexical judge's call, however close the wording.
        ("Acme was founded in 2005 by Ana and Luis Ortega.", "contradicted", "different number"),
        ("Ana and Luis Ortega launched Acme with a loan of 35,000 euros.", "unsupported", "number"),
        # A name the context never mentions is not rescued by similar wording.
        ("Acme was started by the siblings Ana and Pedro Gomez.", "unsupported", "name"),
    ],
)
def test_number_and_name_rejections_are_not_second_guessed(
    judge: gw.SemanticJudge, answer: str, verdict: str, reason: str
) -> None:
    local = gw.evaluate(answer, CONTEXT, judge=judge.local)
    ev = gw.evaluate(answer, CONTEXT, judge=judge)
    assert [c.verdict for c in ev.claims] == [verdict]
    assert reason in ev.claims[0].reason
    assert ev.claims == local.claims


def test_claims_the_local_judge_accepts_are_unchanged(judge: gw.SemanticJudge) -> None:
    answer = "Acme sells irrigation equipment across southern Europe. It employs 400 people."
    local = gw.evaluate(answer, CONTEXT, judge=judge.local)
    ev = gw.evaluate(answer, CONTEXT, judge=judge)
    assert ev.claims == local.claims
    assert {c.verdict for c in ev.claims} <= {"supported", "inferred"}


def test_chinese_claims_get_no_second_look(judge: gw.SemanticJudge) -> None:
    # The model is English; a Chinese claim keeps the lexical verdict and reason.
    context = ["该公司于1998年在塞维利亚成立，目前约有400名员工。"]
    answer = "这家企业由两位兄妹创办，总部设在马德里。"
    local = gw.evaluate(answer, context, judge=judge.local)
    ev = gw.evaluate(answer, context, judge=judge)
    assert ev.claims == local.claims
    assert all("meaning match" not in c.reason for c in ev.claims)


def test_threshold_decides_between_inferred_and_unsupported() -> None:
    # The fixed threshold on the meaning match is the uncalibrated rule.
    strict = gw.SemanticJudge(support_threshold=0.99, calibrated=False)
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=strict).claims
    assert claim.verdict == "unsupported"
    assert "meaning match only" in claim.reason
    lenient = gw.SemanticJudge(support_threshold=0.5, calibrated=False)
    (claim,) = gw.evaluate(PARAPHRASE, CONTEXT, judge=lenient).claims
    assert claim.verdict == "inferred"


def test_evidence_is_found_past_the_first_model_window() -> None:
    # Far more than one window (254 word pieces) of filler before the supporting sentence.
    # Unrelated neighbours in the window lower the match a little (0.84 alone, about 0.76 here).
    judge = gw.SemanticJudge(support_threshold=0.7, calibrated=False)
    filler = " ".join(f"Paragraph {i} describes the weather in coastal towns." for i in range(120))
    passage = f"{filler} {CONTEXT[0]} {filler}"
    ev = gw.evaluate(PARAPHRASE, [passage], judge=judge)
    (claim,) = ev.claims
    assert claim.verdict in ("supported", "inferred")
    quotes = [e.quote for e in claim.evidence]
    assert any("Ana and Luis Ortega" in q for q in quotes), quotes
    for e in claim.evidence:
        assert e.quote == passage[e.start : e.end]


def test_judgement_survives_pickling_for_the_worker_process(judge: gw.SemanticJudge) -> None:
    clone = pickle.loads(pickle.dumps(judge))
    passages = [gw.Passage(text=t) for t in CONTEXT]
    assert clone.judge(PARAPHRASE, passages, None) == judge.judge(PARAPHRASE, passages, None)
    assert clone.support_threshold == judge.support_threshold == DEFAULT_SUPPORT_THRESHOLD


def test_model_failure_keeps_the_lexical_verdicts(
    judge: gw.SemanticJudge, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(texts: list[str], *, cache: bool = False) -> list[_minilm.TokenVectors]:
        raise RuntimeError("onnxruntime exploded")

    monkeypatch.setattr(judge.encoder, "encode", broken)
    with caplog.at_level(logging.WARNING, logger="groundwatch.judging.judges.semantic"):
        ev = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge)
    assert [c.verdict for c in ev.claims] == ["unsupported"]
    assert ev.label == "hallucinated"
    assert "semantic second look failed" in caplog.text


def test_tokenizer_matches_the_reference_word_pieces(judge: gw.SemanticJudge) -> None:
    # Ids as the model's published tokenizer gives them (sentence-transformers/all-MiniLM-L6-v2).
    (tv,) = judge.encoder.encode(["Héllo, world! Tokenization isn't trivial."])
    assert tv.pieces == [
        "hello",
        ",",
        "world",
        "!",
        "token",
        "##ization",
        "isn",
        "'",
        "t",
        "trivial",
        ".",
    ]
    assert tv.vectors.shape == (11, 384)
    assert tv.offsets[0] == (0, 5)


def test_passage_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    small = gw.SemanticJudge(cache_bytes=200_000)
    texts = [f"Passage number {i} talks about the harvest of olives in Jaén." for i in range(40)]
    small.encoder.encode(texts, cache=True)
    assert 0 < small.encoder._cached_bytes <= 200_000
    assert len(small.encoder._cache) < 40
    # The most recent passages are the ones kept.
    assert texts[-1] in small.encoder._cache


def test_missing_extra_raises_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r'-e models/minilm -e "\.\[semantic\]"'):
        gw.SemanticJudge()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="support_threshold"):
        gw.SemanticJudge(support_threshold=1.5)
    with pytest.raises(ValueError, match="threads"):
        gw.SemanticJudge(threads=0)


def test_a_huge_context_is_read_only_up_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = gw.SemanticJudge(max_context_chars=5_000)
    seen: list[int] = []
    encode = judge.encoder.encode

    def counting(texts: list[str], *, cache: bool = False) -> list[_minilm.TokenVectors]:
        if cache:
            seen.append(sum(len(t) for t in texts))
        return encode(texts, cache=cache)

    monkeypatch.setattr(judge.encoder, "encode", counting)
    passages = [CONTEXT[0] + " " + "Olive groves cover the hills of Jaén. " * 1300] * 64  # 3.2M
    ev = gw.evaluate(PARAPHRASE, passages, judge=judge)
    assert seen == [5_000]
    # The part the model did read still supports the claim.
    assert [c.verdict for c in ev.claims] == ["inferred"]
    assert ev.truncated  # the cut is marked, so a gate sees it
    assert not gw.evaluate(PARAPHRASE, [CONTEXT[0]], judge=judge).truncated


@pytest.mark.parametrize(
    "answer",
    [
        "Ana and Luis Ortega, who are brother and sister, never launched Acme.",
        "Ana and Luis Ortega, who are brother and sister, did not launch Acme in 1998.",
    ],
)
def test_a_negated_paraphrase_is_not_rescued(judge: gw.SemanticJudge, answer: str) -> None:
    # The wording is close enough for the model (a match above the threshold); the "not" is
    # what it misses, so the negation of claim and evidence is compared separately.
    (claim,) = gw.evaluate(answer, CONTEXT, judge=judge).claims
    assert claim.verdict == "unsupported"
    assert "differs in negation" in claim.reason


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_inherit_a_held_cache_lock(judge: gw.SemanticJudge) -> None:
    judge.encoder._lock.acquire()  # as if another thread was encoding at fork time
    try:
        pid = os.fork()
        if pid == 0:  # the child: judge once, exit with the verdict as the status
            ok = gw.evaluate(PARAPHRASE, CONTEXT, judge=judge).label == "grounded"
            os._exit(0 if ok else 1)
    finally:
        judge.encoder._lock.release()
    deadline = time.monotonic() + 60
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:  # deadlocked on the inherited lock
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the cache lock")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(waited[1]) == 0
