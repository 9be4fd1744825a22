"""Splitting answers into checkable claims, for English and Chinese text."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE = re.compile(r"[^.!?。！？；\n]+(?:[.!?。！？；]+|\n|$)")
_NON_CLAIM = re.compile(
    r"^\s*(i don'?t know|i do not know|i'?m not sure|i cannot|i can'?t|sorry|unfortunately,? i"
    r"|thank you|thanks|hello|hi\b|you'?re welcome|我不知道|抱歉|对不起|不清楚|谢谢)",
    re.I,
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class ClaimSpan:
    """A claim's text and its offsets in the answer (``answer[start:end] == text``)."""

    text: str
    start: int
    end: int


def split_claims(answer: str) -> list[ClaimSpan]:
    """Split an answer into sentence-level claims, skipping questions, refusals and filler."""
    spans: list[ClaimSpan] = []
    for m in _SENTENCE.finditer(answer):
        raw = m.group(0)
        lead = len(raw) - len(raw.lstrip())
        text = raw.strip()
        if not text or text.endswith(("?", "？")) or _NON_CLAIM.match(text):
            continue
        if len(_WORD.findall(text)) < 2 and len(text) < 4:
            continue
        start = m.start() + lead
        spans.append(ClaimSpan(text=text, start=start, end=start + len(text)))
    return spans
