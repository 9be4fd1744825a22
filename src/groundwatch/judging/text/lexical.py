"""Tokenisation for lexical alignment, for spaced (English) and unspaced (Chinese) text.

Text becomes *units*: light-stemmed content words for alphabetic scripts, and characters for
CJK runs (no dictionary needed). Consecutive units also form *pairs*, which capture word order
and phrasing ("capital of France" vs "France's capital" share units, not pairs); for Chinese,
pairs are character bigrams, close to words. Numbers (digits, number words, scale words such as
"million" or 万) are left to :mod:`groundwatch.judging.text.numerals`, which compares them as
quantities.

The one tokenizer of the judges: the local judge's units, and the LLM judge's plain content
tokens (:func:`content_tokens`: unstemmed words, numbers and characters, for its prompt
trimming and reply checks), with one stopword list (:data:`STOPWORDS`, :data:`FUNCTION_CHARS`
for Chinese) and one definition of a CJK character (:data:`CJK`).
"""

from __future__ import annotations

import re

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
"""The CJK ideographs (extension A, the unified block, the compatibility block), as the body of a
regular-expression character class: ``f"[{CJK}]"``. Every judge and check that asks "is this
Chinese" uses this one range."""
CJK_CHAR = re.compile(f"[{CJK}]")

# Word-like tokens: CJK characters one by one, runs of other letters, and citation markers
# (matched so they can be skipped, never as evidence).
_TOKEN = re.compile(
    r"(?P<cite>\[\d+(?:\s*[,\-–]\s*\d+)*\]|\d+(?:[.,]\d+)*\s?(?:万亿|百万|千万|亿|万|千)?)"
    rf"|(?P<cjk>[{CJK}]+)"
    r"|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)?)"
)

STOPWORDS = frozenset(
    """a an the of to in on at for by with and or but nor so is are was were be been being am it
    its it's this that these those as from into onto over under than then there here their
    they them he him his she her hers we us our you your yours i me my mine who whom whose which
    what when where why how do does did done doing have has had having will would shall should
    can could may might must also just very too more most much many some any each every all both
    either neither one ones such own same other others another about above after again against
    before below between during through up down out off only once while if because until upon
    not no never none nothing nor yes s t d ll re ve m o y let lets like well even still yet
    via per among within without across along around toward towards behind beside besides
    however although though whether thus hence therefore since etc e g ie eg vs
    two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
    hundred thousand million millions billion billions trillion percent dozen
    """.split()
)

# Words that turn a statement around. Compared between a claim and its evidence.
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor cannot can't won't don't doesn't didn't isn't"
    " aren't wasn't weren't hasn't haven't hadn't shouldn't wouldn't couldn't without".split()
)
# Chinese negation characters, and common words that contain them without negating.
_CJK_NEGATIONS = "不没未无非别勿"
_CJK_NOT_NEGATION = re.compile(
    r"不断|不同|不仅|不过|不少|不久|不管|不论|不得不|不如|不但|不光|无论|非常|非洲|未来|没想到"
    r"|无疑|别人|别的|特别|分别|区别|差别|类别|级别|性别|个别|无数|无限|不止"
)

# Splits a CJK run at negation words (keeping the compounds above whole): the negation is
# reported separately and the rest is compared as bigrams, so "没有获批" aligns with "已获批"
# and the flip is caught by comparing negation, not lost in a low coverage.
_CJK_NEG_SPLIT = re.compile("(" + _CJK_NOT_NEGATION.pattern + ")|(没有|[" + _CJK_NEGATIONS + "])")


def _cjk_units(run: str, out: list[str]) -> bool:
    """Append the bigram units of a CJK run to ``out``; return whether the run negates."""
    negated = False
    pieces = [run]
    if any(ch in _CJK_NEGATIONS for ch in run):
        negated = any(m.group(2) for m in _CJK_NEG_SPLIT.finditer(run))
        if negated:
            pieces = _CJK_NEG_SPLIT.sub(lambda m: m.group(1) or "|", run).split("|")
    stop = _CJK_STOP
    for piece in pieces:
        out.extend([ch for ch in piece if ch not in stop])
    return negated


# Function characters: particles, conjunctions, prepositions, determiners and modal verbs
# (能/可以/会/要), which paraphrases swap freely and which carry no fact of their own.
FUNCTION_CHARS = _CJK_STOP = frozenset(
    "的了是在和与及也就都而且或等这那个之为以于对把被着过其中将已从向能可会要该此些"
)


