"""A passage of context, the text an answer was supposed to rely on.

The lowest of the record types: :mod:`groundwatch._shared.inputs` reads a caller's contexts into
passages, and :mod:`groundwatch.types` (which every part imports them from) builds the records
on both.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PassageKind = Literal["retrieved", "tool", "conversation"]
"""Where a passage came from: a retriever's document, a tool's output, or an earlier turn of the
conversation (only with an integration's ``conversation_context=True``)."""
PASSAGE_KINDS: tuple[PassageKind, ...] = ("retrieved", "tool", "conversation")


class Passage(BaseModel):
    """One passage of context: the text the answer was supposed to rely on.

    ``kind`` says where it came from (``retrieved``, ``tool``, ``conversation``) and ``tool``
    names the tool whose output it is (or that retrieved it): reports and telemetry name the
    passage after them ("tool lookup_policy") instead of by number
    (:func:`groundwatch.types.passage_names`).
    """

    model_config = ConfigDict(frozen=True)

    text: str
    id: str | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    kind: PassageKind = "retrieved"
    tool: str | None = None
