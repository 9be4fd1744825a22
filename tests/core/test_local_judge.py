"""The embedded local judge: verdicts, evidence, confidence, degenerate answers, determinism."""

from __future__ import annotations

import pytest

import groundwatch as gw
from groundwatch.judging.text.numerals import extract_quantities
from groundwatch.types import Evaluation

EIFFEL = "The Eiffel Tower, completed in 1889, stands 330 metres (1,083 ft) tall."
POSEIDON = (
    "Poseidon grossed $ 181,674,817 at the worldwide box office on a budget of $ 160 million."
)
CURIE = (
    "Marie Curie was born in Warsaw in 1867. "
    "She later moved to Paris, where she studied physics at the Sorbonne."
)
REVENUE_ZH = "该公司2023年营收达到500万元，同比增长12%。"
CTO_ZH = "张伟于2010年加入公司。2015年，他被任命为首席技术官。"

# (answer, context, expected verdict of its single claim)
VERDICTS_EN = [
    # stated in the context
    ("The Eiffel Tower is 330 metres tall.", EIFFEL, "supported"),
    # rounding and number formats are matches, not contradictions
    ("Poseidon grossed $181.7 million worldwide.", POSEIDON, "supported"),
    ("The city has 5 million inhabitants.", "The city has 5,000,000 inhabitants.", "supported"),
    # synthesis across two sentences
    ("Marie Curie, born in Warsaw, studied physics in Paris.", CURIE, "inferred"),
    # changed numbers, percentages, dates and units
    ("The Eiffel Tower is 300 metres tall.", EIFFEL, "contradicted"),
    (
        "Consumer prices rose 5.4% in May.",
        "Consumer prices rose 4.5% in May, the statistics office said.",
        "contradicted",
    ),
    ("The Eiffel Tower was completed in 1899.", EIFFEL, "contradicted"),
    (
        "The warranty lasts three years.",
        "The warranty lasts 3 months from the date of purchase.",
        "contradicted",
    ),
    # flipped negation
    (
        "The museum is not open on Mondays.",
        "The museum is open on Mondays from 9 am.",
        "contradicted",
    ),
    # a name the context never mentions; a topic it is silent on
    (
        "The tower was designed by Frank Gehry.",
        "The tower was designed by the engineering company of Gustave Eiffel.",
        "unsupported",
    ),
    ("Most visitors buy their tickets online in advance.", EIFFEL, "unsupported"),
    ("The tower had 7 million visitors in 2019.", EIFFEL, "unsupported"),
]

VERDICTS_ZH = [
    ("该公司2023年的营收为500万元。", REVENUE_ZH, "supported"),
    # 500万 = 5,000,000
    ("该公司营收达到500万元。", "该公司营收达到5,000,000元。", "supported"),
    # paraphrase drawing on two sentences
    ("张伟2015年被任命为公司首席技术官。", CTO_ZH, "inferred"),
    (
        "埃菲尔铁塔高330米，位于巴黎。",
        "埃菲尔铁塔位于法国巴黎，于1889年建成，高330米。",
        "supported",
    ),
    # changed number, unit, negation
    ("该公司2023年营收达到800万元。", REVENUE_ZH, "contradicted"),
    ("新员工的试用期为3年。", "新员工的试用期为3个月，期满后转正。", "contradicted"),
    ("新员工的试用期为三年。", "新员工的试用期为3个月，期满后转正。", "contradicted"),
    ("该药物没有获得批准上市。", "该药物已获得批准上市。", "contradicted"),
    # the context is silent
    ("该公司计划明年在欧洲开设三家工厂。", REVENUE_ZH, "unsupported"),
]


def _assert_offsets(ev: Evaluation, answer: str, contexts: list[str]) -> None:
    for claim in ev.claims:
        assert claim.start is not None and claim.end is not None
        assert answer[claim.start : claim.end] == claim.text
        assert claim.confidence is not None and 0.0 <= claim.confidence <= 1.0
        if claim.verdict != "unsupported":
            assert claim.evidence, claim
        for e in claim.evidence:
            assert contexts[e.passage][e.start : e.end] == e.quote


@pytest.mark.parametrize(("answer", "context", "verdict"), VERDICTS_EN + VERDICTS_ZH)
def test_verdict_table(answer: str, context: str, verdict: str) -> None:
    ev = gw.evaluate(answer, [context])
    assert [c.verdict for c in ev.claims] == [verdict], [c.reason for c in ev.claims]
    assert ev.evidence_rejected == 0
    _assert_offsets(ev, answer, [context])


def test_contradiction_points_at_the_conflicting_sentence() -> None:
    contexts = ["Paris is the capital of France.", "The company was founded in 1998 in Lyon."]
    answer = "The company was founded in 2001 in Lyon."
    ev = gw.evaluate(answer, contexts)
    (claim,) = ev.claims
    assert claim.verdict == "contradicted"
    assert claim.evidence[0].passage == 1
    assert "1998" in claim.evidence[0].quote
    assert ev.label == "hallucinated" and ev.faithfulness == 0.0


