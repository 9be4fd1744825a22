"""``groundwatch.testing.assert_grounded`` with the real local judge, as users call it."""

from __future__ import annotations

import pytest

import groundwatch.testing
from groundwatch.testing import assert_grounded

from .conftest import ScriptedJudge

CONTEXTS = [
    "The Eiffel Tower, completed in 1889, stands 330 metres tall.",
    "It was designed by the engineering firm of Gustave Eiffel for the World's Fair.",
]


def test_exported_for_star_imports() -> None:
    assert "assert_grounded" in groundwatch.testing.__all__


def test_a_verbatim_answer_passes_and_returns_the_evaluation() -> None:
    ev = assert_grounded(
        "The Eiffel Tower, completed in 1889, stands 330 metres tall.",
        CONTEXTS,
        question="How tall is the tower?",
    )
    assert ev.label == "grounded" and ev.groundedness == 1.0


def test_a_chinese_verbatim_answer_passes() -> None:
    ev = assert_grounded(
        "埃菲尔铁塔于1889年建成，高330米。", ["埃菲尔铁塔位于法国巴黎，于1889年建成，高330米。"]
    )
    assert ev.groundedness == 1.0


def test_an_invented_claim_fails_with_the_claim_and_its_closest_passage() -> None:
    answer = (
        "The Eiffel Tower, completed in 1889, stands 330 metres tall. "
        "The engineering firm of Gustave Eiffel painted it gold for the Olympic Games."
    )
    with pytest.raises(AssertionError) as info:
        assert_grounded(answer, CONTEXTS)
    message = str(info.value)
    assert message.startswith("answer is not grounded: groundedness 0.50 < required 1.00")
    assert "[unsupported] 'The engineering firm of Gustave Eiffel painted it gold" in message
    # The supported claim is not listed; the reader is pointed at the nearest passage text.
    assert "330 metres tall.'" not in message
    assert 'closest passage text: passage 2: "It was designed by the engineering firm' in message


def test_min_groundedness_relaxes_the_check() -> None:
    answer = (
        "The Eiffel Tower, completed in 1889, stands 330 metres tall. "
        "Napoleon lived in it for ten years."
    )
    ev = assert_grounded(answer, CONTEXTS, min_groundedness=0.5)
    assert ev.groundedness == 0.5
    with pytest.raises(AssertionError):
        assert_grounded(answer, CONTEXTS, min_groundedness=0.51)


def test_contradicted_claims_are_listed_with_their_evidence() -> None:
    answer = "The tower was completed in 1899. It stands 330 metres tall."
    judge = ScriptedJudge(
        {
            "The tower was completed in 1899.": ("contradicted", "completed in 1889"),
            "It stands 330 metres tall.": ("supported", "stands 330 metres tall"),
        }
    )
    with pytest.raises(AssertionError) as info:
        assert_grounded(answer, CONTEXTS, judge=judge, min_groundedness=0.5)
    message = str(info.value)
    assert "1 contradicted claim (allowed 0)" in message
    assert "[contradicted] 'The tower was completed in 1899.'" in message
    assert 'best evidence: passage 1 [18:35]: "completed in 1889"' in message
    # Tolerated when asked.
    ev = assert_grounded(answer, CONTEXTS, judge=judge, min_groundedness=0.5, allow_contradicted=1)
    assert ev.verdict_counts["contradicted"] == 1


def test_an_answer_without_claims_fails_unless_nothing_is_required() -> None:
    with pytest.raises(AssertionError, match="makes no checkable claim"):
        assert_grounded("I don't know.", CONTEXTS)
    assert assert_grounded("I don't know.", CONTEXTS, min_groundedness=0).label == "no_claims"


def test_a_judge_failure_fails_loudly() -> None:
    class Broken:
        name = "broken"

        def judge(self, answer: str, contexts: object, question: object) -> None:
            raise RuntimeError("endpoint down")

    with pytest.raises(AssertionError, match="judge 'broken' failed: RuntimeError: endpoint down"):
        assert_grounded("The tower is tall.", CONTEXTS, judge=Broken())  # type: ignore[arg-type]
