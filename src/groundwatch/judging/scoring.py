"""From claim verdicts to scores and a label: the one place where that arithmetic lives.

Every judge returns a :class:`~groundwatch.types.Judgement` (claims, verdicts, evidence);
:func:`score` checks the evidence against the passages, computes both scores and picks the
label, identically for every judge.

The label rule (defaults chosen on the dev data, see docs/judges.md "How the label is decided"):

1. the judge failed -> ``error`` (scores ``None``);
2. no checkable claims -> ``no_claims`` (scores ``None``);
3. the context has nothing substantive (empty, only headings or a table of contents) and no
   claim is ``supported`` or ``contradicted`` -> ``insufficient_context`` (scores still
   reported): a claim the context contradicts is the answer's fault, whatever the context's
   length;
4. ``faithfulness >= min_faithfulness`` and ``groundedness >= min_groundedness`` ->
   ``grounded``; otherwise ``hallucinated``.

Every label but ``error`` also gets ``hallucination_probability``: the judge's own where it gives
one, else computed from the checked claims by :mod:`.probability` (docs/rates.md).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._shared.error_types import ERROR_INTERNAL, documented_error_type
from ..types import (
    VERDICTS,
    Claim,
    Evaluation,
    Evidence,
    Judgement,
    Label,
    Passage,
    Usage,
    passage_names,
)
from .evidence_check import enforce_evidence_content
from .judges._base import as_judgement
from .probability import hallucination_probability
from .text.lexical import CJK_CHAR
from .text.structured import tool_records

DEFAULT_MIN_FAITHFULNESS = 1.0
"""Any contradicted claim makes an answer hallucinated."""

DEFAULT_MIN_GROUNDEDNESS = 0.8
"""Share of claims that must be supported or inferred: at most one claim in five may lack
support. Chosen on ../shared/data with the local judge (docs/judges.md, "How the label is decided"):
swept over 0.5-1.0 at the judge's default thresholds, 0.8 gave the best summed balanced
accuracy on AttributionBench + FaithBench dev; 1.0 fails long answers for one weak claim."""


@dataclass(frozen=True)
class LabelPolicy:
    """Thresholds that turn the two scores into ``grounded`` or ``hallucinated``."""

    min_faithfulness: float = DEFAULT_MIN_FAITHFULNESS
    min_groundedness: float = DEFAULT_MIN_GROUNDEDNESS

    def __post_init__(self) -> None:
        for name in ("min_faithfulness", "min_groundedness"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value!r}")


DEFAULT_POLICY = LabelPolicy()

# --- evidence checking ---------------------------------------------------------------------

_QUOTE_CHARS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _normalise_with_map(text: str) -> tuple[str, list[int]]:
    """Collapse whitespace runs to one space and lower-case, keeping a map to the original.

    Each character of the result maps to the index of the original character it came from, so a
    match in the normalised text can be turned back into exact offsets of the original.
    """
    out: list[str] = []
    index: list[int] = []
    in_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not in_space and out:
                out.append(" ")
                index.append(i)
            in_space = True
            continue
        in_space = False
        low = ch.lower()
        out.append(low if len(low) == 1 else ch)
        index.append(i)
    return "".join(out).translate(_QUOTE_CHARS), index


def locate_quote(passage: str, quote: str, hint: int | None = None) -> tuple[int, int] | None:
    """Find ``quote`` in ``passage`` ignoring whitespace differences, case and curly quotes.

    Returns ``(start, end)`` offsets into ``passage`` such that ``passage[start:end]`` is the
    matched text, or ``None`` when the quote is not in the passage. Where the quote occurs
    several times, the occurrence nearest ``hint`` wins.
    """
    if not quote or not quote.strip():
        return None
    if hint is not None and hint < 0:
        hint = None  # a negative slice start would count from the end and give negative offsets
    if hint is not None and passage[hint : hint + len(quote)] == quote:
        return hint, hint + len(quote)
    norm_passage, index = _normalise_with_map(passage)
    norm_quote, _ = _normalise_with_map(quote.strip())
    norm_quote = norm_quote.strip()
    if not norm_quote:
        return None
    best: int | None = None
    pos = norm_passage.find(norm_quote)
    while pos != -1:
        if best is None or (hint is not None and abs(index[pos] - hint) < abs(index[best] - hint)):
            best = pos
        if hint is None:
            break
        pos = norm_passage.find(norm_quote, pos + 1)
    if best is None:
        return None
    start = index[best]
    end = index[best + len(norm_quote) - 1] + 1
    return start, end


def verify_evidence(evidence: Evidence, passages: Sequence[Passage]) -> Evidence | None:
    """Return the evidence with exact offsets if its quote is in the named passage, else None."""
    if not 0 <= evidence.passage < len(passages):
        return None
    text = passages[evidence.passage].text
    if (
        0 <= evidence.start < evidence.end <= len(text)
        and text[evidence.start : evidence.end] == evidence.quote
        and evidence.quote.strip()
    ):
        return evidence
    found = locate_quote(text, evidence.quote, hint=evidence.start if evidence.start >= 0 else None)
    if found is None:
        return None
    start, end = found
    return Evidence(passage=evidence.passage, start=start, end=end, quote=text[start:end])


def _fix_claim_span(claim: Claim, answer: str) -> tuple[int | None, int | None]:
    if (
        claim.start is not None
        and claim.end is not None
        and 0 <= claim.start <= claim.end <= len(answer)
        and answer[claim.start : claim.end] == claim.text
    ):
        return claim.start, claim.end
    found = locate_quote(answer, claim.text, hint=claim.start)
    if found is None:
        return None, None
    return found


def check_claims(
    claims: Sequence[Claim], answer: str, passages: Sequence[Passage]
) -> tuple[list[Claim], int]:
    """Verify every claim's evidence; downgrade verdicts whose evidence is not found.

    Returns the checked claims and how many verdicts were downgraded to ``unsupported``.
    """
    checked: list[Claim] = []
    rejected = 0
    # Tool outputs and conversation turns are named for people ("tool lookup_policy"); plain
    # retrieved passages keep their number (Evidence.name), so most records skip this.
    names = (
        passage_names(passages) if any(p.kind != "retrieved" or p.tool for p in passages) else None
    )
    for claim in claims:
        evidence = [e for e in (verify_evidence(e, passages) for e in claim.evidence) if e]
        if names is not None:
            evidence = [e.model_copy(update={"source": names[e.passage]}) for e in evidence]
        verdict = claim.verdict
        reason = claim.reason
        if verdict != "unsupported" and not evidence:
            rejected += 1
            reason = f"evidence for '{verdict}' not found in the passages; {reason}".rstrip("; ")
            verdict = "unsupported"
        verdict, reason, lacking = enforce_evidence_content(
            claim.text, verdict, reason, evidence, passages
        )
        rejected += lacking
        start, end = _fix_claim_span(claim, answer)
        checked.append(
            Claim(
                text=claim.text if start is None else answer[start:end],
                start=start,
                end=end,
                verdict=verdict,
                evidence=evidence,
                reason=reason,
                confidence=_unit_or_none(claim.confidence),
            )
        )
    return checked, rejected


def _sources(claims: Iterable[Claim], limit: int = 3) -> str:
    """The distinct names of the passages these claims' best evidence is in, in order."""
    names: list[str] = []
    for claim in claims:
        if claim.evidence and claim.evidence[0].name not in names:
            names.append(claim.evidence[0].name)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _unit_or_none(value: float | None) -> float | None:
    """A judge's confidence kept within [0, 1]; NaN (which JSON cannot carry) becomes None."""
    if value is None or math.isnan(value):
        return None
    return min(1.0, max(0.0, value))


