"""Evaluation.hallucination_probability: filled by scoring for every judge, None only for
errors, computed from what each judge knows (docs/rates.md)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

import groundwatch as gw
from groundwatch.judging import probability
from groundwatch.judging.probability import (
    ANSWER_FEATURES,
    DEFAULT_CONFIDENCE,
    NO_CLAIMS_PROBABILITY,
    AnswerModel,
    answer_vector,
    hallucination_probability,
    policy_probability,
    shipped_models,
)
from groundwatch.judging.scoring import LabelPolicy, score
from groundwatch.rates import judge_error_rates
from groundwatch.types import Claim, Evidence, Judgement, Passage

CONTEXT = [
    "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.",
    "Gustave Eiffel's company designed and built the tower for the World's Fair.",
]


class _FixedJudge:
    def __init__(self, name: str, judgement: Judgement) -> None:
        self.name = name
        self.judgement = judgement

    def judge(self, answer, contexts, question):
        return self.judgement


def _brute_force(
    verdicts: list[str], confidences: list[float], min_f: float, min_g: float
) -> float:
    """Enumerate every outcome of every claim (backed, unsupported, contradicted)."""
    outcomes = []
    for v, k in zip(verdicts, confidences, strict=True):
        if v in ("supported", "inferred"):
            outcomes.append({"b": k, "u": 1 - k, "c": 0.0})
        elif v == "contradicted":
            outcomes.append({"b": 1 - k, "u": 0.0, "c": k})
        else:
            outcomes.append({"b": 1 - k, "u": k, "c": 0.0})
    n = len(verdicts)
    hallucinated = 0.0
    for combo in itertools.product("buc", repeat=n):
        p = math.prod(o[x] for o, x in zip(outcomes, combo, strict=True))
        faithfulness = 1 - combo.count("c") / n
        groundedness = combo.count("b") / n
        if not (faithfulness >= min_f and groundedness >= min_g):
            hallucinated += p
    return hallucinated


def test_policy_probability_small_cases() -> None:
    assert policy_probability(["supported"], [0.9], 1.0, 0.8) == pytest.approx(0.1)
    assert policy_probability(["contradicted"], [0.9], 1.0, 0.8) == pytest.approx(0.9)
    assert policy_probability(["unsupported"], [0.7], 1.0, 0.8) == pytest.approx(0.7)
    # Two backed claims: the default policy needs both (groundedness 0.5 < 0.8).
    assert policy_probability(["supported", "inferred"], [0.9, 0.9], 1.0, 0.8) == pytest.approx(
        1 - 0.81
    )
    # A claim without a confidence counts at the default.
    assert policy_probability(["supported"], [None], 1.0, 0.8) == pytest.approx(
        1 - DEFAULT_CONFIDENCE
    )


@pytest.mark.parametrize(("min_f", "min_g"), [(1.0, 0.8), (0.5, 0.5), (0.7, 1.0), (0.0, 0.0)])
def test_policy_probability_matches_enumeration(min_f: float, min_g: float) -> None:
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(1, 6)
        verdicts = [
            rng.choice(["supported", "inferred", "unsupported", "contradicted"]) for _ in range(n)
        ]
        confidences = [rng.random() for _ in range(n)]
        got = policy_probability(verdicts, confidences, min_f, min_g)
        assert got == pytest.approx(_brute_force(verdicts, confidences, min_f, min_g), abs=1e-9)


def _evidence(text: str) -> Evidence:
    start = CONTEXT[0].find(text)
    return Evidence(passage=0, start=start, end=start + len(text), quote=text)


@pytest.mark.parametrize(
    ("judgement", "label"),
    [
        (
            Judgement(
                claims=[
                    Claim(
                        text="The Eiffel Tower is in Paris.",
                        verdict="supported",
                        evidence=[_evidence("The Eiffel Tower is in Paris.")],
                        confidence=0.9,
                    )
                ]
            ),
            "grounded",
        ),
        (Judgement(claims=[Claim(text="It is blue.", verdict="unsupported")]), "hallucinated"),
        (Judgement(claims=[]), "no_claims"),
    ],
)
@pytest.mark.parametrize("judge_name", ["local", "openai", "cascade(local,openai)", "mine"])
def test_every_label_but_error_gets_a_probability(
    judgement: Judgement, label: str, judge_name: str
) -> None:
    answer = " ".join(c.text for c in judgement.claims) or "I do not know."
    ev = score(judgement, answer, [Passage(text=t) for t in CONTEXT], judge_name=judge_name)
    assert ev.label == label
    assert ev.hallucination_probability is not None
    assert 0.0 <= ev.hallucination_probability <= 1.0


def test_insufficient_context_gets_a_probability() -> None:
    ev = gw.evaluate("The tower is 330 metres tall.", ["Contents", "Chapter 1 .... 3"])
    assert ev.label == "insufficient_context"
    assert ev.hallucination_probability is not None
    assert 0.0 <= ev.hallucination_probability <= 1.0


def test_error_has_no_probability() -> None:
    judgement = Judgement(error="timed out", error_type="timeout", hallucination_probability=0.4)
    ev = score(judgement, "x", [Passage(text="y")], judge_name="local")
    assert ev.label == "error"
    assert ev.hallucination_probability is None


def test_a_judges_own_probability_wins_and_is_clipped() -> None:
    claims = [Claim(text="It is blue.", verdict="unsupported")]
    ev = score(Judgement(claims=claims, hallucination_probability=0.25), "It is blue.", [])
    assert ev.hallucination_probability == 0.25
    ev = score(Judgement(claims=claims, hallucination_probability=1.5), "It is blue.", [])
    assert ev.hallucination_probability == 1.0


def test_a_judge_without_a_model_gets_the_policy_probability() -> None:
    claims = [
        Claim(
            text="The Eiffel Tower is in Paris.",
            verdict="supported",
            evidence=[_evidence("The Eiffel Tower is in Paris.")],
            confidence=0.9,
        ),
        Claim(text="It is blue.", verdict="unsupported", confidence=0.6),
    ]
    answer = "The Eiffel Tower is in Paris. It is blue."
    passages = [Passage(text=t) for t in CONTEXT]
    ev = score(Judgement(claims=claims), answer, passages, judge_name="openai")
    # Grounded only if both are backed: 0.9 * 0.4.
    assert ev.hallucination_probability == pytest.approx(1 - 0.9 * 0.4)
    lenient = score(
        Judgement(claims=claims),
        answer,
        passages,
        judge_name="openai",
        policy=LabelPolicy(min_groundedness=0.5),
    )
    # Half backed is enough: grounded unless the supported claim is wrong and the other too.
    assert lenient.hallucination_probability == pytest.approx(1 - (1 - 0.1 * 0.6))
    none = score(Judgement(claims=[]), "I do not know.", passages, judge_name="openai")
    assert none.hallucination_probability == NO_CLAIMS_PROBABILITY


def test_a_fitted_model_is_picked_by_judge_and_script() -> None:
    claims = [Claim(text="It is blue.", verdict="unsupported", confidence=0.6)]
    models = {
        "mine": {
            "latin": AnswerModel(coef=(0.0,) * len(ANSWER_FEATURES), intercept=0.0, no_claims=0.3),
            "cjk": AnswerModel(coef=(0.0,) * len(ANSWER_FEATURES), intercept=2.0, no_claims=0.2),
        }
    }
    common = {"judge": "mine", "min_faithfulness": 1.0, "min_groundedness": 0.8, "models": models}
    assert hallucination_probability("hallucinated", claims, cjk=False, **common) == 0.5
    assert hallucination_probability("hallucinated", claims, cjk=True, **common) == pytest.approx(
        1 / (1 + math.exp(-2.0))
    )
    assert hallucination_probability("no_claims", [], cjk=False, **common) == 0.3
    assert hallucination_probability("error", claims, cjk=False, **common) is None


def test_the_shipped_local_model_orders_answers_sensibly() -> None:
    for script, model in shipped_models()["local"].items():
        base = answer_vector("grounded", ["supported", "supported"], [0.8, 0.8])
        flagged = answer_vector("hallucinated", ["supported", "unsupported"], [0.8, 0.8])
        assert model.probability(flagged) > model.probability(base), script
        # Less sure that the claims are backed: more likely hallucinated.
        weaker = answer_vector("grounded", ["supported", "supported"], [0.6, 0.6])
        assert model.probability(weaker) > model.probability(base), script
        assert 0.0 < model.no_claims < 0.5, script


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        (
            "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
            "The Eiffel Tower was completed in 1925 and is 120 metres tall.",
        ),
        (
            "Gustave Eiffel's company built the tower for the World's Fair.",
            "Napoleon ordered the tower to celebrate a victory over the British navy.",
        ),
    ],
)
def test_the_local_judge_puts_a_hallucinated_answer_above_a_faithful_one(
    good: str, bad: str
) -> None:
    p_good = gw.evaluate(good, CONTEXT).hallucination_probability
    p_bad = gw.evaluate(bad, CONTEXT).hallucination_probability
    assert p_good is not None and p_bad is not None
    assert p_bad > p_good + 0.2


def test_the_local_judge_in_chinese() -> None:
    context = ["2023年，该公司的营业收入为500万元，比上年增长了20%。"]
    p_good = gw.evaluate("该公司2023年营业收入为500万元。", context).hallucination_probability
    p_bad = gw.evaluate(
        "该公司2023年营业收入为800万元，利润翻倍。", context
    ).hallucination_probability
    assert p_good is not None and p_bad is not None
    assert p_bad > p_good + 0.2


def test_the_shipped_models_file_matches_the_features() -> None:
    models = shipped_models()
    assert set(models["local"]) == {"latin", "cjk"}
    for scripts in models.values():
        for model in scripts.values():
            assert len(model.coef) == len(probability.ANSWER_FEATURES)
            assert all(math.isfinite(c) for c in model.coef)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_local_judges_error_rates_ship(language: str) -> None:
    rates = judge_error_rates("local", language)
    assert rates is not None
    assert rates.sensitivity_low <= rates.sensitivity <= rates.sensitivity_high
    assert rates.specificity_low <= rates.specificity <= rates.specificity_high
    # Better than chance, measured on held-out sources; FaithBench is evaluation-only.
    assert rates.sensitivity + rates.specificity > 1.0
    assert "FaithBench" not in rates.sources
    assert rates.labelled == sum(int(s["labelled"]) for s in rates.sources.values())
    if language == "en":
        assert set(rates.sources) == {"AttributedQA", "ExpertQA", "LFQA", "Stanford-GenSearch"}


def test_no_error_rates_for_a_judge_not_measured() -> None:
    assert judge_error_rates("openai", "en") is None


@pytest.mark.parametrize(
    ("answer", "contexts"),
    [
        ("The Eiffel Tower was completed in 1889 and is 330 metres tall.", CONTEXT),
        ("The Eiffel Tower was completed in 1925. Napoleon designed it.", CONTEXT),
        ("Gustave Eiffel's company built it. It is in Paris. It is painted blue.", CONTEXT),
        ("I don't know.", CONTEXT),
        ("The tower is 330 metres tall.", ["Contents", "Chapter 1 .... 3"]),
        ("该公司2023年营业收入为800万元。", ["2023年，该公司的营业收入为500万元。"]),
    ],
)
def test_the_calibration_scripts_judge_as_scoring_does(answer: str, contexts: list[str]) -> None:
    """training/calibrate_rates.py and benchmarks/rates.py decide verdicts, labels and
    probabilities from cached measurements; with the shipped layers they must give what
    gw.evaluate gives, or their figures describe another judge."""
    import sys
    from pathlib import Path

    training = str(Path(__file__).resolve().parents[2] / "training")
    if training not in sys.path:
        sys.path.insert(0, training)
    from calibrate_local import measure
    from calibrate_rates import judge_answer, probability_of
    from rates_data import Answer

    from groundwatch.judging.judges.local._calibration import default_calibration

    row = {"answer": answer, "context": contexts, "question": "", "label": "faithful"}
    (measured,) = measure("test", [row])
    cjk = any("\u4e00" <= ch <= "\u9fff" for ch in answer)
    cached = Answer("test", "test", "zh" if cjk else "en", False, measured)
    judged = judge_answer(cached, default_calibration(), None)
    ev = gw.evaluate(answer, contexts)
    assert judged.label == ev.label
    assert judged.verdicts == [c.verdict for c in ev.claims]
    model = shipped_models()["local"]["cjk" if cjk else "latin"]
    assert probability_of(model, judged) == pytest.approx(ev.hallucination_probability)
