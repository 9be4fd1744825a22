"""The record of one RAG interaction, as the request path builds it: references only.

:meth:`groundwatch.Monitor.record` builds one per call on the host's request path, and
``from groundwatch import Monitor`` imports this module at start-up, so it defines no pydantic
model; :mod:`groundwatch.types` re-exports :class:`RagRecord` beside the models. It sits above
:mod:`groundwatch._shared.inputs`, which turns its contexts into passages when something asks
(:attr:`RagRecord.passages`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .passage import Passage


# Identity equality and a repr without content, as a plain object has: records are compared by
# who they are, and reprs end up in logs.
@dataclass(slots=True, eq=False, repr=False)
class RagRecord:
    """One captured RAG interaction: what was asked, retrieved and answered.

    Built by :meth:`groundwatch.Monitor.record` on the host's request path, where it must cost
    almost nothing: it is a plain slotted dataclass holding references, not a validated model.
    ``contexts`` is the caller's sequence (strings, passages, mappings or documents) until the
    background worker prepares the record; from then on (in samplers running on the worker, in
    ``on_result`` callbacks) it is a list of :class:`Passage` capped to the size limits.

    Attributes:
        question: the user's question, if known.
        contexts: the retrieved passages (see above).
        answer: the generated answer.
        route: a name for the pipeline or endpoint (per-route sampling, metric attribute).
        attributes: extra span attributes given by the caller.
        record_id: 16 hex digits, random; the sampling key when there is no trace.
        trace_id, span_id: of the caller's span, ``0`` when there was none.
        always_score: the caller asked for this record to be scored whatever the sampler says.
        span_context: the caller's OpenTelemetry span context (``None`` when there was none).
        truncated: inputs were cut to the size caps while preparing.
    """

    # One line per field: the slots, the constructor (the same order and defaults for
    # positional callers) and every boundary form of the record (groundwatch._fields) follow from
    # this declaration.
    question: str | None = None
    contexts: Sequence[Any] = ()
    answer: str = ""
    route: str | None = None
    attributes: Mapping[str, Any] | None = None
    record_id: str = ""
    trace_id: int = 0
    span_id: int = 0
    always_score: bool = False
    span_context: Any = None
    truncated: bool = False

    @property
    def passages(self) -> list[Passage]:
        """``contexts`` as passages (converted on the fly before the worker has prepared them)."""
        from .inputs import to_passage  # passages are pydantic models: not at start-up

        return [to_passage(item, i) for i, item in enumerate(self.contexts)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for sinks that store records): ids as hex, passages as dicts."""
        return {
            "record_id": self.record_id,
            "trace_id": f"{self.trace_id:032x}" if self.trace_id else None,
            "span_id": f"{self.span_id:016x}" if self.span_id else None,
            "route": self.route,
            "question": self.question,
            "contexts": [p.model_dump() for p in self.passages],
            "answer": self.answer,
            "attributes": dict(self.attributes or {}),
            "always_score": self.always_score,
            "truncated": self.truncated,
        }

    def __repr__(self) -> str:
        # Content stays out of reprs (they end up in logs).
        return f"RagRecord(record_id={self.record_id!r}, route={self.route!r})"
