"""Property tests: arbitrary text never crashes evaluate(), and offsets always hold."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import groundwatch as gw
from groundwatch.judging.text.claims import split_claims

# Fragments that exercise the interesting paths (numbers, units, CJK, negation, punctuation),
# mixed with arbitrary unicode.
_FRAGMENTS = st.sampled_from(
    [
        "Paris",
        "is",
        "not",
        "the",
        "capital",
        "$181.7 million",
        "181,674,817",
        "5.4%",
        "3 months",
        "2019",
        "[3]",
        "U.S.",
        "。",
        "！",
        "？",
        "；",
        ". ",
        "? ",
        ", but ",
        "\n",
        "500万",
        "3个月",
        "没有",
        "不断",
        "埃菲尔铁塔",
        "位于巴黎",
        "三年",
        "I don't know",
        "…",
        "\u200b",
        "ﬁ",
        "İ",
    ]
)
_TEXT = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=40).map(" ".join),
    st.lists(_FRAGMENTS, max_size=40).map("".join),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=_TEXT,
    contexts=st.lists(_TEXT, max_size=4),
    question=st.one_of(st.none(), _TEXT),
)
def test_random_text_never_crashes_and_offsets_hold(
    answer: str, contexts: list[str], question: str | None
) -> None:
    ev = gw.evaluate(answer, contexts, question=question)
    assert ev.label in ("grounded", "hallucinated", "insufficient_context", "no_claims")
    assert ev.evidence_rejected == 0  # the local judge quotes exactly
    for claim in ev.claims:
        assert claim.start is not None and claim.end is not None
        assert answer[claim.start : claim.end] == claim.text
        assert claim.confidence is not None and 0.0 <= claim.confidence <= 1.0
        for e in claim.evidence:
            assert contexts[e.passage][e.start : e.end] == e.quote
    if ev.label == "no_claims":
        assert ev.faithfulness is None and ev.groundedness is None
    else:
        assert ev.faithfulness is not None and 0.0 <= ev.faithfulness <= 1.0
        assert ev.groundedness is not None and 0.0 <= ev.groundedness <= 1.0


@settings(max_examples=200, deadline=None)
@given(answer=_TEXT)
def test_claim_spans_are_ordered_substrings(answer: str) -> None:
    spans = split_claims(answer)
    last_end = 0
    for s in spans:
        assert answer[s.start : s.end] == s.text
        assert s.text == s.text.strip() and s.text
        assert s.start >= last_end
        last_end = s.end
