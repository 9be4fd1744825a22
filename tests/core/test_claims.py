"""Splitting answers into claims, English and Chinese, with offsets into the answer."""

from __future__ import annotations

import pytest

from groundwatch.judging.text.claims import is_claim, split_claims


def _texts(answer: str) -> list[str]:
    spans = split_claims(answer)
    for s in spans:
        assert answer[s.start : s.end] == s.text
    return [s.text for s in spans]


def test_english_sentences_keep_decimals_initials_and_abbreviations_whole() -> None:
    answer = (
        "The city has 2.1 million inhabitants. J. R. R. Tolkien lived in the U.S. for a year. "
        "Dr. Smith met Mr. Jones in St. Louis! Was it raining?"
    )
    assert _texts(answer) == [
        "The city has 2.1 million inhabitants.",
        "J. R. R. Tolkien lived in the U.S. for a year.",
        "Dr. Smith met Mr. Jones in St. Louis!",
    ]


def test_chinese_sentences() -> None:
    answer = "埃菲尔铁塔位于巴黎。它于1889年建成！它有多高？高度为330米；重约一万吨。"
    assert _texts(answer) == [
        "埃菲尔铁塔位于巴黎。",
        "它于1889年建成！",
        "高度为330米；",
        "重约一万吨。",
    ]


def test_compound_sentences_are_cut_into_clauses() -> None:
    answer = "The film grossed $181.7 million worldwide, but the studio still lost money on it."
    assert _texts(answer) == [
        "The film grossed $181.7 million worldwide",
        "but the studio still lost money on it.",
    ]
    zh = "该公司去年营收增长了百分之十二，但净利润大幅下降了三成。"
    assert _texts(zh) == ["该公司去年营收增长了百分之十二", "但净利润大幅下降了三成。"]
    # Short sides are not cut: "red and blue" is one statement.
    assert _texts("The flag is red, and blue.") == ["The flag is red, and blue."]


def test_a_serial_list_is_one_statement_not_clauses() -> None:
    # ", and" closing a list ("A, B, and C") does not start a new clause...
    listed = "Minor minerals such as apatite, zircon, and magnetite may be present in granite."
    assert _texts(listed) == [listed]
    # ...while ", and" after a long clause still does.
    answer = (
        "The museum opened its new wing in 2019, and the collection of modern paintings "
        "doubled within two years."
    )
    assert _texts(answer) == [
        "The museum opened its new wing in 2019",
        "and the collection of modern paintings doubled within two years.",
    ]


def test_bullets_and_headings() -> None:
    answer = (
        "Here is a summary of the passage:\n- Paris is the capital of France.\n"
        "2. It has 2.1 million people."
    )
    assert _texts(answer) == ["Paris is the capital of France.", "It has 2.1 million people."]


@pytest.mark.parametrize(
    "text",
    [
        "I don't know.",
        "I do not know the answer to that.",
        "I'm not sure.",
        "Sorry, I cannot help with that.",
        "Unfortunately, the context does not say.",
        "The provided passages do not mention the price.",
        "Thanks for asking!",
        "Hope this helps.",
        "Is it open on Sundays?",
        "我不知道。",
        "抱歉，我无法回答。",
        "文中没有提到价格。",
        "谢谢！",
        "这个博物馆周日开放吗？",
        "Summary:",
        "OK.",
        "1[1].",
        "2.",
    ],
)
def test_non_claims_are_skipped(text: str) -> None:
    assert not is_claim(text)
    assert split_claims(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital of France.",
        "它于1889年建成。",
        "Revenue rose 5%.",
        "The tower is 330 m.",
        "Thanks to the new law, prices fell by 5%.",
        "The following year, he moved to Paris.",
    ],
)
def test_claims_are_kept(text: str) -> None:
    assert is_claim(text)


def test_framing_is_left_out_of_the_claim() -> None:
    answer = (
        "The passage states that Paris is the capital of France. "
        "According to the article, the tower is 330 metres tall. 根据文章，该公司成立于1998年。"
    )
    assert _texts(answer) == [
        "Paris is the capital of France.",
        "the tower is 330 metres tall.",
        "该公司成立于1998年。",
    ]
