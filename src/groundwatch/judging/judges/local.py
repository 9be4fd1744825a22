"""The embedded default judge: deterministic, pure Python, no network, no model download.

How a claim is judged (``docs/judges.md`` has the user-facing version):

1. The passages are cut into sentences once per call and indexed, keeping only units that some
   claim uses: content units (stemmed words, single CJK characters), pairs of units at most one
   unit apart, quantities (numbers with kind, unit and precision; in the word stream each one
   stands as a word naming its kind, so "1.5 km" and "1500 m" read alike), negation. Unit
   weights are smoothed inverse sentence frequencies over the passages themselves; units the
   *question* contains weigh less, because an answer echoing the question is not evidence.
2. Each claim is aligned with its best sentence (and that sentence with its neighbours, for
   claims that combine adjacent sentences) through the inverted index.
3. Rules find contradictions on the aligned evidence: a number that matches nothing while the
   evidence states another value of the same kind (500万 vs 800万, 3个月 vs 3年), judged on the
   clause of the claim that states it; a negation that differs on the aligned clauses; a change
   that goes the other way (rose / fell); cause and effect swapped. A number, a name (or, for
   Chinese with the ``zh`` extra, a noun) the context never mentions makes a claim unsupported.
4. Otherwise a fitted logistic model (:mod:`._calibration`) turns the coverage measurements
   into the probability that the context backs the claim: backed claims are ``supported`` when
   one sentence states them, ``inferred`` when it takes several or other words.

``Claim.confidence`` is the calibrated probability that the verdict is right (for the rules,
their measured precision); a cascade sends the answers with an unsure claim to an LLM judge.
``LocalJudge(calibrated=False)`` keeps the hand-set thresholds of step 4 instead.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...types import Claim, Evidence, Judgement, Passage, Verdict, passage_names
from .. import zh
from ..claims import ClaimSpan, sentence_spans, split_claims
from ..contrast import cause_effect_reversed, direction_reversed
from ..evidence_check import missing_from, names_absent
from ..lexical import CJK_CHAR, context_units, pairs, units
from ..numbers import Quantity, QuantityIndex, extract_quantities
from ..scoring import counted
from ..structured import (
    DATE_KIND,
    MONTH_KIND,
    codes,
    has_structured,
    statement_quantities,
    tool_records,
    with_dates,
)
from ._calibration import Calibration, default_calibration
from ._features import ClaimFeatures, margin

# Kinds of the whole dates read in structured tool outputs (and in claims beside them).
_WHOLE_DATES = frozenset({DATE_KIND, MONTH_KIND})
# Sentences longer than this are cut into chunks (tables, unpunctuated scraped text), so that
# evidence stays a readable span and alignment stays local.
_MAX_SENTENCE_CHARS = 400
# Past this many characters of context, passages are cut into fixed-size chunks instead of
# sentences: splitting millions of characters into tiny sentences costs seconds in Python, and
# chunk-level alignment is still good evidence.
_SENTENCE_MODE_MAX_CHARS = 300_000
# Candidate generation reads at most this many postings per unit: very frequent units carry
# little weight anyway and would make huge contexts quadratic.
_MAX_POSTINGS = 512
# How many top candidate sentences get an exact coverage computation.
_CANDIDATES = 6

# A number conflict counts as a contradiction only when the evidence sentence is about the
# same thing: at least half of the claim's (weighted) words are in it. Otherwise two numbers
# of the same kind may simply describe different facts ("visited in 2019" vs "built in 1889").
_CONFLICT_MIN_COVER = 0.5

DEFAULT_SUPPORT_THRESHOLD = 0.8
"""Alignment with one sentence (``ClaimFeatures.sentence_score``) for ``supported``: the claim's
words and word pairs are nearly all in one sentence."""
DEFAULT_INFER_THRESHOLD = 0.45
"""Alignment with the context (``ClaimFeatures.score``) for ``inferred``; chosen on the dev
data (docs/judges.md, "How the local judge decides")."""
DEFAULT_QUESTION_WEIGHT = 0.5
"""Weight factor of claim units that come from the question (echoes are weak evidence)."""


@dataclass
class _Sentence:
    passage: int
    start: int
    end: int
    units: frozenset[str]
    pairs: frozenset[str]
    negated: bool
    size: int
    quantities: list[Quantity] = field(default_factory=list)


def _chunks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence into chunks at spaces or commas where possible."""
    out: list[tuple[int, int]] = []
    pos = start
    while end - pos > _MAX_SENTENCE_CHARS:
        limit = pos + _MAX_SENTENCE_CHARS
        cut = max(text.rfind(" ", pos + 100, limit), text.rfind("，", pos + 100, limit))
        if cut <= pos:
            cut = limit
        out.append((pos, cut))
        pos = cut
        while pos < end and text[pos].isspace():
            pos += 1
    if end > pos:
        out.append((pos, end))
    return out


