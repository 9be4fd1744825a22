"""Splitting answers into checkable claims, for English and Chinese text.

An answer is cut into sentences (``. ! ?`` followed by a space, and ``。！？；`` anywhere), then
sentences that make several statements are cut into clauses (``;``, ", and", ", but", "，但",
"，而" ... when both sides say something checkable). What is not a claim is skipped: questions,
refusals and "I don't know", hedges about the context ("the passage does not say"), pleasantries
and headings such as "Here is a summary:". Offsets always point into the original answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexical import units
from .numerals import extract_quantities

# A sentence ends at . ! ? (followed by the end, or by a space and no lower-case letter) or at
# CJK enders, or at a line break. "2.1" stays whole (no space after the dot); initials, "U.S.",
# "Dr." and list numbers ("2.") are recognised in _sentences and do not end a sentence.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s*$|\s+(?![a-z]))|[。！？；]+[”’」』）)]*|\n+")
# Abbreviations after which a full stop does not end the sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st vs jr sr prof inc ltd co corp no fig e.g i.e etc".split()
)
# "2." at the start of a line is a list number, not a sentence.
_LIST_NUMBER = re.compile(r"\s*\d{1,3}")
_CLAUSE_BREAK = re.compile(
    r";\s+|,\s+(?:and|but|while|whereas|although|though|yet)\s+|，(?:但|但是|而|而且|并且|同时|却)"
)
_BULLET = re.compile(r"(?:[-*•·]+|\d{1,2}[.)]|[（(]?\d{1,2}[)）]|#+)\s+")

_NON_CLAIM = re.compile(
    r"^\W*(?:"
    r"i\s+(?:do\s+not|don'?t|cannot|can'?t|am\s+not\s+sure|am\s+unable)"
    r"|i'?m\s+(?:not\s+sure|unable|afraid)"
    r"|i\s+(?:have\s+no|couldn'?t|could\s+not|did\s+not|didn'?t)\s+(?:find|know|information)"
    r"|(?:sorry|apologies|unfortunately),?\s+(?:i|but\s+i|the\s+(?:context|passage|document|text|"
    r"information|sources?)|there)"
    r"|i'?m\s+sorry|my\s+apologies|thanks?(?:\s+(?:you|a\s+lot|so\s+much|for)\b|\s*[!.,]|\s*$)"
    r"|thank\s+you|you'?re\s+welcome|hello\b|hi\b|hey\b"
    r"|hope\s+(?:this|that|it)\s+helps|i\s+hope\s+(?:this|that)|let\s+me\s+know|feel\s+free"
    r"|great\s+question|good\s+question|sure[!.,]|certainly[!.,]|of\s+course[!.,]|happy\s+to\s+help"
    r"|here\s+(?:is|are|'s)\b|here'?s\b|below\s+(?:is|are)\b|the\s+following\s+(?:is|are)\b"
    r"|(?:please\s+)?(?:consult|contact|check\s+with)\b"
    r"|我不知道|不知道|我不清楚|不清楚|我无法|无法回答|无法确定|抱歉|对不起|很抱歉|谢谢|感谢|不客气"
    r"|你好|您好|希望(?:这|以上|对您)|如有(?:其他|任何)|以下是"
    r")",
    re.IGNORECASE,
)
# Statements about the context rather than about the world: "the passage does not mention X".
_ABOUT_CONTEXT = re.compile(
    r"\b(?:context|passages?|documents?|text|sources?|articles?|information\s+(?:provided|given))"
    r"\s+(?:provided\s+|given\s+|above\s+)?(?:does\s+not|doesn'?t|do\s+not|don'?t|did\s+not|"
    r"fails?\s+to|is\s+not|isn'?t)\s+(?:contain|provide|mention|say|include|specify|state|"
    r"address|discuss|give|clear|enough)"
    r"|(?:上下文|文中|文章|资料|材料|参考(?:资料|信息)?|所给信息)(?:中)?(?:没有|并未|未|没)(?:提到|提及|说明|给出|包含)",
    re.IGNORECASE,
)


# Framing that attributes a statement to the context ("The passage states that X"): the claim is
# X. Left in, the framing words would count as unsupported content.
_FRAMING = re.compile(
    r"(?:(?:the|this)\s+(?:passage|article|text|document|context|source|report|summary)\s+"
    r"(?:also\s+)?(?:states|says|mentions|notes|reports|discusses|describes|explains|highlights"
    r"|suggests|indicates|reveals|shows|claims|adds|is\s+about|talks\s+about|covers)"
    r"(?:\s+that)?"
    r"|it\s+(?:also\s+)?(?:states|says|mentions|notes|reports|adds|explains|highlights)"
    r"(?:\s+that)?"
    r"|according\s+to\s+(?:the|this)\s+(?:passage|article|text|document|context|sources?),?"
    r"|in\s+(?:the|this)\s+(?:passage|article|text|document|context),?"
    r"|(?:根据|据)(?:上下文|文章|材料|资料|文中)(?:所述|内容)?[，,]?"
    r")\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ClaimSpan:
    """A claim's text and its offsets in the answer (``answer[start:end] == text``)."""

    text: str
    start: int
    end: int


