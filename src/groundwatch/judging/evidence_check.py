"""Evidence must carry the claim's distinctive content: one check for every judge.

A quote that exists in its passage is not yet evidence *for the claim*. A compromised or
obedient model can quote a real, on-topic sentence for a false claim ("The tower was designed by
Leonardo da Vinci" backed by "The tower was designed by the engineering company of Gustave
Eiffel"). So a ``supported`` or ``inferred`` verdict must keep every number, date, unit and named
entity of the claim in its evidence: each must be found in a quoted span or in the passage that
span comes from, by the rules the local judge uses (:mod:`groundwatch.judging.text.numerals` for
quantities, the capitalised-word names of :func:`groundwatch.judging.text.lexical.units`). Otherwise
the verdict becomes ``unsupported`` with the reason "evidence does not contain ...", and
scoring counts it in ``evidence_rejected``.

Chinese has no capital letters, so two written signs of a name count there as well: Latin-script
words inside Chinese text (``Apple``, ``iPhone``) and the parts of a transliterated name joined by
a middle dot (``古斯塔夫·埃菲尔``). A Chinese name written with neither (``达芬奇``) is not seen
by this check; numbers, dates and units are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..types import Evidence, Passage, Verdict
from .text.lexical import CJK, CJK_CHAR, context_units, units
from .text.numerals import Quantity, QuantityIndex, extract_quantities
from .text.structured import statements

_CHECKED: frozenset[str] = frozenset({"supported", "inferred"})
# A Latin-script word of two letters or more with Chinese on at least one side.
_LATIN_IN_CJK = re.compile(
    rf"(?:(?<=[{CJK}])\s?([A-Za-z][A-Za-z0-9\-]+))"
    rf"|(?:([A-Za-z][A-Za-z0-9\-]+)\s?(?=[{CJK}]))"
)
# Parts of a transliterated name: CJK runs joined by a middle dot (·, ・, •, ‧).
_DOTTED_NAME = re.compile(f"[{CJK}]+(?:[·・•‧][{CJK}]+)+")
_NAME_DOTS = re.compile(r"[·・•‧]")


def _names(text: str) -> set[str]:
    """Named entities of ``text`` as comparable strings (lower-cased stems or CJK runs)."""
    found: set[str] = set()
    for name in units(text)[2]:
        # A Latin word run into Chinese text comes back with the Chinese attached
        # ("A/H两地" gives "h两地"): keep the Latin part.
        latin = CJK_CHAR.split(name, 1)[0]
        if len(latin) >= 2:
            found.add(latin)
    if CJK_CHAR.search(text):
        for m in _LATIN_IN_CJK.finditer(text):
            word = (m.group(1) or m.group(2) or "").lower()
            if len(word) >= 2:
                found.add(word)
        for m in _DOTTED_NAME.finditer(text):
            parts = _NAME_DOTS.split(m.group(0))
            # The run before the first dot may start with other words ("由古斯塔夫") and the
            # run after the last may go on ("埃菲尔设计"): keep the two characters next to
            # the dot there, whole parts in between.
            found.add(parts[0][-2:])
            found.update(parts[1:-1])
            found.add(parts[-1][:2])
    return found


def _has_name(name: str, stems: set[str], text: str) -> bool:
    if CJK_CHAR.search(name):
        return name in text
    # A stem is the start of a word: "eiffel" in "Eiffel's", "design" in "designed".
    # Not \b: Chinese characters are word characters, and "STX" in "韩国STX集团" is a word.
    return name in stems or re.search(r"(?<![a-z0-9])" + re.escape(name), text, re.I) is not None


def names_absent(claim: str, text: str) -> list[str]:
    """The names of ``claim`` (by the rules of :func:`missing_content`) that ``text`` lacks,
    as written in the claim: the local judge calls such a claim unsupported, so that its own
    verdicts pass this check."""
    names = _names(claim)
    if not names:
        return []
    stems = set(context_units(text)[0])
    return [_name_as_written(claim, n) for n in sorted(names) if not _has_name(n, stems, text)]


def missing_content(
    claim: str, evidence: Sequence[Evidence], passages: Sequence[Passage]
) -> list[str]:
    """What of the claim's numbers, dates, units and names its evidence does not contain.

    Each item must be found in a quote or in the passage the quote comes from. Returns the
    missing items as written in the claim (empty when the evidence carries them all).
    """
    texts = [e.quote for e in evidence]
    shown = sorted({e.passage for e in evidence})
    texts += [passages[i].text for i in shown if 0 <= i < len(passages)]
    # A tool's structured output also says its fields in words (units beside numbers, dates
    # written out): what the judges read in it counts as what it contains.
    said = [statements(passages[i]) for i in shown if 0 <= i < len(passages)]
    texts += [s for s in said if s]
    return missing_from(claim, texts)


def missing_from(claim: str, texts: Sequence[str]) -> list[str]:
    """What of the claim's numbers, dates, units and names none of ``texts`` contains."""
    quantities = extract_quantities(claim)
    names = _names(claim)
    if not quantities and not names:
        return []
    missing: list[str] = []
    if quantities:
        index = QuantityIndex((q, 0) for t in texts for q in extract_quantities(t))
        missing += [_written(claim, q) for q in quantities if index.find_match(q) is None]
    if names:
        joined = "\n".join(texts)
        stems = set(context_units(joined)[0])
        for name in sorted(names):
            if not _has_name(name, stems, joined):
                missing.append(_name_as_written(claim, name))
    return list(dict.fromkeys(missing))


def _written(text: str, q: Quantity) -> str:
    return text[q.start : q.end].strip() or f"{q.value:g}"


def _name_as_written(text: str, name: str) -> str:
    m = re.search(re.escape(name), text, re.I)
    if m is None:
        return name
    # Extend a stem to the whole word it came from ("design" -> "designed").
    end = m.end()
    while end < len(text) and text[end].isalpha() and not CJK_CHAR.match(text[end]):
        end += 1
    return text[m.start() : end]


def enforce_evidence_content(
    claim: str,
    verdict: Verdict,
    reason: str,
    evidence: Sequence[Evidence],
    passages: Sequence[Passage],
) -> tuple[Verdict, str, int]:
    """Downgrade a ``supported``/``inferred`` verdict whose evidence lacks the claim's content.

    Returns ``(verdict, reason, rejected)`` where ``rejected`` is 1 when the verdict was
    downgraded (scoring adds it to ``evidence_rejected``) and 0 otherwise. Other verdicts and
    verdicts without evidence are returned unchanged (scoring already handles missing
    evidence).
    """
    if verdict not in _CHECKED or not evidence:
        return verdict, reason, 0
    missing = missing_content(claim, evidence, passages)
    if not missing:
        return verdict, reason, 0
    shown = ", ".join(repr(m) for m in missing[:5])
    why = f"evidence does not contain {shown}; '{verdict}' rejected"
    return "unsupported", f"{why}; {reason}".rstrip("; "), 1
