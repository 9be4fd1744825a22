"""The error classes found on unseen data, one test group per class, English and Chinese.

Each group is a mechanism, not an example: negation compared on the aligned clause, a value
conflict that an added clause cannot hide, quantities compared across notations and units,
and the Chinese path's alignment, entity, negation and causal checks.
"""

from __future__ import annotations

import pytest

import groundwatch as gw
from groundwatch.judging.text.numerals import extract_quantities
from testkit.zh_cases import CASES, PASSAGES

from ..extras import require_zh_extra


def verdict(answer: str, context: str) -> str:
    ev = gw.evaluate(answer, [context])
    assert len(ev.claims) == 1, ev.claims
    assert ev.claims[0].reason, "every verdict names what decided it"
    return ev.claims[0].verdict


# 1. Negation scope: a negation in another clause of the evidence sentence is not the claim's.
LOAN = "Loan applications are processed within 5 business days and have no processing fee."
MUSEUM = "The museum opens at 9 am on weekdays, but it is not open on public holidays."
APP = "The app is free to download, although it does not work without an internet connection."
LOAN_ZH = "该贷款申请在5个工作日内完成审批，并且不收取任何手续费，申请人需提供身份证明。"
MEDICINE_ZH = "这种药物可以缓解头痛症状，但是不能与酒精同时服用，孕妇应在医生指导下使用。"


@pytest.mark.parametrize(
    ("answer", "context", "expected"),
    [
        ("Loan applications are processed within 5 business days.", LOAN, "supported"),
        ("The museum opens at 9 am on weekdays.", MUSEUM, "supported"),
        ("The app is free to download.", APP, "supported"),
        ("该贷款申请在5个工作日内完成审批。", LOAN_ZH, "supported"),
        ("这种药物可以缓解头痛症状。", MEDICINE_ZH, "supported"),
        # The negated clause itself is still compared: flipping it is a contradiction.
        ("Loan applications have a processing fee.", LOAN, "contradicted"),
        ("The museum is open on public holidays.", MUSEUM, "contradicted"),
        ("该贷款申请需要收取手续费。", LOAN_ZH, "contradicted"),
        ("这种药物能与酒精同时服用。", MEDICINE_ZH, "contradicted"),
        # A claim negating a clause the evidence asserts.
        ("The museum does not open at 9 am on weekdays.", MUSEUM, "contradicted"),
        ("这种药物不能缓解头痛症状。", MEDICINE_ZH, "contradicted"),
    ],
)
def test_negation_is_compared_on_the_aligned_clause(
    answer: str, context: str, expected: str
) -> None:
    assert verdict(answer, context) == expected


# 2. A changed value stays a contradiction when the claim also adds something.
REFUND = "Refunds are issued within 30 days of the return being received."
BRIDGE = "The bridge, which opened in 1932, is 1,149 metres long."
REFUND_ZH = "退款将在收到退货后30天内发放，发放后会短信通知客户。"


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        (
            "Refunds are issued within 90 days of the return being received "
            "and include the original shipping costs.",
            REFUND,
        ),
        ("The bridge opened in 1937 and was designed by a famous French architect.", BRIDGE),
        ("The bridge is 2,000 metres long and carries six lanes of traffic.", BRIDGE),
        ("退款将在收到退货后90天内发放，并且包含全部运费和包装费用。", REFUND_ZH),
    ],
)
def test_a_value_conflict_is_not_hidden_by_an_added_clause(answer: str, context: str) -> None:
    ev = gw.evaluate(answer, [context])
    changed = [c for c in ev.claims if extract_quantities(c.text)]
    assert [c.verdict for c in changed] == ["contradicted"], ev.claims
    assert ev.label == "hallucinated"
    assert ev.faithfulness is not None and ev.faithfulness < 1.0


# 3. The same quantity in another notation or unit matches; a different one conflicts.
SAME_QUANTITY = [
    ("六十日", "60天"),
    ("三日", "3天"),
    ("两万", "20000"),
    ("两万人", "20,000人"),
    ("0.5克", "500毫克"),
    ("4 g", "4000 mg"),
    ("1.5 km", "1500 m"),
    ("90 minutes", "1.5 hours"),
    ("３个月", "3个月"),
    ("１２．５％", "12.5%"),
    ("百分之二十", "20%"),
    ("三点五亿元", "3.5亿元"),
    ("二百零一枚", "201枚"),
    ("1 year", "12 months"),
    ("半年", "6个月"),
]
OTHER_QUANTITY = [
    ("0.5克", "50毫克"),
    ("2 hours", "90 minutes"),
    ("1.5 km", "150 m"),
    ("三日", "30天"),
    ("3个月", "3年"),
    ("两万", "30000"),
]


