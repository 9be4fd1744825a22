"""Records and results shared by every part of groundwatch.

All models are pydantic v2 models and serialise to JSON with ``model_dump_json()``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["supported", "inferred", "unsupported", "contradicted"]
"""How one claim stands against the retrieved context (see DESIGN.md)."""

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


class Passage(BaseModel):
    """One retrieved passage: the text the answer was supposed to rely on."""

    model_config = ConfigDict(frozen=True)

    text: str
    id: str | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Evidence(BaseModel):
    """A span of one passage that a verdict rests on.

    ``quote == contexts[passage][start:end]`` always holds for evidence on an ``Evaluation``:
    scoring checks every quote against its passage and drops what it cannot find.
    """

    passage: int
    start: int
    end: int
    quote: str


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

    Judges do not compute scores or labels; :func:`groundwatch.scoring.score` does, the same for
    every judge. A judge that fails sets ``error`` (a short reason) instead of raising.
    """

    claims: list[Claim] = Field(default_factory=list)
    model: str | None = None
    usage: Usage | None = None
    error: str | None = None
    error_type: str | None = None


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

    @property
    def verdict_counts(self) -> dict[Verdict, int]:
        """Number of claims per verdict, every verdict present (zeros included)."""
        counts = Counter(c.verdict for c in self.claims)
        return {v: counts.get(v, 0) for v in VERDICTS}

    @property
    def is_hallucinated(self) -> bool:
        return self.label == "hallucinated"


class RagRecord(BaseModel):
    """One captured RAG interaction: what was asked, retrieved and answered.

    Built by the integrations (or by ``Monitor.record``) on the host's request path, scored later
    on the background worker.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    question: str | None = None
    contexts: list[Passage] = Field(default_factory=list)
    answer: str = ""
    route: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    record_id: str = ""
    trace_id: int | None = None
    span_id: int | None = None
    always_score: bool = False
    span_context: Any = Field(default=None, exclude=True)
