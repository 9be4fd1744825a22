"""MiniCheck's document chunks: NLTK's Punkt sentences, packed into chunks of a size.

The authors (``minicheck/inference.py``, Liyan06/MiniCheck) split the document at every newline,
split each line into sentences with ``nltk.sent_tokenize`` (Punkt, English), keep a newline
marker between lines, and pack the sentences greedily into chunks of at most ``chunk_size``
units: word pieces of the model's tokenizer (RoBERTa, DeBERTa; each sentence counted without
special tokens and cut at the model's length) or whitespace-separated words (Flan-T5). A
sentence that would overflow the chunk starts the next one; the chunk's text is its sentences
joined by spaces, with `` \\n `` turned back into a newline, stripped; empty chunks are dropped.
This module does the same, and also remembers where each chunk's sentences are in the
document, so the judge can quote the chunk that backs a claim.

Why NLTK with bundled data: the chunk boundaries (and so the scores) depend on exactly where
Punkt ends a sentence, which rests on its trained English parameters (abbreviations,
collocations, sentence starters, orthographic context). NLTK's own ``PunktSentenceTokenizer``
with those parameters is the authors' splitter by construction; the parameters would otherwise
have to be downloaded (``nltk.download("punkt_tab")``), which a judge must not do at run time,
so the English ``punkt_tab`` model (nltk_data, MIT licence: ``punkt_english/NOTICE``) ships in
``punkt_english/`` (100 KB gzipped), read into NLTK's parameter object as NLTK reads it. A
hand-written splitter would have to carry the same parameters and re-implement Punkt's rules:
more code to keep exact than the dependency (pure Python) it saves.
"""

from __future__ import annotations

import gzip
import importlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

NEWLINE = "\n"
"""The marker the authors keep between a document's lines."""

_DATA = "punkt_english"
_tokenizer: Any = None
_tokenizer_lock = threading.Lock()


def _lines(name: str) -> Iterator[str]:
    """The lines of one bundled Punkt file, without their newline (as NLTK's ``rm_nl``)."""
    raw = resources.files(__package__).joinpath(_DATA).joinpath(name + ".gz").read_bytes()
    for line in gzip.decompress(raw).decode("utf-8").splitlines(keepends=True):
        yield line[:-1] if line.endswith("\n") else line


def punkt() -> Any:
    """NLTK's Punkt sentence tokenizer with the bundled English parameters (loaded once)."""
    global _tokenizer
    with _tokenizer_lock:
        if _tokenizer is None:
            from collections import defaultdict

            punkt_module = importlib.import_module("nltk.tokenize.punkt")
            params = punkt_module.PunktParameters()
            params.collocations = {tuple(x.split("\t")) for x in _lines("collocations.tab")}
            params.sent_starters = set(_lines("sent_starters.txt"))
            params.abbrev_types = set(_lines("abbrev_types.txt"))
            params.ortho_context = defaultdict(
                int, {k: int(v) for k, v in (x.split("\t") for x in _lines("ortho_context.tab"))}
            )
            _tokenizer = punkt_module.PunktSentenceTokenizer(params)
        return _tokenizer


@dataclass(frozen=True)
class Sentence:
    """One of the authors' sentence units: a sentence, or the newline marker between lines."""

    text: str
    start: int
    """Offset in the document (the marker's: the newline's)."""
    end: int


def sentences(document: str) -> list[Sentence]:
    """The document's sentences and newline markers, in the authors' order
    (``sent_tokenize_with_newlines``), with their offsets."""
    tokenizer = punkt()
    out: list[Sentence] = []
    offset = 0
    for line in document.split(NEWLINE):
        out.extend(
            Sentence(line[s:e], offset + s, offset + e) for s, e in tokenizer.span_tokenize(line)
        )
        offset += len(line)
        out.append(Sentence(NEWLINE, offset, offset + 1))
        offset += 1
    return out[:-1]


@dataclass(frozen=True)
class Chunk:
    """A chunk of the document as the model reads it, and where its sentences are."""

    text: str
    start: int
    """Offset of its first sentence in the document."""
    end: int
    """End of its last sentence."""


def chunks(document: str, size: int, count: Callable[[Sequence[str]], list[int]]) -> list[Chunk]:
    """The authors' chunks of ``document``: sentences packed greedily while their ``count``
    (word pieces or words per sentence, computed for all sentences at once) stays within
    ``size``; empty chunks dropped."""
    units = sentences(document) or [Sentence("", 0, 0)]
    sizes = count([u.text for u in units])
    groups: list[list[Sentence]] = []
    current: list[Sentence] = []
    filled = 0
    for unit, n in zip(units, sizes, strict=True):
        if filled + n > size:
            groups.append(current)  # may be empty (a first sentence over size): dropped below
            current, filled = [unit], n
        else:
            current.append(unit)
            filled += n
    if current:
        groups.append(current)
    out: list[Chunk] = []
    for group in groups:
        text = " ".join(u.text for u in group).replace(" \n ", "\n").strip()
        if text:
            spoken = [u for u in group if u.text.strip()]
            out.append(Chunk(text, spoken[0].start, spoken[-1].end))
    return out


def words(texts: Sequence[str]) -> list[int]:
    """Whitespace-separated words per text: Flan-T5's chunk unit."""
    return [len(t.split()) for t in texts]