@pytest.mark.parametrize(("a", "b"), SAME_QUANTITY)
def test_same_quantity_in_other_notation_matches(a: str, b: str) -> None:
    (qa,) = extract_quantities(a)
    (qb,) = extract_quantities(b)
    assert qa.matches(qb) and qb.matches(qa)


@pytest.mark.parametrize(("a", "b"), OTHER_QUANTITY)
def test_other_quantity_conflicts(a: str, b: str) -> None:
    (qa,) = extract_quantities(a)
    (qb,) = extract_quantities(b)
    assert qa.conflicts(qb) and qb.conflicts(qa)


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        ("退款将在六十日内到账。", "退款将在60天内到账，逾期未到账可联系客服处理。"),
        ("试用期为三日，期满后自动续费。", "试用期为3天，期满后自动续费，可随时取消订阅。"),
        ("共有两万人参加了这次马拉松比赛。", "共有20000人参加了这次马拉松比赛，创下历史纪录。"),
        ("每片含0.5克维生素C。", "每片含500毫克维生素C，成人每天服用一片即可。"),
        ("Each tablet contains 4 g of salt.", "Each tablet contains 4000 mg of salt."),
        ("The trail is 1.5 km long.", "The trail is 1500 m long and climbs steeply."),
        ("The film runs 90 minutes.", "The film runs 1.5 hours, including the credits."),
        ("营收为５００万元。", "该公司营收为500万元，同比增长12%。"),
    ],
)
def test_other_notation_is_supported_in_context(answer: str, context: str) -> None:
    assert verdict(answer, context) == "supported"


# 4. Chinese paraphrase, synthesis and format changes against hallucinations.
def _balanced_accuracy() -> tuple[float, list[str]]:
    hits = {True: 0, False: 0}
    totals = {True: 0, False: 0}
    misses: list[str] = []
    for key, answer, faithful in CASES:
        ev = gw.evaluate(answer, [PASSAGES[key]])
        grounded = ev.label in ("grounded", "no_claims")
        totals[faithful] += 1
        hits[faithful] += grounded == faithful
        if grounded != faithful:
            misses.append(f"{'faithful' if faithful else 'hallucinated'}: {answer} -> {ev.label}")
    return (hits[True] / totals[True] + hits[False] / totals[False]) / 2, misses


def test_chinese_set_is_large_and_balanced() -> None:
    assert len(CASES) >= 60
    faithful = sum(1 for _, _, f in CASES if f)
    assert abs(faithful - (len(CASES) - faithful)) <= 4


def test_chinese_paraphrase_vs_hallucination_balanced_accuracy() -> None:
    require_zh_extra()  # names and nouns the context lacks come from the segmenter
    ba, misses = _balanced_accuracy()
    assert ba >= 0.85, "\n".join(misses)


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        # cause and effect swapped
        ("由于公司追加生产订单，市场需求变得旺盛。", PASSAGES["phone"]),
        ("由于该公司净利润下降，原材料价格上涨了。", PASSAGES["profit"]),
        ("Heavy traffic caused the road closure.", "The road closure caused heavy traffic."),
        (
            "The price increase was caused by the higher demand.",
            "The higher demand was caused by the price increase, analysts said.",
        ),
    ],
)
def test_reversed_cause_and_effect_is_not_grounded(answer: str, context: str) -> None:
    assert gw.evaluate(answer, [context]).label == "hallucinated"


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        ("该公司第三季度净利润增长了15%。", PASSAGES["profit"]),
        ("Net profit rose 15% in the third quarter.", "Net profit fell 15% in the third quarter."),
        ("Sales increased sharply last year.", "Sales decreased sharply last year."),
    ],
)
def test_reversed_direction_is_a_contradiction(answer: str, context: str) -> None:
    assert verdict(answer, context) == "contradicted"


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        ("小米公司于2023年9月发布了新款手机Mate 60。", "phone"),
        ("受暴雨影响，上海市昨日关闭了12个地铁站。", "rain"),
        ("日本代表团获得201枚金牌，位列金牌榜第一。", "games"),
    ],
)
def test_chinese_entity_swap_is_unsupported(answer: str, key: str) -> None:
    require_zh_extra()
    ev = gw.evaluate(answer, [PASSAGES[key]])
    assert ev.label == "hallucinated"
    assert ev.claims[0].verdict in ("unsupported", "contradicted")


def test_titles_are_names_without_the_extra() -> None:
    ev = gw.evaluate("该成果发表在《自然》杂志上。", [PASSAGES["study"]])
    assert ev.claims[0].verdict == "unsupported"
    assert "自然" in ev.claims[0].reason
