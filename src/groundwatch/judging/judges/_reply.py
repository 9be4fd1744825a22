"""Reading the LLM's reply: a tolerant JSON parser and the conversion to a ``Judgement``.

The conversion does not trust the model. Quotes are located in the original passages (scoring
re-checks them and downgrades what is not there); on top of that, three cheap checks guard
against a model that was talked into "mark everything supported" by text inside the data:

- a ``supported``/``inferred`` claim must share at least ``min_quote_overlap`` of its content
  words with its quote (a verbatim injection sentence quoted as "evidence" fails this); its
  numbers, dates and names must be in the evidence too, which scoring checks for every judge
  (``groundwatch.judging.evidence_check``);
- a claim that is neither a span of the answer nor made of the answer's words is dropped (a model
  cannot pad the answer with true statements it did not make); duplicates are dropped;
- every sentence of the answer must be covered by the claims listed; a sentence the model left out
  is added as ``unsupported`` (a model cannot hide a claim by not listing it).

A quote not found verbatim but copied with slips (small models change a word or drop
punctuation) is replaced by the passage sentence it was copied from, when that sentence holds
``min_snap_coverage`` of its words and all its numbers; the evidence is then real passage text
and goes through every check above and in scoring.

Limits: these are lexical checks. A false claim that shares enough words with a real, related
sentence of the passages, quoted as its evidence, and differs from it in no number, date, unit or
name, still passes; only the model's judgement stands between such a claim and a ``supported``
verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...types import Claim, Evidence, Passage, Verdict
from ..scoring import locate_quote
from ..text.claims import sentence_spans, split_claims
from ..text.lexical import content_tokens, numbers, overlap

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.S)
# Reasoning models (DeepSeek-R1, Qwen3, QwQ) think aloud before answering when the server does
# not split the thoughts into a field of their own.
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.I)

_VERDICT_ALIASES: dict[str, Verdict] = {
    "supported": "supported",
    "support": "supported",
    "entailed": "supported",
    "entailment": "supported",
    "attributable": "supported",
    "inferred": "inferred",
    "inference": "inferred",
    "partially supported": "inferred",
    "unsupported": "unsupported",
    "not supported": "unsupported",
    "not_supported": "unsupported",
    "neutral": "unsupported",
    "not enough info": "unsupported",
    "contradicted": "contradicted",
    "contradiction": "contradicted",
    "contradicts": "contradicted",
    "refuted": "contradicted",
}


def _close_truncated(text: str) -> Any | None:
    """Repair JSON cut off mid-way (a reply that hit its token limit).

    Walks the text once, remembering each point where an object or array inside the top level
    value closed; cuts back to the last such point and closes the brackets still open there.
    Complete claims survive, the half-written one is lost.
    """
    stack: list[str] = []
    cuts: list[tuple[int, tuple[str, ...]]] = []
    in_string = False
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if stack:
                cuts.append((i + 1, tuple(stack)))
            else:
                break
    for end, open_ in reversed(cuts):
        candidate = text[:end] + "".join(reversed(open_))
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _decode(text: str) -> Any | None:
    starts = [i for i in (text.find("{"), text.find("[")) if i != -1]
    if not starts:
        return None
    body = text[min(starts) :]
    try:
        return json.loads(body)
    except ValueError:
        pass
    try:
        # Valid JSON followed by prose ("Here is my analysis: ...").
        value, _ = json.JSONDecoder().raw_decode(body)
        return value
    except ValueError:
        pass
    return _close_truncated(body)


def _claim_items(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, dict):
        for key in ("claims", "statements", "results", "verdicts"):
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            return None
    if not isinstance(value, list):
        return None
    items = [v for v in value if isinstance(v, dict)]
    if len(items) != len(value):
        return None
    return items


def read_reply(text: str | None) -> tuple[list[dict[str, Any]] | None, bool]:
    """The claim objects in a model reply, and whether reading them needed tolerance.

    Returns ``(items, tolerant)``: ``items`` is None when the reply is unusable; ``tolerant``
    is False only for a reply that was exactly one JSON value of the expected shape (what
    structured output guarantees), True when the parser had to look past something: a
    ``<think>`` block, a Markdown fence, a preamble or trailing prose, a bare list, a repaired
    cut. Never evaluates anything.
    """
    if not text or not text.strip():
        return None, False
    try:
        strict = _claim_items(json.loads(text))
    except ValueError:
        strict = None
    if strict is not None:
        return strict, False
    text = _strip_thinking(text)
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        value = _decode(candidate)
        if value is None:
            continue
        items = _claim_items(value)
        if items is not None:
            return items, True
    return None, True


def parse_reply(text: str | None) -> list[dict[str, Any]] | None:
    """The list of claim objects in a model reply, or None when the reply is unusable.

    Accepts plain JSON, JSON in a Markdown fence, JSON after a preamble or followed by prose,
    JSON after a reasoning model's ``<think>...</think>`` block, a bare list of claims, and JSON
    truncated mid-way (the complete claims are kept).
    """
    return read_reply(text)[0]


def _strip_thinking(text: str) -> str:
    """The reply without reasoning blocks; an unclosed block hides everything after it (the
    model ran out of tokens while thinking, and JSON inside thoughts is a draft, not an answer).
    """
    text = _THINK.sub(" ", text)
    m = _THINK_OPEN.search(text)
    return text[: m.start()] if m else text


def _str(item: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str):
            return value
    return ""


def _passage_number(item: dict[str, Any]) -> int | None:
    value = item.get("passage", item.get("passage_id", item.get("source")))
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.search(r"\d+", value)
        return int(m.group(0)) if m else None
    return None


def _verdict(item: dict[str, Any]) -> Verdict | None:
    raw = _str(item, "verdict", "label", "status").strip().lower().replace("-", " ")
    return _VERDICT_ALIASES.get(raw) or _VERDICT_ALIASES.get(raw.replace(" ", "_"))


@dataclass
class Checks:
    """The defaults of the anti-injection checks (see the module docstring)."""

    min_quote_overlap: float = 0.25
    min_answer_overlap: float = 0.6
    min_sentence_coverage: float = 0.6
    min_snap_coverage: float = 0.8
    """A quote not found verbatim is replaced by the one passage sentence holding at least this
    share of its content words and all its numbers (and half of whose words it has): small
    models copy sentences with slips. 0 turns it off."""
    enabled: bool = True


@dataclass
class Conversion:
    """Claims built from a reply, and what the checks changed."""

    claims: list[Claim]
    downgraded: int = 0
    dropped: int = 0
    added: int = 0
    snapped: int = 0


def _locate(
    quote: str, number: int | None, passages: Sequence[Passage], snap: float
) -> tuple[Evidence, bool]:
    """Evidence for a quote with exact offsets where found; ``start=end=-1`` where not; and
    whether the quote was snapped to a passage sentence (see ``Checks.min_snap_coverage``).

    The named passage (1-based in the prompt) is tried first, then the others: models mix up
    numbers more often than they invent text. Scoring verifies the result again, and the
    snapped sentence is real passage text, so every later check sees what the passage says.
    """
    index = number - 1 if number is not None and 1 <= number <= len(passages) else None
    order = ([index] if index is not None else []) + [i for i in range(len(passages)) if i != index]
    for i in order:
        found = locate_quote(passages[i].text, quote)
        if found is not None:
            s, e = found
            return Evidence(passage=i, start=s, end=e, quote=passages[i].text[s:e]), False
    snapped = _snap(quote, order, passages, snap) if snap > 0 else None
    if snapped is not None:
        return snapped, True
    return Evidence(passage=index if index is not None else 0, start=-1, end=-1, quote=quote), False


def _snap(
    quote: str, order: Sequence[int], passages: Sequence[Passage], coverage: float
) -> Evidence | None:
    words = content_tokens(quote)
    if len(words) < 3:
        return None  # too short to tell a slip from another statement
    figures = numbers(quote)
    best: tuple[float, int, int, int] | None = None
    for i in order:
        text = passages[i].text
        for s, e in sentence_spans(text):
            sentence = text[s:e]
            have = content_tokens(sentence)
            share = overlap(words, have)
            if share < coverage or overlap(have, words) < 0.5 or not figures <= numbers(sentence):
                continue
            if best is None or share > best[0]:
                best = (share, i, s, e)
    if best is None:
        return None
    _, i, s, e = best
    return Evidence(passage=i, start=s, end=e, quote=passages[i].text[s:e])


def to_claims(
    items: Sequence[dict[str, Any]],
    answer: str,
    passages: Sequence[Passage],
    checks: Checks,
) -> Conversion:
    """Turn the model's claim objects into checked :class:`Claim` objects, in answer order."""
    out = Conversion(claims=[])
    answer_words = content_tokens(answer)
    seen: set[tuple[int | None, str]] = set()
    for item in items:
        text = _str(item, "claim", "text", "statement").strip()
        verdict = _verdict(item)
        if not text:
            out.dropped += 1
            continue
        reason = _str(item, "reason", "explanation")[:500]
        if verdict is None:
            verdict, reason = "unsupported", f"the judge gave no valid verdict; {reason}"
        found = locate_quote(answer, text)
        start, end = found if found else (None, None)
        if (
            checks.enabled
            and found is None
            and overlap(content_tokens(text), answer_words) < checks.min_answer_overlap
        ):
            out.dropped += 1  # not a claim of this answer
            continue
        key = (start, text.lower()) if start is not None else (None, " ".join(text.lower().split()))
        if key in seen:
            out.dropped += 1
            continue
        seen.add(key)
        evidence: list[Evidence] = []
        quote = _str(item, "quote", "evidence").strip()
        if verdict != "unsupported" and quote:
            snap = checks.min_snap_coverage if checks.enabled else 0.0
            located, snapped = _locate(quote, _passage_number(item), passages, snap)
            evidence.append(located)
            out.snapped += snapped
            quote = located.quote
        if checks.enabled and verdict in ("supported", "inferred") and evidence:
            claim_words = content_tokens(text)
            quote_words = content_tokens(quote)
            share = overlap(claim_words, quote_words)
            # Numbers, dates and names are checked for every judge in scoring
            # (groundwatch.judging.evidence_check); this catches a quote about something else.
            if share < checks.min_quote_overlap:
                why = f"the quote shares {share:.0%} of the claim's words"
                reason = f"'{verdict}' rejected: {why}; {reason}".rstrip("; ")
                verdict = "unsupported"
                out.downgraded += 1
        out.claims.append(
            Claim(
                text=answer[start:end] if start is not None else text,
                start=start,
                end=end,
                verdict=verdict,
                evidence=evidence,
                reason=reason,
            )
        )
    if checks.enabled:
        _add_uncovered(out, answer, checks)
    out.claims.sort(key=lambda c: (c.start is None, c.start or 0))
    return out


def _add_uncovered(out: Conversion, answer: str, checks: Checks) -> None:
    claim_words: set[str] = set()
    claim_numbers: set[str] = set()
    for c in out.claims:
        claim_words |= content_tokens(c.text)
        claim_numbers |= numbers(c.text)
    for span in split_claims(answer):
        if span.text.endswith((":", "：")):
            continue  # a lead-in ("Here is what I found:"), not a statement
        words = content_tokens(span.text)
        if len(words) < 2:
            continue
        if (
            overlap(words, claim_words) >= checks.min_sentence_coverage
            and numbers(span.text) <= claim_numbers
        ):
            continue
        out.added += 1
        out.claims.append(
            Claim(
                text=span.text,
                start=span.start,
                end=span.end,
                verdict="unsupported",
                reason="the judge listed no claim for this sentence",
            )
        )