def test_scores_and_label_of_a_mixed_answer() -> None:
    answer = (
        "The Eiffel Tower is 330 metres tall. It was completed in 1889. "
        "It is painted bright red every spring."
    )
    ev = gw.evaluate(answer, [EIFFEL])
    assert [c.verdict for c in ev.claims] == ["supported", "supported", "unsupported"]
    assert ev.faithfulness == 1.0
    assert ev.groundedness == pytest.approx(2 / 3)
    _assert_offsets(ev, answer, [EIFFEL])


def test_question_words_are_weak_evidence() -> None:
    # The claim echoes the question; its only new word ("Ludacris") is what must be supported.
    question = "who sings the rap in baby by justin bieber"
    context = "Baby is a song by Canadian singer Justin Bieber, featuring a rap verse by a guest."
    answer = "Ludacris sings the rap in Baby by Justin Bieber."
    ev = gw.evaluate(answer, [context], question=question)
    assert ev.claims[0].verdict == "unsupported"
    ev_ok = gw.evaluate(answer, [context.replace("a guest", "Ludacris")], question=question)
    assert ev_ok.claims[0].verdict in ("supported", "inferred")


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I'm not sure, sorry.",
        "我不知道。",
        "抱歉，我无法回答这个问题。",
        "Thank you for your question! Hope this helps.",
        "The context does not mention the opening hours.",
        "What do you mean?",
        "",
        "   ",
    ],
)
def test_answers_without_claims(answer: str) -> None:
    ev = gw.evaluate(answer, [EIFFEL])
    assert ev.label == "no_claims"
    assert ev.faithfulness is None and ev.groundedness is None


def test_table_of_contents_context_is_insufficient() -> None:
    toc = "Contents\n1. Introduction ........ 3\n2. Pricing ........ 7\n3. Refunds ..... 9"
    answer = "Refunds are available within 30 days. The premium plan costs $20 a month."
    ev = gw.evaluate(answer, [toc])
    assert ev.label == "insufficient_context"
    assert ev.groundedness == 0.0  # scores are still reported
    zh = gw.evaluate("退款需在30天内申请。", ["目录\n第一章 简介\n第二章 价格\n第三章 退款"])
    assert zh.label == "insufficient_context"


def test_confidence_is_high_for_clear_cases_and_lower_for_borderline_ones() -> None:
    verbatim = gw.evaluate(
        "The museum opens at 9 am on Mondays.", ["The museum opens at 9 am on Mondays."]
    )
    unrelated = gw.evaluate("Bananas are rich in potassium.", [EIFFEL])
    borderline = gw.evaluate(
        "The tower's iron lattice was completed quickly.",
        ["The tower, made of wrought iron, was completed in 1889 after two years of work."],
    )
    assert verbatim.claims[0].verdict == "supported"
    assert unrelated.claims[0].verdict == "unsupported"
    # Calibrated probabilities: high for the clear cases, lower on the borderline, never a
    # certainty the dev data does not bear out.
    # (On AttributionBench dev even claims sharing no word with their context are labelled
    # faithful 3 times in 10, which bounds the confidence of "unsupported" for them.)
    v, u, b = (ev.claims[0].confidence for ev in (verbatim, unrelated, borderline))
    assert v is not None and u is not None and b is not None
    assert 0.85 <= v < 1.0
    assert 0.6 <= u < 1.0
    assert b < min(u, 0.6)


def test_deterministic() -> None:
    answer = "Marie Curie, born in Warsaw, studied physics in Paris. She won 3 Nobel prizes."
    first = gw.evaluate(answer, [CURIE, EIFFEL], question="Who was Marie Curie?")
    for _ in range(3):
        again = gw.evaluate(answer, [CURIE, EIFFEL], question="Who was Marie Curie?")
        assert again.model_dump() == first.model_dump()
    other = gw.evaluate(answer, [CURIE, EIFFEL], "Who was Marie Curie?", judge=gw.LocalJudge())
    assert other.model_dump() == first.model_dump()


def test_multi_passage_evidence_names_the_right_passage() -> None:
    contexts = [EIFFEL, CURIE, POSEIDON]
    answer = "Poseidon had a budget of $160 million. Marie Curie was born in Warsaw."
    ev = gw.evaluate(answer, contexts)
    assert [c.verdict in ("supported", "inferred") for c in ev.claims] == [True, True]
    assert [c.evidence[0].passage for c in ev.claims] == [2, 1]
    _assert_offsets(ev, answer, contexts)


