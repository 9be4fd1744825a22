"""MiniCheck's document chunks without a model: the bundled Punkt data splits sentences exactly as
``nltk.sent_tokenize`` does with NLTK's own ``punkt_tab`` download, and chunks pack them as the
authors' code does (sizes, newline markers, a sentence longer than a chunk, offsets).

NLTK's ``punkt_tab`` data, for the comparison, is the copy the llama-index-core wheel ships
(requirements-dev.txt installs it with the LlamaIndex integration).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

from groundwatch.judging.judges.minicheck import _chunks
from groundwatch.judging.judges.minicheck._chunks import NEWLINE, chunks, sentences, words

CORPUS = (Path(__file__).parent / "fixtures/minicheck/corpus.txt").read_text("utf-8")
TRICKY = [
    "Dr. Smith arrived at 10 a.m. on Jan. 5. He left at noon.",
    "The U.S. economy grew 2.5% in Q3. Analysts, e.g. those at the Fed, expected less.",
    '"Stop!" she said. "Why?" he asked... Nobody answered.',
    "Prof. Lee (Ph.D.) wrote it. See Vol. 12, No. 3, pp. 4-5. It is short.",
    "  leading spaces. trailing spaces.  ",
    "",
    "One line\nand another line. With two sentences.\n\n\nAfter blank lines.",
    "北京是中国的首都。北京有很多博物馆。 And an English sentence. Another one!",
]


def _nltk_data() -> Path:
    if importlib.util.find_spec("nltk") is None:
        if os.environ.get("CI"):
            pytest.fail("nltk is missing in CI (the detectors extras and llama-index-core)")
        pytest.skip("needs nltk (the detectors extra)")
    spec = importlib.util.find_spec("llama_index.core")
    if spec is None or spec.origin is None:
        if os.environ.get("CI"):
            pytest.fail("llama-index-core is missing in CI (requirements-dev.txt)")
        pytest.skip("needs llama-index-core, whose wheel ships NLTK's punkt_tab data")
    return Path(spec.origin).parent / "_static" / "nltk_cache"


def _nltk_sentences(text: str, data: Path) -> list[str]:
    """The authors' ``sent_tokenize_with_newlines``, with NLTK's own data."""
    import nltk

    if str(data) not in nltk.data.path:
        nltk.data.path.insert(0, str(data))
    out: list[str] = []
    for line in text.split(NEWLINE):
        out.extend(nltk.sent_tokenize(line))
        out.append(NEWLINE)
    return out[:-1]


def test_the_bundled_punkt_data_is_nltks() -> None:
    data = _nltk_data() / "tokenizers" / "punkt_tab" / "english"
    bundled = Path(_chunks.__file__).parent / "punkt_english"
    for name in ("abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt"):
        ours = gzip.decompress((bundled / f"{name}.gz").read_bytes())
        assert (
            hashlib.sha256(ours).hexdigest()
            == hashlib.sha256(data.joinpath(name).read_bytes()).hexdigest()
        )
        assert hashlib.sha256(ours).hexdigest() in (bundled / "NOTICE").read_text("utf-8")


@pytest.mark.parametrize("text", [CORPUS, *CORPUS.splitlines(), *TRICKY])
def test_sentences_are_nltks_sent_tokenize_per_line(text: str) -> None:
    expected = _nltk_sentences(text, _nltk_data())
    got = sentences(text)
    assert [s.text for s in got] == expected
    assert all(text[s.start : s.end] == s.text for s in got)  # offsets in the document


def test_a_naive_splitter_would_differ() -> None:
    """The tricky texts are tricky: splitting at every full stop disagrees with Punkt."""
    naive = [s.strip() + "." for s in TRICKY[0].split(".") if s.strip()]
    assert [s.text for s in sentences(TRICKY[0])] != naive


def _pieces(texts: list[str]) -> list[int]:
    return [len(t) for t in texts]  # one "piece" per character: easy to reason about


def test_chunks_pack_sentences_greedily_and_keep_line_breaks() -> None:
    document = "Aa aa. Bb bb.\nCc cc. Dd dd."
    # Units: "Aa aa." (6), "Bb bb." (6), the line break (1), "Cc cc." (6), "Dd dd." (6).
    got = chunks(document, 13, _pieces)  # the line break still fits the first chunk
    assert [c.text for c in got] == ["Aa aa. Bb bb.", "Cc cc. Dd dd."]
    got = chunks(document, 12, _pieces)  # it starts the second, which "Dd dd." overflows
    assert [c.text for c in got] == ["Aa aa. Bb bb.", "Cc cc.", "Dd dd."]
    assert [document[c.start : c.end] for c in got] == [c.text for c in got]
    one = chunks(document, 100, _pieces)
    assert [c.text for c in one] == ["Aa aa. Bb bb.\nCc cc. Dd dd."]  # " \n " -> "\n"
    assert (one[0].start, one[0].end) == (0, len(document))


def test_a_sentence_longer_than_a_chunk_gets_a_chunk_of_its_own() -> None:
    document = "Short one. " + "A very long sentence " * 5 + "ends here. Tail."
    got = chunks(document, 20, _pieces)
    assert got[0].text == "Short one."
    assert got[1].text.startswith("A very long sentence") and got[-1].text == "Tail."
    # A first sentence over the size: the authors' empty first chunk is dropped.
    assert chunks("A very long sentence indeed. Tail.", 5, _pieces)[0].text.startswith("A very")


def test_flan_t5_counts_words_and_empty_documents_have_no_chunks() -> None:
    assert words(["one two  three", "\n", ""]) == [3, 0, 0]
    assert chunks("", 10, words) == []
    assert chunks(" \n \n ", 10, words) == []
