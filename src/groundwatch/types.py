"""Records and results shared by every part of groundwatch.

All models are pydantic v2 models and serialise to JSON with ``model_dump_json()``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from ._shared.passage import PASSAGE_KINDS as PASSAGE_KINDS
from ._shared.passage import Passage as Passage
from ._shared.passage import PassageKind as PassageKind

# The record and Passage live below this module and are re-exported here: RagRecord in _record,
# which the request path imports without defining a pydantic model; Passage in _passage.
from ._shared.record import RagRecord as RagRecord

Verdict = Literal["supported", "inferred", "unsupported", "contradicted"]
"""How one claim stands against the retrieved context (docs/judges.md: what each means, and the
scores and labels they give)."""

Label = Literal["grounded", "hallucinated", "insufficient_context", "no_claims", "error"]
"""The verdict on a whole answer."""

VERDICTS: tuple[Verdict, ...] = ("supported", "inferred", "unsupported", "contradicted")
LABELS: tuple[Label, ...] = (
    "grounded",
    "hallucinated",
    "insufficient_context",
    "no_claims",
    "error",
)


def passage_names(passages: Sequence[Passage]) -> list[str]:
    """What to call each passage for people, numbered from 1 as people count.

    ``passage 3`` for a retrieved document (``passage 3 (tool search_docs)`` when a tool
    retrieved it), ``tool lookup_policy`` for a tool's output (``tool lookup_policy (call 2)``
    when the same tool answered several times), ``earlier turn 1`` for conversation context.
    """
    calls = Counter(p.tool for p in passages if p.kind == "tool" and p.tool)
    seen: Counter[str] = Counter()
    turns = 0
    names: list[str] = []
    for i, p in enumerate(passages):
        if p.kind == "tool":
            if not p.tool:
                names.append(f"tool output {i + 1}")
                continue
            seen[p.tool] += 1
            names.append(
                f"tool {p.tool}" if calls[p.tool] == 1 else f"tool {p.tool} (call {seen[p.tool]})"
            )
        elif p.kind == "conversation":
            turns += 1
            names.append(f"earlier turn {turns}")
        elif p.tool:
            names.append(f"passage {i + 1} (tool {p.tool})")
        else:
            names.append(f"passage {i + 1}")
    return names


class Evidence(BaseModel):
    """A span of one passage that a verdict rests on.

    ``quote == contexts[passage][start:end]`` always holds for evidence on an ``Evaluation``:
    scoring checks every quote against its passage and drops what it cannot find.
    """

    passage: int
    start: int
    end: int
    quote: str
    source: str | None = None
    """The passage's name for people when it is not just its number (``tool lookup_policy``,
    see :func:`passage_names`); set by scoring. :attr:`name` reads either."""

    @property
    def name(self) -> str:
        """``source``, or ``passage N`` (numbered from 1)."""
        return self.source or f"passage {self.passage + 1}"


class Claim(BaseModel):
    """One checkable statement of the answer with its verdict.

    ``start``/``end`` are offsets into the answer (``answer[start:end] == text``) when the claim
    is a span of the answer; ``None`` when a judge rephrased it (an LLM's atomic claim).
    ``evidence`` lists the supporting or contradicting spans, best first.
    """

    text: str
    start: int | None = None
    end: int | None = None
    verdict: Verdict
    evidence: list[Evidence] = Field(default_factory=list)
    reason: str = ""
    confidence: float | None = None
    """How sure the judge is of this verdict, in [0, 1], where it knows (the cascade uses it)."""


class Usage(BaseModel):
    """What a judge call cost, where the judge knows."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0


class Judgement(BaseModel):
    """What a judge returns: claims with verdicts and evidence, before scoring.

    Judges do not compute scores or labels; :func:`groundwatch.judging.scoring.score` does, the
    same for every judge. A judge that fails sets ``error`` (a short reason) instead of raising.
    """

    claims: list[Claim] = Field(default_factory=list)
    model: str | None = None
    usage: Usage | None = None
    error: str | None = None
    error_type: str | None = None
    hallucination_probability: float | None = None
    """The judge's probability that a person would call the answer hallucinated, where it
    knows one; scoring carries it onto :attr:`Evaluation.hallucination_probability`."""
    truncated: bool = False
    """The judge read only part of the passages or the answer (its own budget: a
    ``SemanticJudge``'s ``max_context_chars``, an ``OpenAIJudge``'s ``max_context_tokens``);
    the evaluation is marked ``truncated`` as for inputs cut to the size caps."""


class Evaluation(BaseModel):
    """The scored result for one answer.

    Attributes:
        label: ``grounded`` | ``hallucinated`` | ``insufficient_context`` | ``no_claims`` |
            ``error``.
        faithfulness: ``1 - contradicted / n``, or ``None`` when there is nothing to score.
        groundedness: ``(supported + inferred) / n``, or ``None`` likewise.
        claims: every checked claim, in answer order.
        judge: the judge's name; model: the judge's model, if any.
        explanation: one human-readable sentence on why the label was given.
        evidence_rejected: verdicts downgraded to ``unsupported`` because their evidence was not
            found in the named passage.
        truncated: the answer or the contexts were cut to the size caps before judging.
        hallucination_probability: the judge's probability, in [0, 1], that a person would call
            the answer hallucinated under the label policy (docs/rates.md); ``None`` only when
            ``label`` is ``error``.
    """

    label: Label
    faithfulness: float | None = None
    groundedness: float | None = None
    claims: list[Claim] = Field(default_factory=list)
    judge: str = ""
    model: str | None = None
    usage: Usage | None = None
    explanation: str = ""
    error: str | None = None
    error_type: str | None = None
    evidence_rejected: int = 0
    truncated: bool = False
    hallucination_probability: float | None = None

    @property
    def verdict_counts(self) -> dict[Verdict, int]:
        """Number of claims per verdict, every verdict present (zeros included)."""
        counts = Counter(c.verdict for c in self.claims)
        return {v: counts.get(v, 0) for v in VERDICTS}

    @property
    def is_hallucinated(self) -> bool:
        return self.label == "hallucinated"
