"""What people read: passages numbered from 1 in every reason, the reason's closest sentence
the one a report points at (``LocalJudge.closest``), and counts in the singular when one."""

from __future__ import annotations

import re

import pytest

import groundwatch as gw
from groundwatch import LocalJudge, Passage
from groundwatch.judging.scoring import counted

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889 for the World's Fair."
OTHER = "Gustave Eiffel's company built it. The tower is repainted every seven years."
# Claims the local judge leaves unsupported with a reason naming the closest sentence.
WEAK = ["The tower was finished quickly.", "The Eiffel Tower is made of painted iron lattice."]


@pytest.mark.parametrize("answer", WEAK)
@pytest.mark.parametrize("contexts", [[PASSAGE], [OTHER, PASSAGE]], ids=["one", "two"])
def test_reasons_number_passages_from_1_and_name_the_sentence_a_report_shows(
    answer: str, contexts: list[str]
) -> None:
    question = "Tell me about the Eiffel Tower."
    evaluation = gw.evaluate(answer, contexts, question=question)
    [claim] = evaluation.claims
    assert claim.verdict == "unsupported"
    found = re.search(r"closest sentence \(passage (\d+): (['\"])(.*?)\2\)", claim.reason)
    assert found, claim.reason
    number, snippet = int(found.group(1)), found.group(3).removesuffix("...")
    pointer = LocalJudge().closest(claim.text, [Passage(text=t) for t in contexts], question)
    assert pointer is not None
    passage, start, end = pointer
    # Numbered from 1 for people (Evidence.passage stays a 0-based index).
    assert number == passage + 1
    assert contexts[passage][start:end].startswith(snippet)
    assert "passage 0" not in claim.reason


def test_closest_is_none_when_no_sentence_shares_a_word() -> None:
    assert LocalJudge().closest("Zebras gallop.", [Passage(text=PASSAGE)]) is None


def test_counts_are_singular_for_one() -> None:
    assert counted(1, "claim") == "1 claim"
    assert counted(0, "claim") == "0 claims"
    assert counted(2, "passage") == "2 passages"
    assert counted(1, "retrieved passage") == "1 retrieved passage"
    one = gw.evaluate("The Eiffel Tower stands 330 metres tall.", [PASSAGE])
    assert one.explanation.endswith(" of 1 claim"), one.explanation
    two = gw.evaluate(
        "The Eiffel Tower stands 330 metres tall. It was finished in 1889.", [PASSAGE]
    )
    assert two.explanation.endswith(" of 2 claims"), two.explanation