# --- context substance ------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_TOC_LINE = re.compile(r"(\.{3,}|…{2,}|\s{2,})\s*\d+\s*$|^\s*(chapter|section|part|第)\b", re.I)
_NUMBERED_HEADING = re.compile(r"^\s*(\d+(\.\d+)*|[ivxlc]+\.|[A-Z]\.)\s+\S")
_SENTENCE_END = re.compile(r"[.!?。！？；;:：]\s*$")
_FULL_STOP = re.compile(r"[.!?。！？]\s*$")
_DIGIT = re.compile(r"\d")


def _is_prose_line(line: str) -> bool:
    line = line.strip()
    if not line or _TOC_LINE.search(line):
        return False
    cjk = len(CJK_CHAR.findall(line))
    words = len(_WORD.findall(line)) - (1 if cjk else 0)
    if cjk >= 12 or words >= 12:
        return True
    if _NUMBERED_HEADING.match(line) and not _SENTENCE_END.search(line):
        return False
    if (words >= 5 or cjk >= 6) and _SENTENCE_END.search(line):
        return True
    # Shorter lines count when they read as a sentence ("Shipping takes 3 days.", a FAQ line) or
    # state a value the way a tool's one-line output does ("Order 123 shipped on May 5"); a
    # heading is a few words with neither a full stop nor a figure ("Table of contents:").
    if _FULL_STOP.search(line):
        return words >= 2 or cjk >= 4
    return (words >= 3 or cjk >= 4) and _DIGIT.search(line) is not None