def stem(word: str) -> str:
    """A deliberately light English stemmer: plural, -ed, -ing, -ly, possessive."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    n = len(w)
    if n > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if n > 5 and w.endswith("ing"):
        return w[:-3]
    if n > 4 and w.endswith("ed") and not w.endswith("eed"):
        return w[:-2] if not w.endswith("ied") else w[:-3] + "y"
    if n > 5 and w.endswith("ly"):
        return w[:-2]
    if n > 3 and w.endswith("es") and w[-3] in "sxz":
        return w[:-2]
    if n > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


_STEM_CACHE: dict[str, str] = {}
_STEM_CACHE_MAX = 100_000


def _cached_stem(word: str) -> str:
    s = _STEM_CACHE.get(word)
    if s is None:
        s = stem(word)
        if len(_STEM_CACHE) < _STEM_CACHE_MAX:
            _STEM_CACHE[word] = s
    return s


def units(text: str) -> tuple[list[str], bool, list[str]]:
    """Content units of ``text`` in order, whether it negates, and its capitalised words.

    Returns ``(units, negated, names)``: ``names`` are stems of words written with a capital
    letter that are not at the start of a sentence (candidate named entities).
    """
    out: list[str] = []
    names: list[str] = []
    negated = False
    prev_end = -1
    prev_text = ""
    for m in _TOKEN.finditer(text):
        if m.lastgroup == "cite":
            continue
        tok = m.group(0)
        if m.lastgroup == "cjk":
            negated = _cjk_units(tok, out) or negated
            prev_end = m.end()
            continue
        low = tok.lower().replace("’", "'")
        if low in NEGATIONS or low.endswith("n't"):
            negated = True
            continue
        if low in STOPWORDS or len(low) < 2:
            prev_end = m.end()
            prev_text = tok
            continue
        s = _cached_stem(low)
        out.append(s)
        # Short all-capital words (TV, CEO, FC, UK) are abbreviations a context often spells
        # out or leaves implicit, not names whose absence shows an invention.
        if tok[0].isupper() and prev_end >= 0 and not (len(tok) <= 3 and tok.isupper()):
            gap = text[prev_end : m.start()]
            if not any(ch in ".!?:\n" for ch in gap) and prev_text:
                names.append(s)
        prev_end = m.end()
        prev_text = tok
    return out, negated, names


_FAST_TOKEN = re.compile(
    r"\[\d+(?:\s*[,\-–]\s*\d+)*\]|\d+(?:[.,]\d+)*\s?(?:万亿|百万|千万|亿|万|千)?"
    rf"|([{CJK}]+)|([^\W\d_]+(?:['’][^\W\d_]+)?)"
)
# Raw word -> its unit ("" for a stop word, _NEG for a negation); bounded, shared by threads
# (dict reads and writes are atomic under the GIL, and a lost write only costs a recomputation).
_WORD_CACHE: dict[str, str] = {}


_NEG = "\x00neg"


def context_units(text: str) -> tuple[list[str], bool]:
    """Like :func:`units` without name detection: the hot path for indexing passages."""
    out: list[str] = []
    negated = False
    cache = _WORD_CACHE
    stop = STOPWORDS
    neg_words = NEGATIONS
    for cjk, word in _FAST_TOKEN.findall(text):
        if cjk:
            negated = _cjk_units(cjk, out) or negated
            continue
        if not word:
            continue
        s = cache.get(word)
        if s is None:
            low = word.lower().replace("’", "'")
            if low in neg_words or low.endswith("n't"):
                s = _NEG
            elif low in stop or len(low) < 2:
                s = ""
            else:
                s = stem(low)
            if len(cache) < _STEM_CACHE_MAX:
                cache[word] = s
        if s:
            if s == _NEG:
                negated = True
            else:
                out.append(s)
    return out, negated


def pairs(seq: list[str]) -> set[str]:
    """Adjacent unit pairs (order-sensitive)."""
    return {seq[i] + " " + seq[i + 1] for i in range(len(seq) - 1)}


def content_words(text: str) -> set[str]:
    """The set of content units of ``text`` (used by the overlap baseline and the question)."""
    return set(units(text)[0])


# --- the LLM judge's word sets -------------------------------------------------------------------

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# CJK ideographs and the other scripts a BPE vocabulary spends about a token per character on
# (kana, hangul).
WIDE_CHAR = re.compile(f"[{CJK}\u3040-\u30ff\uac00-\ud7af]")


def numbers(text: str) -> set[str]:
    """The numbers written in digits in ``text``, normalised ("1,083" -> "1083"; "2.1" keeps
    its decimal point)."""
    return {m.group(0).replace(",", "") for m in _NUMBER.finditer(text)}


def content_tokens(text: str) -> set[str]:
    """The content units of ``text`` (:func:`context_units`) and its numbers: what the LLM
    judge compares between a claim, its quote and the passages."""
    return set(context_units(text)[0]) | numbers(text)


def overlap(part: set[str], whole: set[str]) -> float:
    """Share of ``part`` found in ``whole`` (1.0 when ``part`` is empty)."""
    if not part:
        return 1.0
    return len(part & whole) / len(part)


def estimate_tokens(text: str) -> int:
    """Rough token count without a tokenizer: CJK characters ~1 token each, other text ~4 chars.

    Good to about +-30% for English and Chinese on current BPE vocabularies, which is all a
    budget needs.
    """
    wide = len(WIDE_CHAR.findall(text))
    return wide + (len(text) - wide + 3) // 4
