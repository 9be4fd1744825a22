"""LettuceDetectJudge.spans equals the authors' code on the same weights.

The reference is ``lettucedetect`` from PyPI (``HallucinationDetector(method="transformer",
model_path=...).predict(..., output_format="spans")``), run live on a tiny random-weight
ModernBERT token classifier in the published checkpoint's layout (``lettuce_checkpoint``).
``lettucedetect`` pulls in PyTorch, scikit-learn and the OpenAI client, so the dev requirements
leave it out and these tests skip there; ``.ci/run`` runs them in a venv of their own with
``GROUNDWATCH_TEST_LETTUCEDETECT`` set, where a missing package fails them.

The drift tests change one thing the authors' layout fixes (the label index, the truncation
side, the prompt, the answer's position) and check that the comparison then fails, so the
equality above cannot pass by accident.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lettuce_checkpoint import eurobert_folder, modernbert_folder

STEP = "GROUNDWATCH_TEST_LETTUCEDETECT"

try:
    import torch  # noqa: F401
    from lettucedetect.models.inference import HallucinationDetector
except ImportError:
    if os.environ.get(STEP):
        pytest.fail(f"lettucedetect and torch are missing with {STEP} set", pytrace=False)
    pytest.skip(
        "needs lettucedetect from PyPI (.ci/run tests it in its own step)",
        allow_module_level=True,
    )

from groundwatch.judging.judges.lettucedetect import (  # noqa: E402
    LettuceDetectJudge,
    _layout,
    _prompts,
)

TOLERANCE = 1e-5

PASSAGES = [
    "The Eiffel Tower is 330 metres tall and was finished in 1889 for the World's Fair.",
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in Seville; "
    "today the business employs 250 people.",
    "It was designed by the company of Gustave Eiffel and is made of wrought iron.",
]
ANSWER = (
    "The Eiffel Tower is 330 metres tall. It was finished in 1925 by Ana Ortega, and it "
    "employs 250 people in 12 countries."
)

# (passages, answer, question, lang, max_length): one window; the summary prompt; other
# languages' prompts; several windows (the passages grouped); a passage cut (only_first);
# an answer that starts with a space (offsets from its first token); no passages.
CASES: dict[str, tuple[list[str], str, str | None, str, int]] = {
    "qa": (PASSAGES, ANSWER, "How tall is the tower?", "en", 4096),
    "summary": (PASSAGES, ANSWER, None, "en", 4096),
    "german": (PASSAGES, ANSWER, "Wie hoch ist der Turm?", "de", 4096),
    "chinese": (
        ["公司成立于1998年。", *PASSAGES[:1]],
        "公司成立于1925年。",
        "公司何时成立？",
        "cn",
        4096,
    ),
    "windows": (PASSAGES * 3, ANSWER, "How tall is the tower?", "en", 260),
    "cut": ([" ".join(PASSAGES * 4)], ANSWER, "How tall is the tower?", "en", 200),
    "leading space": (PASSAGES, "  " + ANSWER, "How tall?", "en", 4096),
    "no passages": ([], ANSWER, "How tall?", "en", 4096),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return modernbert_folder(tmp_path_factory.mktemp("lettuce") / "checkpoint")


_authors: dict[tuple[Path, str, int], Any] = {}


def theirs(folder: Path, lang: str, max_length: int) -> Any:
    key = (folder, lang, max_length)
    if key not in _authors:
        _authors[key] = HallucinationDetector(
            method="transformer", model_path=str(folder), lang=lang, max_length=max_length,
            device="cpu",
        )  # fmt: skip
    return _authors[key]


def same(ours: list[dict[str, Any]], reference: list[dict[str, Any]]) -> bool:
    """The same spans (offsets and text exactly), confidences within TOLERANCE."""
    if len(ours) != len(reference):
        return False
    for a, b in zip(ours, reference, strict=True):
        if set(a) != set(b) or (a["start"], a["end"], a["text"]) != (
            b["start"],
            b["end"],
            b["text"],
        ):
            return False
        if abs(a["confidence"] - b["confidence"]) > TOLERANCE:
            return False
    return True


@pytest.mark.parametrize("case", list(CASES))
def test_spans_equal_the_authors(checkpoint: Path, case: str) -> None:
    passages, answer, question, lang, max_length = CASES[case]
    judge = LettuceDetectJudge(checkpoint, lang=lang, max_length=max_length)
    reference = theirs(checkpoint, lang, max_length).predict(
        passages, answer, question, output_format="spans"
    )
    ours = judge.spans(passages, answer, question)
    assert reference, "the tiny model flags nothing: the comparison would prove little"
    assert same(ours, reference), (ours, reference)
    if case == "windows":
        assert len(judge._layout.windows(passages, question, answer)) > 1
    if case == "cut":
        (window,) = judge._layout.windows(passages, question, answer)
        assert len(window.ids) == max_length


def test_token_probabilities_equal_the_authors(checkpoint: Path) -> None:
    """The probabilities behind the judge's claims are the authors' token probabilities."""
    passages, answer, question, lang, max_length = CASES["qa"]
    judge = LettuceDetectJudge(checkpoint)
    reference = theirs(checkpoint, lang, max_length).predict(
        passages, answer, question, output_format="tokens"
    )
    probs = [t["prob"] for t in reference[:-1]]  # their list ends with the final separator
    ours = [p for _, _, p in judge.reading(passages, answer, question).tokens]
    assert len(ours) == len(probs)
    assert max(abs(a - b) for a, b in zip(ours, probs, strict=True)) <= TOLERANCE


@pytest.fixture
def drift(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch


DRIFTS = {
    "label index": ("qa", lambda m: m.setattr(_layout, "HALLUCINATED", 0)),
    "truncation side": ("cut", lambda m: m.setattr(_layout, "TRUNCATION_SIDE", "left")),
    "truncated sequence": ("cut", lambda m: m.setattr(_layout, "TRUNCATION", "only_second")),
    "prompt": (
        "qa",
        lambda m: m.setitem(
            _prompts.PROMPTS, "en", _prompts.PROMPTS["en"]._replace(qa="${question}\n${context}")
        ),
    ),
    "answer position": ("qa", lambda m: m.setattr(_layout, "SPECIAL_AFTER_ANSWER", 0)),
    "passage grouping": ("windows", lambda m: m.setattr(_layout.Layout, "groups", _one_group)),
}


def _one_group(self: Any, contexts: Any, question: Any, answer: Any) -> list[list[str]]:
    return [list(contexts)]


@pytest.mark.parametrize("what", list(DRIFTS))
def test_a_drift_fails_the_comparison(
    checkpoint: Path, drift: pytest.MonkeyPatch, what: str
) -> None:
    case, change = DRIFTS[what]
    passages, answer, question, lang, max_length = CASES[case]
    reference = theirs(checkpoint, lang, max_length).predict(
        passages, answer, question, output_format="spans"
    )
    change(drift)
    judge = LettuceDetectJudge(checkpoint, lang=lang, max_length=max_length)
    try:
        ours = judge.spans(passages, answer, question)
    except ValueError:
        return  # the drifted layout cannot even read the case: caught as well
    assert not same(ours, reference)


def test_eurobert_without_remote_code(tmp_path: Path) -> None:
    """A multilingual (EuroBERT) checkpoint whose config names the EuroBERT repository's code
    loads into transformers' own EuroBERT classes, and reads as the authors' code reads it."""
    import transformers

    if not hasattr(transformers, "EuroBertForTokenClassification"):
        pytest.skip("EuroBERT is built into transformers from 5.3")
    folder = eurobert_folder(tmp_path / "eurobert")
    judge = LettuceDetectJudge(folder, lang="de")
    assert (
        type(judge._classifier._model).__module__
        == "transformers.models.eurobert.modeling_eurobert"
    )
    passages = ["Die Firma wurde 1998 gegründet.", "Sie beschäftigt heute 250 Personen."]
    answer = "Die Firma wurde 1925 gegründet und beschäftigt 250 Personen in 12 Ländern."
    reference = theirs(folder, "de", 4096).predict(passages, answer, "Wann?", output_format="spans")
    assert reference
    assert same(judge.spans(passages, answer, "Wann?"), reference)