def context_is_substantive(passages: Sequence[Passage]) -> bool:
    """Whether any passage holds prose: a sentence, not just headings or a table of contents.

    A tool's output is substantive when it says anything: structured output with a value in
    it (a record, :func:`~groundwatch.judging.text.structured.tool_records`), or any word of text
    ("Order not found" is the tool's answer, not a failed retrieval). Only an empty output
    (``{}``, ``[]``, nulls, blank text) is not."""
    return any(
        _tool_says_something(p)
        if p.kind == "tool"
        else any(_is_prose_line(line) for line in p.text.splitlines())
        for p in passages
    )


def _tool_says_something(passage: Passage) -> bool:
    if tool_records(passage):
        return True
    text = passage.text.strip()
    if text[:1] in ("{", "[") or text == "null":
        try:
            json.loads(text)
            return False  # JSON without a value in it
        except ValueError:
            pass
    return _WORD.search(text) is not None


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for one: ``"1 claim"``, ``"3 claims"``. ``plural``
    defaults to the noun with an ``s``. For every count a person reads."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


# --- scores and label ---------------------------------------------------------------------------


def score(
    judgement: Judgement,
    answer: str,
    passages: Sequence[Passage],
    *,
    judge_name: str = "",
    policy: LabelPolicy = DEFAULT_POLICY,
    truncated: bool = False,
) -> Evaluation:
    """Check a judgement's evidence and turn its verdicts into scores and a label."""
    common = Evaluation(
        label="error",
        judge=judge_name,
        model=judgement.model,
        usage=judgement.usage,
        # Cut before judging (the size caps), or by the judge itself (its own context budget).
        truncated=truncated or judgement.truncated,
    )
    if judgement.error is not None:
        error_type = documented_error_type(judgement.error_type)
        error = judgement.error
        if (
            judgement.error_type
            and judgement.error_type != error_type
            and not error.startswith(f"{judgement.error_type}: ")  # named once, not twice
        ):
            error = f"{judgement.error_type}: {error}"  # the specific cause stays readable
        return common.model_copy(
            update={
                "explanation": f"judge failed: {error}",
                "error": error,
                "error_type": error_type,
            }
        )
    claims, rejected = check_claims(judgement.claims, answer, passages)
    n = len(claims)
    if n == 0:
        return common.model_copy(
            update={
                "label": "no_claims",
                "explanation": "the answer makes no checkable claim",
                "evidence_rejected": rejected,
                "hallucination_probability": _probability(
                    judgement, "no_claims", claims, answer, judge_name, policy
                ),
            }
        )
    counts = Counter(c.verdict for c in claims)
    faithfulness = 1.0 - counts["contradicted"] / n
    groundedness = (counts["supported"] + counts["inferred"]) / n
    explanation = (
        f"{counts['supported']} supported, {counts['inferred']} inferred, "
        f"{counts['unsupported']} unsupported, {counts['contradicted']} contradicted of "
        f"{counted(n, 'claim')}"
    )
    against = _sources(c for c in claims if c.verdict == "contradicted")
    if against:
        explanation += f"; contradicted by {against}"
    label: Label
    # A claim the context contradicts shows the context said something on it: the generation
    # failed, not the retrieval, however short the context (issue #45).
    if (
        counts["supported"] == 0
        and counts["contradicted"] == 0
        and not context_is_substantive(passages)
    ):
        label = "insufficient_context"
        explanation = f"the retrieved context has nothing substantive; {explanation}"
    elif faithfulness >= policy.min_faithfulness and groundedness >= policy.min_groundedness:
        label = "grounded"
    else:
        label = "hallucinated"
    return common.model_copy(
        update={
            "label": label,
            "faithfulness": faithfulness,
            "groundedness": groundedness,
            "claims": claims,
            "explanation": explanation,
            "evidence_rejected": rejected,
            "hallucination_probability": _probability(
                judgement, label, claims, answer, judge_name, policy
            ),
        }
    )


