"""Small lexical helpers shared by the LLM judge's prompt trimming and its sanity checks.

Deliberately crude and cheap: they rank sentences for trimming and catch grossly unrelated
quotes; they are not a judge of meaning.
"""

from __future__ import annotations

import re

_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
# Words, numbers (with inner separators: 1,083 / 2.1 / 500万 is number + CJK char), CJK chars.
_TOKEN = re.compile(
    r"\d+(?:[.,]\d+)*|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\d_]+", re.UNICODE
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_STOP = frozenset(
    """a an the of to in on at for by with and or but not no is are was were be been being it its
    this that these those as from has have had do does did will would can could should may might
    he she they them his her their we you i our your which who whom what when where how than then
    there here also into about over such so very just only more most some any all each 的 了 是 在
    和 与 及 也 都 而 或 就 这 那 之 其""".split()
)


def estimate_tokens(text: str) -> int:
    """Rough token count without a tokenizer: CJK characters ~1 token each, other text ~4 chars.

    Good to about +-30% for English and Chinese on current BPE vocabularies, which is all a
    budget needs.
    """
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def _norm_number(token: str) -> str:
    # "1,083" and "1083" are the same number; "2.1" keeps its decimal point.
    return token.replace(",", "")


def content_tokens(text: str) -> set[str]:
    """Lower-cased words, numbers and CJK characters of ``text``, minus function words."""
    out: set[str] = set()
    for m in _TOKEN.finditer(text):
        tok = m.group(0).lower()
        if tok[0].isdigit():
            out.add(_norm_number(tok))
        elif tok not in _STOP:
            out.add(tok)
    return out


def numbers(text: str) -> set[str]:
    """The numbers written in ``text``, normalised ("1,083" -> "1083")."""
    return {_norm_number(m.group(0)) for m in _NUMBER.finditer(text)}


def overlap(part: set[str], whole: set[str]) -> float:
    """Share of ``part`` found in ``whole`` (1.0 when ``part`` is empty)."""
    if not part:
        return 1.0
    return len(part & whole) / len(part)