class _ContextIndex:
    """Sentences of all passages with an inverted index, built once per judge call."""

    def __init__(
        self, passages: Sequence[Passage], relevant: set[str], with_quantities: bool = True
    ) -> None:
        """Index ``passages``, keeping only the units in ``relevant`` (the claims' units).

        Units no claim uses cannot change any coverage, so they are dropped right after
        tokenisation: sets, pairs and postings stay small even for very long contexts.
        """
        self.sentences: list[_Sentence] = []
        self.postings: dict[str, list[int]] = {}
        self.df: dict[str, int] = {}
        self.all_units: set[str] = set()
        self.all_pairs: set[str] = set()
        seen: set[str] = set()
        quantities: list[tuple[Quantity, int]] = []
        seen_passages: set[str] = set()
        # What a tool's structured output says in words: per sentence (its record's
        # statement) and per passage (its text and every statement), for the checks that read
        # a claim's numbers, dates and names in the evidence.
        self.statements: dict[int, str] = {}
        self.readable: dict[int, str] = {}
        self.record_names: dict[int, tuple[tuple[str, str], ...]] = {}
        coarse = sum(len(p.text) for p in passages) > _SENTENCE_MODE_MAX_CHARS
        for pi, passage in enumerate(passages):
            text = passage.text
            if text in seen_passages:  # the same passage retrieved twice: index it once
                continue
            seen_passages.add(text)
            # Numbers are found on the whole passage (one regex pass), then handed to the
            # sentences that contain them, in order.
            passage_qs = (
                sorted(extract_quantities(text), key=lambda q: q.start) if with_quantities else []
            )
            records = tool_records(passage)
            if records:
                # A tool's structured output: one sentence per record, read through its
                # statement (fields in words, units beside their numbers, dates written out)
                # while its span, and so any evidence, stays in the passage's own text.
                self.readable[pi] = text + "\n" + "\n".join(r.statement for r in records)
                for record in records:
                    said = record.statement
                    if said in seen:
                        continue
                    seen.add(said)
                    said_qs = statement_quantities(said) if with_quantities else []
                    # Dates are masked as a whole in a claim; in a statement their words stay
                    # too ("on March 15" finds "March 15, 2024") beside the date's own unit.
                    whole = [q for q in said_qs if q.kind in _WHOLE_DATES]
                    parts = [q for q in said_qs if q.kind not in _WHOLE_DATES]
                    masked = _mask(said, parts) if parts else said
                    extra = codes(said) + [f"zq{k}" for k in {q.kind for q in whole}]
                    sid = self._add(pi, record.start, record.end, masked, said_qs, relevant, extra)
                    self.statements[sid] = said
                    self.record_names[sid] = record.names
                    quantities.extend((q, sid) for q in said_qs)
                continue
            qi = 0
            spans = [(0, len(text))] if coarse else sentence_spans(text)
            for s_start, s_end in spans:
                for c_start, c_end in _chunks(text, s_start, s_end):
                    while qi < len(passage_qs) and passage_qs[qi].start < c_start:
                        qi += 1
                    qs: list[Quantity] = []
                    while qi < len(passage_qs) and passage_qs[qi].start < c_end:
                        qs.append(passage_qs[qi])
                        qi += 1
                    chunk = text[c_start:c_end]
                    if chunk in seen:  # repeated boilerplate: index the first copy only
                        continue
                    seen.add(chunk)
                    masked = _mask(chunk, qs, c_start) if qs else chunk
                    sid = self._add(pi, c_start, c_end, masked, qs, relevant)
                    quantities.extend((q, sid) for q in qs)
        self.all_units = set(self.df)
        self.texts = [p.text for p in passages]
        # What reasons call each passage: its number, or a tool's name for a tool's output.
        self.names = (
            passage_names(passages)
            if any(p.kind != "retrieved" or p.tool for p in passages)
            else None
        )
        self._joined: str | None = None
        self.quantities = QuantityIndex(quantities)
        self._n1 = len(self.sentences) + 1.0
        self._absent_idf = math.log(1.0 + self._n1)

    def _add(
        self,
        pi: int,
        start: int,
        end: int,
        words: str,
        qs: list[Quantity],
        relevant: set[str],
        extra: Sequence[str] = (),
    ) -> int:
        """Index one sentence of passage ``pi`` (``start``/``end`` in its text) whose words are
        ``words`` (its numbers already masked, see :func:`_mask`) and ``extra`` units; returns
        its id."""
        found, negated = context_units(words)
        # Positions of relevant units; pairs only between relevant units at most one unit
        # apart (the gappy pairs of the whole sequence, restricted).
        rel = [(i, u) for i, u in enumerate(found) if u in relevant]
        unit_set = frozenset(u for _, u in rel).union(u for u in extra if u in relevant)
        pair_set = frozenset(
            a + " " + b for k, (i, a) in enumerate(rel) for j, b in rel[k + 1 : k + 3] if j - i <= 2
        )
        sid = len(self.sentences)
        self.sentences.append(
            _Sentence(pi, start, end, unit_set, pair_set, negated, len(found), qs)
        )
        postings = self.postings
        df = self.df
        for u in unit_set:
            post = postings.get(u)
            if post is None:
                postings[u] = [sid]
                df[u] = 1
            else:
                df[u] += 1
                if len(post) < _MAX_POSTINGS:
                    post.append(sid)
        self.all_pairs |= pair_set
        return sid

    def idf(self, unit: str) -> float:
        """Smoothed inverse sentence frequency: never 0, and a unit absent from the context
        weighs only a little more than a rare one (a claim is not failed by one odd word)."""
        df = self.df.get(unit)
        if df is None:
            return self._absent_idf
        return math.log(1.0 + self._n1 / (df + 1.0))

    @property
    def joined(self) -> str:
        """All passage texts in one string, for substring look-ups (built on first use)."""
        if self._joined is None:
            self._joined = "\n".join(self.readable.get(i, t) for i, t in enumerate(self.texts))
        return self._joined

    def text_of(self, sid: int) -> str:
        s = self.sentences[sid]
        return self.texts[s.passage][s.start : s.end]

    def said(self, sid: int) -> str:
        """What a sentence says: its text, or for a record of a structured tool output the
        record's statement (the words the judge aligned, not the JSON)."""
        return self.statements.get(sid) or self.text_of(sid)

    def neighbours(self, sid: int) -> list[int]:
        """The sentence and its neighbours within the same passage."""
        p = self.sentences[sid].passage
        out = [sid]
        if sid > 0 and self.sentences[sid - 1].passage == p:
            out.insert(0, sid - 1)
        if sid + 1 < len(self.sentences) and self.sentences[sid + 1].passage == p:
            out.append(sid + 1)
        return out


