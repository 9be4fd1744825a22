"""Chinese words for the local judge: names and nouns, from the optional ``zh`` extra.

Characters and character pairs align Chinese well enough for coverage, but cannot tell a swapped
name (上海 for 北京, 小米 for 华为) from a paraphrase. With the ``zh`` extra,
rjieba (the Rust port of jieba, MIT) segments and tags the claim, and the claim's names and nouns
that the context never mentions are reported like English capitalised names. Without the extra,
this module reports nothing and the judge keeps its character-level checks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache

from ...._shared.errors import install_hint
from ...text.lexical import CJK, FUNCTION_CHARS

_logger = logging.getLogger(__name__)

INSTALL_HINT = install_hint("zh")

# Tags of the words that name or denote things: person, place, organisation, other proper
# nouns, plain nouns, abbreviations. Verbs and function words paraphrase freely; these do not.
_NOUN_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz", "n", "j", "nw"})
_CJK_WORD = re.compile(f"^[{CJK}]{{2,}}$")


@lru_cache(maxsize=1)
def _tagger() -> Callable[[str], list[tuple[str, str]]] | None:
    try:
        import rjieba
    except ImportError:
        _logger.info("Chinese name checks are off; enable them with: %s", INSTALL_HINT)
        return None
    tag: Callable[[str], list[tuple[str, str]]] = rjieba.tag
    return tag


def available() -> bool:
    """Whether the ``zh`` extra is installed (Chinese name and noun checks are on)."""
    return _tagger() is not None


def _mostly_new(word: str, known: str) -> bool:
    content = [ch for ch in word if ch not in FUNCTION_CHARS]
    return bool(content) and 2 * sum(ch not in known for ch in content) >= len(content)


# A title in 《》 (a book, journal, law or programme) is a name whatever the tagger says.
_TITLE = re.compile(r"《([^《》]{1,40})》")


def novel_terms(claim: str, context: str, also_known: str = "") -> list[str]:
    """Names and nouns of ``claim`` that ``context`` (nor ``also_known``, the question) never
    mentions; titles in 《》 without the extra, names and nouns with it.

    A noun counts as new when it is not in the context and at least half of its content
    characters are nowhere in the context: "研究成果" against "研究" and "成果" is a
    recombination, "李明称" (a name with a verb glued on) is the known 李明, while "上海" in a
    text about 北京 is new.
    """
    known = context + "\n" + also_known
    out = [t for t in _TITLE.findall(claim) if t not in known]
    tag = _tagger()
    if tag is None:
        return out
    for word, pos in tag(claim):
        if (
            pos in _NOUN_TAGS
            and _CJK_WORD.match(word)
            and word not in known
            and word not in out
            and _mostly_new(word, known)
        ):
            out.append(word)
    return out