def _probability(
    judgement: Judgement,
    label: Label,
    claims: Sequence[Claim],
    answer: str,
    judge_name: str,
    policy: LabelPolicy,
) -> float | None:
    """The judge's own probability where it gives one, else the one computed from its claims
    by :func:`~groundwatch.judging.probability.hallucination_probability`."""
    own = judgement.hallucination_probability
    if isinstance(own, (float, int)) and not math.isnan(own):
        return min(1.0, max(0.0, float(own)))
    return hallucination_probability(
        label,
        claims,
        judge=judge_name,
        cjk=CJK_CHAR.search(answer) is not None,
        min_faithfulness=policy.min_faithfulness,
        min_groundedness=policy.min_groundedness,
    )


def score_judgement(
    judgement: Judgement,
    answer: str,
    passages: Sequence[Passage],
    judge_name: str,
    policy: LabelPolicy = DEFAULT_POLICY,
    truncated: bool = False,
) -> Evaluation:
    """Score a judge's judgement of one prepared answer (a ``Judgement`` built past validation
    with fields of the wrong shape is an ``internal`` error). The scoring step of
    :func:`evaluate`, :func:`aevaluate` and every runner of the online runtime."""
    judgement = as_judgement(judgement)  # a caller's own flow may hand anything
    problem = malformed(judgement)
    if problem is not None:
        judgement = Judgement(
            error=f"judge returned a malformed Judgement: {problem}"[:500],
            error_type=ERROR_INTERNAL,
        )
    return score(
        judgement, answer, passages, judge_name=judge_name, policy=policy, truncated=truncated
    )


def _kind(value: Any) -> str:
    return type(value).__name__


def _claim_problem(claim: Any) -> str | None:
    if not isinstance(claim, Claim):
        return f"a claim is {_kind(claim)}, not a Claim"
    if not isinstance(claim.text, str):
        return f"claim text is {_kind(claim.text)}"
    if claim.verdict not in VERDICTS:
        return f"claim verdict {claim.verdict!r:.40} is not one of {', '.join(VERDICTS)}"
    for name in ("start", "end"):
        value = getattr(claim, name)
        if value is not None and (type(value) is not int):
            return f"claim {name} is {_kind(value)}"
    if not isinstance(claim.reason, str):
        return f"claim reason is {_kind(claim.reason)}"
    confidence = claim.confidence
    if confidence is not None and type(confidence) not in (float, int):
        return f"claim confidence is {_kind(confidence)}"
    if type(claim.evidence) is not list:
        return f"claim evidence is {_kind(claim.evidence)}, not a list"
    for evidence in claim.evidence:
        if not isinstance(evidence, Evidence):
            return f"evidence is {_kind(evidence)}, not an Evidence"
        for name in ("passage", "start", "end"):
            value = getattr(evidence, name)
            if type(value) is not int:
                return f"evidence {name} is {_kind(value)}"
        if not isinstance(evidence.quote, str):
            return f"evidence quote is {_kind(evidence.quote)}"
    return None


def malformed(judgement: Judgement) -> str | None:
    """What is wrong with a ``Judgement`` whose fields do not have their declared types (one
    built with ``model_construct``, or changed after validation), or ``None`` when it is well
    formed. Checked field by field (microseconds), not by validating it again: this runs for
    every evaluation, on the worker's thread in the host's interpreter."""
    claims = judgement.claims
    if type(claims) is not list:
        return f"claims is {_kind(claims)}, not a list"
    for name in ("model", "error", "error_type"):
        value = getattr(judgement, name)
        if value is not None and not isinstance(value, str):
            return f"{name} is {_kind(value)}, not a string"
    usage = judgement.usage
    if usage is not None and not (
        isinstance(usage, Usage)
        and all(type(getattr(usage, n)) is int for n in ("input_tokens", "output_tokens", "calls"))
    ):
        return f"usage is {_kind(usage)} with fields of the wrong type"
    for claim in claims:
        problem = _claim_problem(claim)
        if problem is not None:
            return problem
    return None