@dataclass(frozen=True)
class _ParsedClaim:
    """A claim span with what the judge reads from it, computed once."""

    span: ClaimSpan
    units: list[str]
    negated: bool
    names: list[str]
    quantities: list[Quantity]


def _parse(span: ClaimSpan, dates: bool = False) -> _ParsedClaim:
    """Read a claim. With ``dates`` (the context has a structured tool output, whose dates are
    compared whole), a whole date in the claim is one quantity rather than its numbers."""
    quantities = extract_quantities(span.text)
    if dates:
        quantities = with_dates(span.text, quantities, keep_parts=False)
    # Numbers are compared as quantities, so their digits, numerals and unit words are no
    # words to align: "1.5 km" must not miss "1500 m" for want of the word "km".
    found, negated, names = units(_mask(span.text, quantities))
    if dates:  # ids ("A-17", "SKU-3") pick the record out of the rows
        found += codes(span.text)
    return _ParsedClaim(span, found, negated, names, quantities)


def _mask(text: str, quantities: Sequence[Quantity], offset: int = 0) -> str:
    """``text`` with every quantity mention replaced by a word naming its kind.

    Both sides of the alignment are masked the same way, so "1.5 km long" and "1500 m long"
    read alike as words (``zqlength long``) while the values are compared as quantities.
    ``offset`` is where ``text`` starts in the text the quantities' offsets refer to.
    """
    if not quantities:
        return text
    out: list[str] = []
    pos = 0
    for q in sorted(quantities, key=lambda q: q.start):
        start, end = q.start - offset, q.end - offset
        if start < pos or start < 0 or end > len(text):
            continue
        out.append(text[pos:start])
        out.append(f" zq{q.kind} ")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _index_for(contexts: Sequence[Passage], claims: list[_ParsedClaim]) -> _ContextIndex:
    relevant: set[str] = set()
    for c in claims:
        relevant.update(c.units)
    # The context's numbers matter only when a claim states one.
    return _ContextIndex(contexts, relevant, with_quantities=any(c.quantities for c in claims))


