"""Structure a claim shares with its evidence beyond words: direction of change, cause and effect.

Word overlap cannot see that "profit rose 15%" and "profit fell 15%" disagree, or that "A caused
B" reverses "B caused A": the words are the same. These checks read the few words that carry
that structure, in English and Chinese, and compare claim and evidence on them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Words that say a quantity went up or down (stems and inflections; Chinese two-character words,
# so 降雨 "rainfall" is not a fall).
_UP = re.compile(
    r"\b(?:ris(?:e|es|en|ing)|rose|increas\w*|grow(?:s|n|ing)?|grew|gain(?:s|ed|ing)?"
    r"|climb(?:s|ed|ing)?|jump(?:s|ed|ing)?|surg(?:e|es|ed|ing)|soar(?:s|ed|ing)?"
    r"|expand(?:s|ed|ing)?|boost(?:s|ed|ing)?|rais(?:e|es|ed|ing))\b"
    r"|增长|增加|上涨|上升|提高|提升|升高|扩大|增多|攀升|走高|上调",
    re.IGNORECASE,
)
_DOWN = re.compile(
    r"\b(?:fall(?:s|en|ing)?|fell|decreas\w*|declin\w*|drop(?:s|ped|ping)?|shr[iau]nk\w*"
    r"|plung(?:e|es|ed|ing)|slump(?:s|ed|ing)?|reduc\w*|cut(?:s|ting)?|lower(?:s|ed|ing))\b"
    r"|下降|减少|下跌|降低|下滑|缩小|回落|走低|萎缩|缩减|下调|减小",
    re.IGNORECASE,
)


def direction(text: str) -> int:
    """+1 when ``text`` says something went up, -1 down, 0 neither or both."""
    up = _UP.search(text) is not None
    down = _DOWN.search(text) is not None
    return int(up) - int(down)


def direction_reversed(claim: str, evidence: str) -> bool:
    """Whether the claim says up where its evidence says down, or the reverse."""
    d = direction(claim)
    return d != 0 and direction(evidence) == -d


# Cause and effect: each cue splits a text into (cause, effect).
_Split = Callable[[re.Match[str], str], tuple[str, str]]


def _left_causes(m: re.Match[str], text: str) -> tuple[str, str]:
    return text[: m.start()], text[m.end() :]


def _right_causes(m: re.Match[str], text: str) -> tuple[str, str]:
    return text[m.end() :], text[: m.start()]


def _leading_cause(m: re.Match[str], text: str) -> tuple[str, str]:
    """ "B because A" names the cause after the cue; "Because A, B" / "由于A，B" runs the
    cause to the first comma after it."""
    before, rest = text[: m.start()], text[m.end() :]
    if before.strip(" ,，\t"):
        return rest, before
    comma = re.search(r"[,，]", rest)
    if comma is None:
        return rest, ""
    return rest[: comma.start()], rest[comma.end() :]


_CUES: list[tuple[re.Pattern[str], _Split]] = [
    (
        re.compile(r"\b(?:is|are|was|were|been|being)\s+(?:caused|triggered|driven)\s+by\b", re.I),
        _right_causes,
    ),
    (
        re.compile(
            r"\b(?:caused|causes|cause|led\s+to|leads\s+to|lead\s+to|resulted\s+in|results\s+in"
            r"|triggered|triggers)\b",
            re.I,
        ),
        _left_causes,
    ),
    (
        re.compile(r"\b(?:because\s+of|because|due\s+to|owing\s+to|as\s+a\s+result\s+of)\b", re.I),
        _leading_cause,
    ),
    (re.compile(r"是因为|是由于|源于"), _right_causes),
    (re.compile(r"导致|造成|引起|引发|使得|致使"), _left_causes),
    (re.compile(r"所以|因此|因而|从而"), _left_causes),
    (re.compile(r"由于|因为|受(?=[^，,。]{1,12}影响)"), _leading_cause),
]


def cause_effect(text: str) -> tuple[str, str] | None:
    """The cause and the effect a text states, or None when it states no causal link."""
    for pattern, split in _CUES:
        m = pattern.search(text)
        if m is not None:
            cause, effect = split(m, text)
            if cause.strip() and effect.strip():
                return cause, effect
    return None


def cause_effect_reversed(claim: str, evidence: str, units: Callable[[str], set[str]]) -> bool:
    """Whether the claim swaps the cause and the effect its evidence states.

    ``units`` turns a text into the content units alignment compares (so "prices rose" and
    "rising prices" meet). A swap is called only when the crossed reading explains the claim
    clearly better than the straight one.
    """
    c = cause_effect(claim)
    if c is None:
        return False
    e = cause_effect(evidence)
    if e is None:
        return False
    c_cause, c_effect = (units(t) for t in c)
    e_cause, e_effect = (units(t) for t in e)
    if not c_cause or not c_effect:
        return False

    def share(a: set[str], b: set[str]) -> float:
        return len(a & b) / len(a) if a else 0.0

    straight = share(c_cause, e_cause) + share(c_effect, e_effect)
    crossed = share(c_cause, e_effect) + share(c_effect, e_cause)
    return crossed >= 1.0 and crossed > straight + 0.5