def test_huge_repetitive_inputs_stay_fast_enough_to_finish() -> None:
    # Regression guard for pathological inputs (the speed target lives in benchmarks/).
    ev = gw.evaluate(
        "Paris is big. " * 2_000, ["Paris is big. " * 3_500 + str(i) for i in range(64)]
    )
    assert ev.truncated
    assert ev.label == "grounded"


@pytest.mark.parametrize(
    ("text", "value", "kind", "unit"),
    [
        ("$181.7 million", 181_700_000, "money", "usd"),
        ("5,000,000", 5_000_000, "count", None),
        ("500万", 5_000_000, "count", None),
        ("五百万元", 5_000_000, "money", "cny"),
        ("1.5亿美元", 150_000_000, "money", "usd"),
        ("4.5%", 4.5, "percent", "%"),
        ("3个月", 3, "duration", "month"),
        ("3年", 3, "duration", "year"),
        ("2019年", 2019, "year", "year"),
        ("two years", 2, "duration", "year"),
    ],
)
def test_quantities_are_normalised(text: str, value: float, kind: str, unit: str | None) -> None:
    (q,) = extract_quantities(text)
    assert q.value == pytest.approx(value)
    assert (q.kind, q.unit) == (kind, unit)
    assert text[q.start : q.end].strip() == text.strip()


def test_quantity_matching_rules() -> None:
    def one(text: str):  # type: ignore[no-untyped-def]
        (q,) = extract_quantities(text)
        return q

    assert one("$181,674,817").matches(one("$181.7 million"))
    assert one("5 million").matches(one("500万"))
    assert not one("500万").matches(one("800万"))
    assert not one("4.5%").matches(one("5.4%"))
    assert one("3个月").conflicts(one("3年"))
    assert not one("in 2000").matches(one("in 2004"))  # years are exact
    assert extract_quantities("COVID-19 in MP3 format [3]") == []


def test_thresholds_are_validated_and_change_verdicts() -> None:
    with pytest.raises(ValueError):
        gw.LocalJudge(infer_threshold=1.5)
    with pytest.raises(ValueError):
        gw.LocalJudge(question_weight=-0.1)
    with pytest.raises(ValueError):
        gw.LocalJudge(min_probability=2.0)
    answer = "Marie Curie, born in Warsaw, studied physics in Paris."
    # The threshold rule (calibrated=False) decides with the two alignment thresholds.
    strict = gw.evaluate(
        answer, [CURIE], judge=gw.LocalJudge(infer_threshold=0.8, calibrated=False)
    )
    lenient = gw.evaluate(answer, [CURIE], judge=gw.LocalJudge(support_threshold=0.5))
    assert strict.claims[0].verdict == "unsupported"
    assert lenient.claims[0].verdict == "supported"
    # The calibrated rule decides on the probability of being backed.
    assert gw.evaluate(answer, [CURIE], judge=gw.LocalJudge()).claims[0].verdict == "inferred"
    demanding = gw.evaluate(answer, [CURIE], judge=gw.LocalJudge(min_probability=0.99))
    assert demanding.claims[0].verdict == "unsupported"


def test_deterministic_across_processes_with_different_hash_seeds() -> None:
    # String hashing is randomised per process; verdicts must not depend on set order.
    import json
    import os
    import subprocess
    import sys

    script = (
        "import groundwatch as gw, json, sys\n"
        "ev = gw.evaluate(sys.argv[1], json.loads(sys.argv[2]), question='Who was she?')\n"
        "print(ev.model_dump_json())\n"
    )
    answer = (
        "Marie Curie, born in Warsaw, studied physics in Paris. She won 3 Nobel prizes. "
        "The Eiffel Tower was completed in 1899. 该公司2023年营收达到800万元。"
    )
    contexts = json.dumps([CURIE, EIFFEL, REVENUE_ZH, POSEIDON])
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script, answer, contexts],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert '"contradicted"' in outputs.pop()


def test_candidate_windows_are_listed_only_when_asked() -> None:
    context = [
        "The cooperative sells irrigation pumps to farms in the valley.",
        "Several shops line the old market street.",
        "The cooperative was set up by local farmers after the long drought.",
    ]
    passages = [gw.Passage(text=t) for t in context]
    answer = "Local farmers set up the cooperative that sells pumps."
    ((_, plain),) = gw.LocalJudge().judge_with_features(answer, passages, None)
    assert plain.candidate_windows == ()

    judge = gw.LocalJudge()
    judge.candidate_windows = 2
    ((_, f),) = judge.judge_with_features(answer, passages, None)
    assert f.candidate_windows[0] == f.window_span
    assert len(f.candidate_windows) == 2
    assert {w[0] for w in f.candidate_windows} == {0, 2}  # both passages that share its words
    for p, start, end in f.candidate_windows:
        assert context[p][start:end] == context[p]  # one-sentence passages: the whole of each