class LocalJudge:
    """Lexical and numeric alignment of each claim with the passages (the embedded default).

    By default a fitted logistic model turns each claim's measurements into the probability that
    the context backs it (see :mod:`groundwatch.judging.judges._calibration`): a claim is backed at
    ``min_probability`` or above, ``supported`` when one sentence states it and ``inferred``
    otherwise, and ``Claim.confidence`` is the calibrated probability that the verdict is right.
    ``calibrated=False`` decides with the two alignment thresholds instead.

    Args:
        support_threshold: alignment with one sentence for ``supported``.
        infer_threshold: overall alignment (sentence, neighbours, whole context) for
            ``inferred``; used only with ``calibrated=False``.
        question_weight: weight of claim words that come from the question, in [0, 1].
        calibrated: decide with the fitted model (default) or with the thresholds.
        min_probability: probability of being backed from which a claim is supported or
            inferred; ``None`` takes the calibration's own threshold.
        calibration: another fitted model (benchmarks refit it per fold); ``None`` takes the
            one shipped with the package.
    """

    name = "local"

    candidate_windows = 0
    """How many evidence windows (the aligned one first) each claim's measurements list in
    ``ClaimFeatures.candidate_windows``, for a judge built on this one that reads more than the
    aligned window; 0, the default, lists none and costs nothing."""

    def __init__(
        self,
        support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
        infer_threshold: float = DEFAULT_INFER_THRESHOLD,
        question_weight: float = DEFAULT_QUESTION_WEIGHT,
        *,
        calibrated: bool = True,
        min_probability: float | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        for label, value in (
            ("support_threshold", support_threshold),
            ("infer_threshold", infer_threshold),
            ("question_weight", question_weight),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{label} must be within [0, 1], got {value!r}")
        self.support_threshold = support_threshold
        self.infer_threshold = min(infer_threshold, support_threshold)
        self.question_weight = question_weight
        self.calibration = (calibration or default_calibration()) if calibrated else None
        if min_probability is not None and not 0.0 <= min_probability <= 1.0:
            raise ValueError(f"min_probability must be within [0, 1], got {min_probability!r}")
        self.min_probability = (
            min_probability
            if min_probability is not None
            else (self.calibration.threshold if self.calibration else 0.5)
        )

    # -- public ---------------------------------------------------------------------------------

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        """Split ``answer`` into claims and judge each against ``contexts``."""
        judged = self.judge_with_features(answer, contexts, question)
        return Judgement(claims=[claim for claim, _ in judged])

    def judge_with_features(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> list[tuple[Claim, ClaimFeatures]]:
        """Each claim with its verdict and the measurements behind it (for judges that build on
        this one, like :class:`~groundwatch.judging.judges.semantic.SemanticJudge`)."""
        spans = split_claims(answer)
        if not spans:
            return []
        dates = has_structured(contexts)
        parsed = [_parse(span, dates) for span in spans]
        index = _index_for(contexts, parsed)
        q_units = set(units(question)[0]) if question else set()
        return [self._judge_claim(c, index, contexts, q_units, question or "") for c in parsed]

    def features(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> list[ClaimFeatures]:
        """The measurements behind each claim's verdict (for calibration and benchmarks)."""
        dates = has_structured(contexts)
        parsed = [_parse(span, dates) for span in split_claims(answer)]
        index = _index_for(contexts, parsed)
        q_units = set(units(question)[0]) if question else set()
        return [self._measure(c, index, q_units, question or "") for c in parsed]

    def closest(
        self, claim: str, contexts: Sequence[Passage], question: str | None = None
    ) -> tuple[int, int, int] | None:
        """``(passage, start, end)`` of the passage sentence this judge aligns ``claim`` with
        best: the sentence its reasons call the closest. ``None`` when no sentence shares a
        unit with the claim. For reports that point the reader at it (a pointer, not evidence);
        give the same question as to :meth:`judge`, which weighs the claim's words by it."""
        parsed = _parse(ClaimSpan(claim, 0, len(claim)), has_structured(contexts))
        index = _index_for(contexts, [parsed])
        q_units = set(units(question)[0]) if question else set()
        return self._measure(parsed, index, q_units, question or "").best_span

    # -- internals ------------------------------------------------------------------------------

    def _measure(
        self, claim: _ParsedClaim, index: _ContextIndex, q_units: set[str], question: str = ""
    ) -> ClaimFeatures:
        """Everything the judge measures for one claim, in steps: the candidate sentences, the
        claim's numbers, its coverage by the whole context, its novel names, the best-aligned
        sentence and window, and what that evidence says against the claim."""
        found = claim.units
        unique = list(dict.fromkeys(found))
        f = ClaimFeatures(
            n_units=len(found),
            negated=claim.negated,
            cjk=CJK_CHAR.search(claim.span.text) is not None,
            question_share=sum(u in q_units for u in unique) / len(unique) if unique else 0.0,
        )
        weights = {
            u: index.idf(u) * (self.question_weight if u in q_units else 1.0) for u in unique
        }
        total = sum(weights.values())
        claim_pairs = pairs(found)
        acc = _candidate_weights(index, unique, weights)
        unmatched, matched = _match_quantities(f, claim, index)
        # A sentence that holds the claim's matched numbers is a strong candidate too.
        for _, sid in matched:
            acc[sid] = acc.get(sid, 0.0) + 0.5 * (total / max(len(unique), 1) or 1.0)
        _measure_context(f, index, weights, total, claim_pairs)
        f.novel_terms = _novel_terms(claim, index, q_units, question, f.cjk)
        f.novel_names = len(f.novel_terms)
        top = _align(f, index, acc, weights, total, claim_pairs)
        if f.best is not None:
            _measure_evidence(f, claim, index, weights, unmatched, matched, top)
            if self.candidate_windows:
                _list_windows(f, index, top, self.candidate_windows)
        return f

    def decide(self, f: ClaimFeatures) -> tuple[Verdict, str, float, str]:
        """Turn a claim's measurements into ``(verdict, reason, confidence, evidence)``.

        ``evidence`` names what backs the verdict: ``"conflict"`` (the sentence stating another
        value), ``"best"`` (the aligned sentence), ``"cover"`` (the aligned sentence and the
        neighbours that add to it) or ``"none"``. Every reason names what decided it.
        """
        cal = self.calibration
        rule = rule_of(f, calibrated=cal is not None)
        if rule is not None:
            verdict, reason, backing = _RULE_VERDICTS[rule](f)
            if cal is not None:
                return verdict, reason, cal.precision_of(rule, f), backing
            return verdict, reason, _uncalibrated_confidence(rule, f), backing
        if f.record_values:
            # A record says its values under field names, not in the answer's words ("weighs"
            # for "weight_kg"): the values themselves, all there, are the support.
            return "supported", _record_reason(f), 0.8, "cover"
        if cal is None:
            return self._decide_by_thresholds(f)
        p = cal.probability(f)
        if f.best is not None and p >= self.min_probability:
            if f.sentence_score >= self.support_threshold:
                return "supported", _aligned_reason(f), p, "cover"
            return "inferred", _covered_reason(f), p, "cover"
        if f.n_units == 0 and f.numbers and f.best is not None:
            return "supported", "its numbers are stated in the context", max(p, 0.6), "best"
        return "unsupported", _weak_reason(f), 1.0 - p, "none"

    def _decide_by_thresholds(self, f: ClaimFeatures) -> tuple[Verdict, str, float, str]:
        """The uncalibrated rule: alignment thresholds, confidence from the margin."""
        support = f.sentence_score
        infer = f.score
        if f.best is not None and support >= self.support_threshold:
            return (
                "supported",
                _aligned_reason(f),
                margin(support, self.support_threshold),
                "cover",
            )
        if f.best is not None and infer >= self.infer_threshold:
            return (
                "inferred",
                _covered_reason(f),
                0.25 + 0.5 * margin(infer, self.infer_threshold),
                "cover",
            )
        if f.n_units == 0 and f.numbers and f.best is not None:
            return "supported", "its numbers are stated in the context", 0.6, "best"
        return "unsupported", _weak_reason(f), margin(infer, self.infer_threshold), "none"

    def _judge_claim(
        self,
        claim: _ParsedClaim,
        index: _ContextIndex,
        contexts: Sequence[Passage],
        q_units: set[str],
        question: str,
    ) -> tuple[Claim, ClaimFeatures]:
        f = self._measure(claim, index, q_units, question)
        span = claim.span
        verdict, reason, confidence, backing = self.decide(f)
        sentences = index.sentences
        evidence: list[Evidence] = []
        if backing == "conflict" and f.conflict is not None:
            evidence = [_evidence(sentences[f.conflict], contexts)]
        elif backing == "best" and f.best is not None:
            evidence = [_evidence(sentences[f.best], contexts)]
        elif backing == "cover" and f.best is not None:
            evidence = [_evidence(sentences[i], contexts) for i in _cover_set(f, index, claim)]
        claim_out = Claim(
            text=span.text,
            start=span.start,
            end=span.end,
            verdict=verdict,
            evidence=evidence,
            reason=reason,
            confidence=round(max(0.0, min(1.0, confidence)), 3),
        )
        return claim_out, f


# Clause boundaries inside one sentence, English and Chinese.
# --- the steps of LocalJudge._measure ------------------------------------------------------------


def _candidate_weights(
    index: _ContextIndex, unique: Sequence[str], weights: dict[str, float]
) -> dict[int, float]:
    """Candidate sentences: the claim's unit weights accumulated through the postings."""
    acc: dict[int, float] = {}
    for u in unique:
        post = index.postings.get(u)
        if post is None:
            continue
        w = weights[u]
        for sid in post:
            acc[sid] = acc.get(sid, 0.0) + w
    return acc


def _match_quantities(
    f: ClaimFeatures, claim: _ParsedClaim, index: _ContextIndex
) -> tuple[list[Quantity], list[tuple[Quantity, int]]]:
    """The claim's numbers the context states nowhere, and those it states with the sentence
    that states each (counted in ``f.numbers`` and ``f.numbers_unmatched``)."""
    unmatched: list[Quantity] = []
    matched: list[tuple[Quantity, int]] = []
    for q in claim.quantities:
        hit = index.quantities.find_match(q)
        if hit is None:
            unmatched.append(q)
        else:
            matched.append((q, hit[1]))
    f.numbers = len(claim.quantities)
    f.numbers_unmatched = len(unmatched)
    return unmatched, matched


def _measure_context(
    f: ClaimFeatures,
    index: _ContextIndex,
    weights: dict[str, float],
    total: float,
    claim_pairs: set[str],
) -> None:
    """The claim's coverage by the whole context: its weighted units and its unit pairs."""
    if total > 0:
        covered = sum(w for u, w in weights.items() if u in index.all_units)
        f.cover_context = covered / total
    if claim_pairs:
        f.pair_context = len(claim_pairs & index.all_pairs) / len(claim_pairs)


def _novel_terms(
    claim: _ParsedClaim, index: _ContextIndex, q_units: set[str], question: str, cjk: bool
) -> list[str]:
    """Names (and, for Chinese, nouns) of the claim that neither the context nor the question
    mentions."""
    novel = [n for n in dict.fromkeys(claim.names) if n not in index.all_units and n not in q_units]
    if cjk:
        known = index.joined + "\n" + question
        novel += [n for n in names_absent(claim.span.text, known) if n not in novel]
        novel += zh.novel_terms(claim.span.text, index.joined, question)
    return novel


def _align(
    f: ClaimFeatures,
    index: _ContextIndex,
    acc: dict[int, float],
    weights: dict[str, float],
    total: float,
    claim_pairs: set[str],
) -> list[tuple[int, float]]:
    """Pick the best-aligned sentence among the top candidates (``f.best``, its coverage, its
    window of neighbours); returns the candidates, best first by accumulated weight."""
    if not acc:
        return []
    sentences = index.sentences
    top = heapq.nlargest(_CANDIDATES, acc.items(), key=lambda kv: (kv[1], -kv[0]))
    best_key: tuple[float, float, int] | None = None
    for sid, _ in top:
        s = sentences[sid]
        cov = sum(w for u, w in weights.items() if u in s.units) / total if total else 0.0
        pc = len(claim_pairs & s.pairs) / len(claim_pairs) if claim_pairs else cov
        window = index.neighbours(sid)
        if len(window) > 1:
            wunits = frozenset().union(*(sentences[i].units for i in window))
            wcov = sum(w for u, w in weights.items() if u in wunits) / total if total else 0
        else:
            wcov = cov
        key = (cov + pc, wcov, -sid)
        if best_key is None or key > best_key:
            best_key = key
            f.best = sid
            f.cover_sentence = cov
            f.pair_sentence = pc
            f.cover_window = max(wcov, cov)
            f.window = window
    return top


def _measure_evidence(
    f: ClaimFeatures,
    claim: _ParsedClaim,
    index: _ContextIndex,
    weights: dict[str, float],
    unmatched: Sequence[Quantity],
    matched: Sequence[tuple[Quantity, int]],
    top: Sequence[tuple[int, float]],
) -> None:
    """What the best sentence and its window say against the claim: where they are, a
    conflicting value, a flipped negation, what they lack, a reversed direction or cause."""
    assert f.best is not None
    sentences = index.sentences
    best = sentences[f.best]
    f.best_span = (best.passage, best.start, best.end)
    f.window_span = _window_span(index, f.window)
    _find_conflict(f, claim, index, weights, unmatched, matched, top)
    # Negation: compared on the clauses of the evidence that the claim aligns with, so a "not"
    # in another clause of the same sentence ("... and has no processing fee") is not counted
    # against a claim that leaves that clause out.
    evidence = index.said(f.best)
    f.closest = _closest(index, f.best)
    f.negation_unbacked = claim.negated and not any(sentences[i].negated for i in f.window)
    if claim.negated or best.negated:
        f.negation_flip = f.cover_sentence >= 0.6 and _negation_differs(claim, evidence, weights)
    _find_lacks(f, claim, index)
    if f.cover_sentence >= 0.6:
        text = claim.span.text
        f.direction_flip = direction_reversed(text, _aligned_clause(evidence, weights))
        f.causal_flip = cause_effect_reversed(text, evidence, _unit_set)


def _window_span(index: _ContextIndex, window: Sequence[int]) -> tuple[int, int, int]:
    """``(passage, start, end)`` of a run of adjacent sentences of one passage."""
    sentences = index.sentences
    return (
        sentences[window[0]].passage,
        min(sentences[i].start for i in window),
        max(sentences[i].end for i in window),
    )


def _list_windows(
    f: ClaimFeatures, index: _ContextIndex, top: Sequence[tuple[int, float]], most: int
) -> None:
    """``f.candidate_windows``: the aligned window, then the windows of the other candidate
    sentences by the claim weight they hold, at most ``most`` distinct ones."""
    assert f.window_span is not None
    windows = [f.window_span]
    for sid, _ in top:
        if len(windows) >= most:
            break
        span = _window_span(index, index.neighbours(sid))
        if span not in windows:
            windows.append(span)
    f.candidate_windows = tuple(windows)


def _find_conflict(
    f: ClaimFeatures,
    claim: _ParsedClaim,
    index: _ContextIndex,
    weights: dict[str, float],
    unmatched: Sequence[Quantity],
    matched: Sequence[tuple[Quantity, int]],
    top: Sequence[tuple[int, float]],
) -> None:
    """``f.conflict``: a sentence stating another value of the same kind as one of the claim's
    numbers, another row's value of a structured record, or (``f.conflict_value``) a record's
    field named other than the claim says."""
    assert f.best is not None
    sentences = index.sentences
    # Numbers: the evidence states another value of the same kind -> contradiction. Judged on
    # the part of the claim that holds the number, so a clause the claim adds ("... and
    # include shipping costs") cannot hide a changed value.
    if unmatched:
        candidates = [f.best] + [i for i in f.window if i != f.best]
        candidates += [sid for sid, _ in top if sid not in candidates]
        segments = [(q, _segment_weights(claim, q, weights)) for q in unmatched]
        f.conflict = next(
            (
                sid
                for sid in candidates
                if any(
                    _share(seg, sentences[sid].units) >= _conflict_cover(index, f, sid, q)
                    and any(_conflicts(q, x, claim, index, sid) for x in sentences[sid].quantities)
                    for q, seg in segments
                )
            ),
            None,
        )
    if f.conflict is None and f.best in index.statements:
        f.conflict = _other_row_value(claim, f, index, matched)
    if (
        f.conflict is None
        and f.best in index.record_names
        and (f.novel_terms or _absent_codes(claim, index))
    ):
        f.conflict_value = _replaced_name(claim, f, index, f.best)
        if f.conflict_value is not None:
            f.conflict = f.best


def _closest(index: _ContextIndex, sid: int) -> str:
    """Where a sentence is and how it begins, for reasons ("passage 2: 'The tower…'")."""
    shown = index.text_of(sid)  # reasons quote the passage itself
    snippet = shown if len(shown) <= 60 else shown[:57].rstrip() + "..."
    passage = index.sentences[sid].passage
    # Numbered from 1, as people count (and as reports number passages).
    name = f"passage {passage + 1}" if index.names is None else index.names[passage]
    return f"{name}: {snippet!r}"


def _find_lacks(f: ClaimFeatures, claim: _ParsedClaim, index: _ContextIndex) -> None:
    """``f.evidence_lacks``: the numbers and names of the claim its evidence (the sentences that
    cover it, with their passages) lacks; for a structured record, the claim's clauses it does
    not back, and whether the claim restates the record's values (``f.record_values``)."""
    assert f.best is not None
    sentences = index.sentences
    if claim.quantities or claim.names or f.cjk:
        sids = _cover_set(f, index, claim)
        texts = [index.said(i) for i in sids]
        passages = sorted({sentences[i].passage for i in sids})
        texts += [index.readable.get(p, index.texts[p]) for p in passages]
        f.evidence_lacks = missing_from(claim.span.text, texts)
    if f.best in index.statements and not f.evidence_lacks:
        have = frozenset().union(*(sentences[i].units for i in f.window))
        f.evidence_lacks = _unbacked_clauses(claim, have)
        f.record_values = _restates_record(claim, f, index)


_CLAUSE = re.compile(
    r"[,;:，；：、]\s*|\s+(?:and|but|while|whereas|although|though|yet|which|who|so)\s+"
    r"|(?:但是|但|而且|并且|而|却|同时|所以|因此)"
)
_PLACEHOLDER = "zq"


def _unit_set(text: str) -> set[str]:
    return set(units(text)[0])


# A further clause joins the aligned span when it adds this share of the claim's weight.
_CLAUSE_MIN_GAIN = 0.2


def _clause_units(text: str) -> list[tuple[list[str], bool]]:
    """The content units and the negation of each clause of ``text``."""
    out: list[tuple[list[str], bool]] = []
    pos = 0
    for m in [*_CLAUSE.finditer(text), None]:
        end = len(text) if m is None else m.start()
        found, negated = context_units(text[pos:end])
        if found or negated:
            out.append((found, negated))
        if m is not None:
            pos = m.end()
    return out


def _aligned_clause(sentence: str, weights: dict[str, float]) -> str:
    """The clause of ``sentence`` that holds most of a claim's weight."""
    best, best_w = sentence, 0.0
    pos = 0
    for m in [*_CLAUSE.finditer(sentence), None]:
        end = len(sentence) if m is None else m.start()
        w = sum(weights.get(u, 0.0) for u in set(context_units(sentence[pos:end])[0]))
        if w > best_w:
            best, best_w = sentence[pos:end], w
        if m is not None:
            pos = m.end()
    return best


def _negation_differs(claim: _ParsedClaim, sentence: str, weights: dict[str, float]) -> bool:
    """Whether a clause of the claim negates where the evidence it aligns with does not, or
    the reverse.

    Each clause of the claim is aligned with clauses of the evidence sentence, greedily: the
    one holding most of its weight, then each further one that adds a fair share of the units
    still missing. Negation is compared on that aligned span only, so a "not" in another clause
    of the same sentence ("... and has no processing fee") does not count against a claim that
    leaves that clause out, and a flipped clause is caught even inside a long sentence.
    """
    evidence = [
        (set(found) & weights.keys(), neg, len(found)) for found, neg in _clause_units(sentence)
    ]
    if not evidence:
        return False
    for found, claim_negated in _clause_units(_mask(claim.span.text, claim.quantities)):
        own = {u: weights.get(u, 1.0) for u in found if not u.startswith(_PLACEHOLDER)}
        total = sum(own.values())
        if len(own) < 2 or total <= 0:
            continue
        covered: set[str] = set()
        span_negated = False
        span_size = 0
        for units_in, neg, size in sorted(
            evidence, key=lambda c: -sum(own.get(u, 0.0) for u in c[0])
        ):
            gain = sum(own.get(u, 0.0) for u in units_in - covered)
            if gain <= 0 or (covered and gain < _CLAUSE_MIN_GAIN * total):
                continue
            covered |= units_in
            span_negated = span_negated or neg
            span_size += size
        if sum(own.get(u, 0.0) for u in covered) < 0.6 * total:
            continue  # this clause is not what the sentence says; nothing to compare
        if claim_negated != span_negated and (claim_negated or span_size <= 2 * len(found) + 2):
            return True
    return False


# A record of a structured tool output names its fields, not the answer's words ("weight_kg"
# for "weighs"): a number of a measured kind (money, mass, a date) conflicts with the record's
# value of that kind once a quarter of its clause is in the record. Counts and years, which
# any record may hold for other reasons, keep the prose threshold.
_RECORD_CONFLICT_MIN_COVER = 0.25
# A replaced name counts as a conflict only when the record is about the claim.
_RECORD_NAME_MIN_COVER = 0.3
# A number matched in another row counts against the aligned row only when the claim is
# plainly about that row (half its words, ids included, are in it).
_RECORD_ROW_MIN_COVER = 0.5


def _conflict_cover(index: _ContextIndex, f: ClaimFeatures, sid: int, q: Quantity) -> float:
    """The share of a number's clause that sentence ``sid`` must hold for a conflict: for the
    record the claim aligns with best (the claim is about it), none."""
    if sid in index.statements and q.kind not in ("count", "year"):
        if sid == f.best and f.cover_sentence >= _RECORD_NAME_MIN_COVER:
            return 0.0
        return _RECORD_CONFLICT_MIN_COVER
    return _CONFLICT_MIN_COVER


def _conflicts(
    q: Quantity, x: Quantity, claim: _ParsedClaim, index: _ContextIndex, sid: int
) -> bool:
    """``q`` of the claim conflicts with ``x`` of sentence ``sid``. In a record, a value the
    claim states elsewhere is taken ("$182.35 ... and a $0.50 dividend" does not contradict the
    price): only a value the claim leaves out can be the one it changed."""
    if not q.conflicts(x):
        return False
    return sid not in index.statements or not any(o.matches(x) for o in claim.quantities)


def _other_row_value(
    claim: _ParsedClaim,
    f: ClaimFeatures,
    index: _ContextIndex,
    matched: Sequence[tuple[Quantity, int]],
) -> int | None:
    """The best record when the claim is plainly about it and states, for one of its values,
    the value of another record (row SKU-3 costs 13 EUR, the claim says 31 EUR: SKU-21's
    price). Among rows, a number found somewhere is not yet a number found where it belongs."""
    assert f.best is not None
    if f.cover_sentence < _RECORD_ROW_MIN_COVER:
        return None
    window = set(f.window)
    best = index.sentences[f.best]
    for q, sid in matched:
        if sid in window or any(
            q.matches(x) for i in window for x in index.sentences[i].quantities
        ):
            continue
        if q.kind not in ("count", "year") and any(
            _conflicts(q, x, claim, index, f.best) for x in best.quantities
        ):
            return f.best
    return None


def _restates_record(claim: _ParsedClaim, f: ClaimFeatures, index: _ContextIndex) -> bool:
    if not claim.quantities or f.numbers_unmatched or f.novel_names or f.evidence_lacks:
        return False
    if f.cover_sentence < _RECORD_NAME_MIN_COVER:
        return False
    stated = [x for i in f.window for x in index.sentences[i].quantities]
    return all(any(q.matches(x) for x in stated) for q in claim.quantities)


def _record_reason(f: ClaimFeatures) -> str:
    return (
        f"its {counted(f.numbers, 'number')} and names are the values of the record it aligns"
        f" with ({f.closest})"
    )


def _unbacked_clauses(claim: _ParsedClaim, have: frozenset[str]) -> list[str]:
    """Clauses of a claim aligned with a record that the record says nothing of: no number,
    and none of two or more words in it ("..., and the roads are closed" against a weather
    record). A record states its fields and nothing else, so such a clause is added."""
    text = claim.span.text
    out: list[str] = []
    pos = 0
    for m in [*_CLAUSE.finditer(text), None]:
        end = len(text) if m is None else m.start()
        if not any(pos <= q.start < end for q in claim.quantities):
            words = [u for u in context_units(text[pos:end])[0] if not u.startswith(_PLACEHOLDER)]
            if len(words) >= 2 and not have.intersection(words):
                out.append(text[pos:end].strip(" .;,"))
        if m is not None:
            pos = m.end()
    return out


_CODE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,5}(?![\w-])")


def _absent_codes(claim: _ParsedClaim, index: _ContextIndex) -> bool:
    """Whether the claim names, in capitals (UPS, NYSE), something the context never says:
    the name check leaves such abbreviations out for prose, a record's values are often so."""
    return any(
        re.search(r"(?<!\w)" + re.escape(m.group(0)) + r"(?!\w)", index.joined, re.I) is None
        for m in _CODE.finditer(claim.span.text)
    )


def _replaced_name(
    claim: _ParsedClaim, f: ClaimFeatures, index: _ContextIndex, sid: int
) -> str | None:
    """The field of record ``sid`` whose name the claim states another name in place of:
    the claim names something the context never mentions, the record is about the claim, and
    the record holds a name the claim leaves out, in a field the claim names ("the carrier
    UPS" against "carrier is DHL") or as the only name it leaves out."""
    if f.cover_sentence < _RECORD_NAME_MIN_COVER:
        return None
    text = claim.span.text.lower()
    stems = set(claim.units)
    left_out = [
        (field, value)
        for field, value in index.record_names.get(sid, ())
        if not all(
            re.search(r"(?<!\w)" + re.escape(w.lower()) + r"(?!\w)", text)
            for w in re.findall(r"\w{2,}", value)
        )
    ]
    named = [(k, v) for k, v in left_out if set(units(k)[0]) & stems]
    chosen = named[0] if named else (left_out[0] if len(left_out) == 1 else None)
    return None if chosen is None else f"{chosen[0]} is {chosen[1]}"


def _segment_weights(
    claim: _ParsedClaim, q: Quantity, weights: dict[str, float]
) -> dict[str, float]:
    """The weights of the words in the clause of the claim that states ``q`` (no number
    placeholders: those match any number of the same kind)."""
    text = claim.span.text
    start, end = 0, len(text)
    for m in _CLAUSE.finditer(text):
        if m.end() <= q.start:
            start = m.end()
        elif m.start() >= q.end:
            end = m.start()
            break
    found = units(_mask(text[start:end], claim.quantities, start))[0]
    return {u: weights.get(u, 1.0) for u in found if not u.startswith(_PLACEHOLDER)}


def _share(weights: dict[str, float], have: frozenset[str]) -> float:
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for u, w in weights.items() if u in have) / total


def rule_of(f: ClaimFeatures, *, calibrated: bool = True) -> str | None:
    """The rule that decides a claim, in the judge's order (one of ``_calibration.RULES``), or
    None when the coverage measurements decide. The unbacked-negation rule belongs to the
    calibrated judge only."""
    if f.best is not None:
        if f.conflict is not None:
            return "conflict"
        if f.negation_flip:
            return "negation"
        if f.direction_flip:
            return "direction"
        if f.causal_flip:
            return "causal"
    if f.numbers_unmatched:
        return "number"
    if f.novel_names:
        return "name"
    if f.negation_unbacked and calibrated:
        return "negated"
    if f.evidence_lacks:
        return "evidence"
    return None


def _uncalibrated_confidence(rule: str, f: ClaimFeatures) -> float:
    """A rule's confidence without a calibration: how clearly its evidence shows it."""
    if rule == "conflict":
        return 0.6 + 0.4 * min(1.0, f.cover_window)
    if rule in ("negation", "direction", "causal"):
        return 0.4 + 0.4 * f.cover_sentence
    if rule == "number":
        return 0.6 + 0.3 * min(1.0, f.numbers_unmatched / max(f.numbers, 1))
    if rule == "name":
        return 0.55 + 0.1 * min(f.novel_names, 3)
    return 0.6


_RuleVerdict = Callable[[ClaimFeatures], tuple[Verdict, str, str]]
_RULE_VERDICTS: dict[str, _RuleVerdict] = {
    "conflict": lambda f: (
        "contradicted",
        "the evidence states a different number or unit"
        if f.conflict_value is None
        else f"the evidence states another name in its place ({f.conflict_value})",
        "conflict",
    ),
    "negation": lambda f: (
        "contradicted",
        "the evidence says the opposite (negation differs)",
        "best",
    ),
    "direction": lambda f: (
        "contradicted",
        "the evidence says it went the other way (up against down)",
        "best",
    ),
    "causal": lambda f: (
        "contradicted",
        "the evidence states the cause and the effect the other way round",
        "best",
    ),
    "number": lambda f: ("unsupported", _numbers_reason(f), "none"),
    "name": lambda f: ("unsupported", _names_reason(f), "none"),
    "negated": lambda f: (
        "unsupported",
        "the claim says something is not so; no sentence near its evidence negates",
        "none",
    ),
    "evidence": lambda f: ("unsupported", _lacks_reason(f), "none"),
}
"""Each rule's verdict, reason and backing evidence."""


def _numbers_reason(f: ClaimFeatures) -> str:
    n = f.numbers_unmatched
    verb = "appears" if n == 1 else "appear"
    return f"{counted(n, 'number')} of the claim {verb} nowhere in the context"


def _names_reason(f: ClaimFeatures) -> str:
    return "names the context never mentions: " + ", ".join(repr(t) for t in f.novel_terms[:3])


def _lacks_reason(f: ClaimFeatures) -> str:
    shown = ", ".join(repr(m) for m in f.evidence_lacks[:3])
    return f"its closest evidence ({f.closest}) does not contain {shown}"


def _aligned_reason(f: ClaimFeatures) -> str:
    return (
        f"aligned with one passage sentence ({f.sentence_score:.0%}: {f.cover_sentence:.0%} of"
        f" its words, {f.pair_sentence:.0%} of its word pairs)"
    )


def _covered_reason(f: ClaimFeatures) -> str:
    return (
        f"the context covers {f.score:.0%} of it, across sentences or in other words"
        f" (best sentence {f.cover_sentence:.0%}, with its neighbours {f.cover_window:.0%})"
    )


def _weak_reason(f: ClaimFeatures) -> str:
    if f.best is None:
        return "no passage sentence shares its words"
    return (
        f"the context covers only {f.score:.0%} of it; the closest sentence ({f.closest}) has"
        f" {f.cover_sentence:.0%} of its words, the whole context {f.cover_context:.0%}"
    )


def _cover_set(f: ClaimFeatures, index: _ContextIndex, claim: _ParsedClaim) -> list[int]:
    """The best sentence, plus window sentences that add claim units it lacks (synthesis)."""
    assert f.best is not None
    chosen = [f.best]
    found = set(claim.units)
    have = set(index.sentences[f.best].units)
    for sid in f.window:
        if sid == f.best:
            continue
        extra = (index.sentences[sid].units & found) - have
        if extra:
            chosen.append(sid)
            have |= extra
    return sorted(chosen)


def _evidence(sentence: _Sentence, contexts: Sequence[Passage]) -> Evidence:
    text = contexts[sentence.passage].text
    return Evidence(
        passage=sentence.passage,
        start=sentence.start,
        end=sentence.end,
        quote=text[sentence.start : sentence.end],
    )
