"""Prompt building: trimming keeps verbatim text and passage numbers; markers are unguessable."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groundwatch.judging.judges._prompt import build_prompt, new_nonce, trim_passages
from groundwatch.judging.scoring import locate_quote
from groundwatch.judging.text.lexical import estimate_tokens
from groundwatch.types import Passage

_WORDS = ["tower", "metres", "Paris", "1889", "2.1", "公司", "收入", "the", "is", "of", "river"]
_sentence = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(
    lambda ws: " ".join(ws) + st_end(ws)
)


def st_end(ws: list[str]) -> str:
    return "。" if ws[-1] in ("公司", "收入") else "."


_passage = st.lists(_sentence, min_size=1, max_size=30).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    passages=st.lists(_passage, min_size=1, max_size=6),
    answer=_sentence,
    budget=st.integers(min_value=20, max_value=400),
)
def test_trimmed_text_is_verbatim_and_quotes_map_back(
    passages: list[str], answer: str, budget: int
) -> None:
    shown, trimmed = trim_passages(passages, answer, None, budget)
    assert len(shown) == len(passages)
    for i, text in enumerate(shown):
        if text is None:
            assert i in trimmed
            continue
        if i not in trimmed:
            assert text == passages[i]
        for piece in text.split("[...]"):
            if piece.strip():
                assert piece.strip() in passages[i]
                assert locate_quote(passages[i], piece.strip()) is not None
    kept = sum(estimate_tokens(t) for t in shown if t is not None)
    if trimmed:
        assert kept <= budget + 4 * len(passages)  # "[...]" markers are not budgeted


def test_cost_follows_the_answer_not_the_context() -> None:
    relevant = "The Millau Viaduct is 343 metres tall."
    filler = " ".join(f"Clause {k} covers heating pipes in district {k}." for k in range(300))
    answer = "The Millau Viaduct is 343 metres tall."
    small = build_prompt(
        answer, [Passage(text=filler[:3000] + " " + relevant)], None, max_context_tokens=200
    )
    large = build_prompt(
        answer,
        [Passage(text=filler)] * 4 + [Passage(text=filler + " " + relevant + " " + filler)],
        None,
        max_context_tokens=200,
    )
    assert relevant in small.messages[1]["content"] and relevant in large.messages[1]["content"]
    assert len(large.messages[1]["content"]) < 1.5 * len(small.messages[1]["content"])
    assert large.context_tokens > 20 * small.context_tokens


def test_nonce_avoids_text_that_contains_it() -> None:
    nonce = new_nonce([])
    assert nonce.startswith("gw") and len(nonce) == 14
    assert all(new_nonce([f"gw{n:012x}"]) for n in range(3))