def _sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text``, stripped of surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        dot = m.start()
        if (
            text[dot] == "."
            and dot > 0
            and (_is_abbreviation(text, dot) or _LIST_NUMBER.fullmatch(text, pos, dot))
        ):
            continue
        end = m.end()
        if m.group(0).startswith("\n"):
            end = m.start()
        _add_stripped(text, pos, end, spans)
        pos = m.end()
    _add_stripped(text, pos, len(text), spans)
    return spans


# What precedes a full stop that does not end a sentence: an initial ("J."), an initialism
# ("U.S.", "e.g.") or a common abbreviation. Searched on the few characters before the stop.
_ABBREVIATION_BEFORE = re.compile(
    r"(?:^|[^\w.])(?:[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]|" + "|".join(sorted(_ABBREVIATIONS)) + r")$",
    re.IGNORECASE,
)


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the full stop at ``dot`` closes an initial ("J.") or a known abbreviation."""
    before = text[max(0, dot - 12) : dot]
    m = _ABBREVIATION_BEFORE.search(before)
    if m is None:
        return False
    word = m.group(0).lstrip(" \t\n\r([\"'“‘")
    # A lone lowercase letter ("plan b.") ends a sentence; a lone capital is an initial.
    return not (len(word) == 1 and word.islower())


def _add_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    segment = text[start:end]
    stripped = segment.strip()
    if stripped:
        lead = len(segment) - len(segment.lstrip())
        out.append((start + lead, start + lead + len(stripped)))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Public helper: sentence spans of a passage or answer (used by the local judge)."""
    return _sentences(text)


def _checkable(text: str) -> bool:
    """Two content words, or one with a number ("Revenue rose 5%"); a stray "1[1]." is not."""
    found, _, _ = units(text)
    return len(found) >= 2 or (len(found) == 1 and bool(extract_quantities(text)))


# The last item of a serial list is a few words long; a clause after ", and" is longer.
_LIST_ITEM_WORDS = 4


def _ends_list(left: str, brk: str) -> bool:
    """Whether ", and" closes a serial list ("apatite, zircon, and magnetite"): the item before
    it is short and follows another comma, so the sentence makes one statement, not two."""
    if not brk.lstrip(",").strip().startswith(("and", "or")):
        return False
    comma = left.rfind(",")
    return comma >= 0 and len(left[comma + 1 :].split()) <= _LIST_ITEM_WORDS


def _clauses(answer: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut one sentence at clause breaks where both sides are checkable on their own."""
    text = answer[start:end]
    cuts: list[tuple[int, int]] = []
    pos = 0
    for m in _CLAUSE_BREAK.finditer(text):
        left = text[pos : m.start()]
        right = text[m.end() :]
        if _ends_list(left, m.group(0)):
            continue
        if len(units(left)[0]) >= 3 and len(units(right)[0]) >= 3:
            cuts.append((pos, m.start()))
            # Keep the conjunction with the right-hand clause ("but X" reads as a statement).
            word = m.group(0).lstrip(";,， \t")
            pos = m.end() - len(word) if word.strip() else m.end()
    if not cuts:
        return [(start, end)]
    cuts.append((pos, len(text)))
    out: list[tuple[int, int]] = []
    for s, e in cuts:
        _add_stripped(answer, start + s, start + e, out)
    return out


def is_claim(text: str) -> bool:
    """Whether a sentence states something checkable (not a question, refusal or pleasantry)."""
    stripped = text.strip()
    if not stripped:
        return False
    if stripped.endswith(("?", "？")) or stripped.endswith((":", "：")):
        return False
    if _NON_CLAIM.match(stripped) or _ABOUT_CONTEXT.search(stripped):
        return False
    return _checkable(stripped)


def split_claims(answer: str) -> list[ClaimSpan]:
    """Split an answer into checkable claims: sentences, or clauses of compound sentences.

    Questions, refusals ("I don't know", "我不知道"), remarks about the context itself, headings
    ending in a colon and pleasantries are skipped; list bullets and framing such as "The
    passage states that" are left out of the claim text.
    """
    spans: list[ClaimSpan] = []
    for s_start, s_end in _sentences(answer):
        bullet = _BULLET.match(answer, s_start, s_end)
        if bullet:
            s_start = bullet.end()
        framing = _FRAMING.match(answer, s_start, s_end)
        if framing and framing.end() < s_end:
            s_start = framing.end()
        for c_start, c_end in _clauses(answer, s_start, s_end):
            text = answer[c_start:c_end]
            if is_claim(text):
                spans.append(ClaimSpan(text=text, start=c_start, end=c_end))
    return spans
