"""The typed forms a record and an evaluation take where they leave this interpreter.

Three boundaries carry them: the pipe to a worker process (``executor="process"``), the
worker process's own exporting (``export_from_worker``), and the Redis queue (JSON, validated
by :mod:`groundwatch.queue.wire`). Each carries the same two types:

- :class:`RecordFields`: one record as a judge and its span need it (prepared inputs, the
  record's id, route, attributes, sampling rate, the caller's trace);
- :class:`EvaluationFields`: one evaluation as telemetry needs it (the scalar fields and the
  verdict counts), with its claims as one pickled blob that becomes a real
  :class:`~groundwatch.Evaluation` only when something asks (:meth:`EvaluationFields.full`).

Anything that reads an evaluation on the emit path takes an :class:`EvaluationView`, which both
:class:`~groundwatch.Evaluation` and :class:`EvaluationFields` are.

Why slotted dataclasses with a codec of their own (``to_wire`` / ``from_wire``), and not
pydantic models or ``msgspec``: on the host, records are pickled and replies unpickled on the
worker thread, in the interpreter whose GIL the app's requests want. Each type turns itself
into plain values (tuples, strings, numbers) that pickle handles in C, with no class looked up
by name per message; the other side rebuilds it with one constructor call. Pickling the
dataclasses themselves cost twice the host time per record (a class lookup and a Python call
per object, passages included); pydantic validation of trusted data from our own child is the
cost the runtime avoids; ``msgspec`` would be a new core dependency for what these two methods
do. The version comes first in every encoded value, so a worker process started from another
groundwatch (a stale install on ``PYTHONPATH``) fails loudly instead of misreading fields.
Plain ``pickle`` of the types works too (their ``__reduce__`` goes through the same codec).

Each type's fields are declared once, in the dataclass: :func:`_derive_codec` writes its
``to_wire`` and ``from_wire`` from that declaration (as :mod:`dataclasses` writes ``__init__``),
as source compiled once at import, so they run as the hand-written tuples did and a field
cannot be left out of, or put in another place in, one side of the codec only. A field whose
wire form is not its value names its two conversions there.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from opentelemetry.trace import SpanContext, TraceFlags, TraceState

# VERDICTS is read by the derived codec's source (_derive_codec), not by name here.
from .types import VERDICTS, Evaluation, Label, Passage, RagRecord, Usage, Verdict  # noqa: F401

__all__ = [
    "WIRE_VERSION",
    "EvaluationFields",
    "EvaluationView",
    "RecordFields",
    "TraceFields",
    "WireVersionError",
    "as_evaluation",
]

WIRE_VERSION = 3
"""The version of :class:`RecordFields` and :class:`EvaluationFields` between two processes
(the Redis queue's JSON has its own: :data:`groundwatch.queue.wire.VERSION`)."""


class WireVersionError(ValueError):
    """A value pickled by another version of these types."""


def _check_version(version: int) -> None:
    if version != WIRE_VERSION:
        raise WireVersionError(
            f"wire version {version} received, {WIRE_VERSION} expected: the worker process "
            "runs another groundwatch"
        )


def _derive_codec(cls: type, conversions: Mapping[str, tuple[str, str]]) -> None:
    """Give ``cls`` its ``to_wire`` and ``from_wire``: a tuple of :data:`WIRE_VERSION`, then
    every init field of the dataclass in declaration order.

    Args:
        cls: the dataclass.
        conversions: per field whose wire form differs from its value, the expressions that
            encode it (of ``{v}``, the value) and decode it (of ``{v}``, the wire form), in
            this module's names.

    Raises:
        ValueError: a conversion names no field of ``cls``.
    """
    names = [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    unknown = set(conversions) - set(names)
    if unknown:
        raise ValueError(f"conversions of fields {cls.__name__} does not have: {unknown}")
    encoded = [conversions.get(n, ("{v}", ""))[0].format(v=f"self.{n}") for n in names]
    decoded = [conversions.get(n, ("", "{v}"))[1].format(v=f"_{i}") for i, n in enumerate(names)]
    unpacked = ", ".join(f"_{i}" for i in range(len(names)))
    source = (
        "def to_wire(self):\n"
        f"    return (WIRE_VERSION, {', '.join(encoded)})\n"
        "def from_wire(cls, value):\n"
        "    _check_version(value[0])\n"
        f"    (_, {unpacked}) = value\n"
        f"    return cls({', '.join(decoded)})\n"
    )
    namespace: dict[str, Any] = {}
    # In this module's globals themselves: WIRE_VERSION is read when a value is encoded.
    exec(compile(source, f"<{cls.__name__} codec>", "exec"), globals(), namespace)
    to_wire, from_wire = namespace["to_wire"], namespace["from_wire"]
    to_wire.__qualname__ = f"{cls.__name__}.to_wire"
    from_wire.__qualname__ = f"{cls.__name__}.from_wire"
    to_wire.__doc__ = (
        "Plain values for the pipe: the version, then each field in declaration order "
        "(pickled in C, with no class looked up by name)."
    )
    from_wire.__doc__ = (
        "The fields :meth:`to_wire` gave.\n\nRaises:\n    WireVersionError: they come from "
        "another version."
    )
    cls.to_wire = to_wire  # type: ignore[attr-defined]
    cls.from_wire = classmethod(from_wire)  # type: ignore[attr-defined]


class EvaluationView(Protocol):
    """What the emit path reads of an evaluation: an :class:`~groundwatch.Evaluation`, or the
    :class:`EvaluationFields` a worker process sent back."""

    @property
    def label(self) -> Label: ...
    @property
    def faithfulness(self) -> float | None: ...
    @property
    def groundedness(self) -> float | None: ...
    @property
    def judge(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def explanation(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def evidence_rejected(self) -> int: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def hallucination_probability(self) -> float | None: ...
    @property
    def verdict_counts(self) -> Mapping[Verdict, int]: ...


def as_evaluation(view: EvaluationView) -> Evaluation:
    """The :class:`~groundwatch.Evaluation` behind a view (built once for
    :class:`EvaluationFields`)."""
    if isinstance(view, Evaluation):
        return view
    if isinstance(view, EvaluationFields):
        return view.full()
    raise TypeError(f"not an evaluation: {type(view).__name__}")


@dataclass(slots=True, frozen=True)
class TraceFields:
    """The caller's span context: the evaluation span's parent wherever the span is built."""

    trace_id: int
    span_id: int
    flags: int
    is_remote: bool = False
    state: str = ""
    """W3C ``tracestate`` header form (``k1=v1,k2=v2``)."""

    @classmethod
    def of(cls, context: Any) -> TraceFields | None:
        """The fields of a valid :class:`~opentelemetry.trace.SpanContext`, else ``None``."""
        if not isinstance(context, SpanContext) or not context.is_valid:
            return None
        return cls(
            context.trace_id,
            context.span_id,
            int(context.trace_flags),
            context.is_remote,
            context.trace_state.to_header(),
        )

    def span_context(self) -> SpanContext:
        return SpanContext(
            self.trace_id,
            self.span_id,
            is_remote=self.is_remote,
            trace_flags=TraceFlags(self.flags),
            trace_state=TraceState.from_header([self.state]) if self.state else None,
        )

    def to_wire(self) -> tuple[int, int, int, bool, str]:
        return (self.trace_id, self.span_id, self.flags, self.is_remote, self.state)


@dataclass(slots=True)
class RecordFields:
    """One record where it leaves this interpreter: its prepared inputs, and what its span
    needs besides the evaluation (for a worker process that exports, and for the Redis queue's
    workers).

    Adding a field: declare it here (with a default, so older senders' values still read within
    a version), fill it in :meth:`of`, read it in :meth:`to_record`; the Redis queue's JSON
    names it in :mod:`groundwatch.queue.wire` and docs/distributed.md.
    """

    record_id: str
    question: str | None
    answer: str
    passages: Sequence[Passage]
    """Prepared passages (capped and checked where the record was prepared)."""
    route: str | None = None
    attributes: dict[str, Any] | None = None
    """User span attributes, primitive values only (checked where they were collected);
    ``None`` when there are none."""
    sampling_rate: float | None = None
    always_score: bool = False
    truncated: bool = False
    trace: TraceFields | None = None
    enqueued_ns: int = 0
    """``time.time_ns()`` when the record was sent (the Redis queue's end-to-end delay)."""

    @classmethod
    def of(
        cls,
        record: RagRecord,
        passages: Sequence[Passage],
        *,
        attributes: dict[str, Any] | None = None,
        sampling_rate: float | None = None,
        enqueued_ns: int = 0,
    ) -> RecordFields:
        """A prepared record's fields (``passages`` as prepared; ``attributes`` collected for
        the purpose, kept as they are)."""
        return cls(
            record.record_id,
            record.question,
            record.answer,
            passages,
            record.route,
            attributes or None,
            sampling_rate,
            record.always_score,
            record.truncated,
            TraceFields.of(record.span_context),
            enqueued_ns,
        )

    def to_record(self) -> RagRecord:
        """The record as the in-process path has it after preparing (``contexts`` as
        :class:`~groundwatch.Passage` objects, the caller's span context rebuilt)."""
        trace = self.trace
        return RagRecord(
            question=self.question,
            contexts=list(self.passages),
            answer=self.answer,
            route=self.route,
            attributes=self.attributes,
            record_id=self.record_id,
            trace_id=trace.trace_id if trace is not None else 0,
            span_id=trace.span_id if trace is not None else 0,
            always_score=self.always_score,
            span_context=trace.span_context() if trace is not None else None,
            truncated=self.truncated,
        )

    # Derived from the fields above (_derive_codec, below the class): the passages as plain
    # tuples, so that the host's worker thread pays no Python call per passage.
    to_wire: ClassVar[Callable[[RecordFields], tuple[Any, ...]]]
    from_wire: ClassVar[Callable[[tuple[Any, ...]], RecordFields]]

    def __reduce__(self) -> tuple[Any, ...]:
        return RecordFields.from_wire, (self.to_wire(),)


@dataclass(slots=True, eq=False)
class EvaluationFields:
    """An evaluation computed in another process, as telemetry reads it.

    Telemetry needs only the scalar fields and the verdict counts; the claims (dozens of
    pydantic objects, the costliest part to unpickle) travel as one pickled blob and become a
    real :class:`~groundwatch.Evaluation` only when something asks (``on_result`` callbacks,
    observers, content capture). Field names are :class:`~groundwatch.Evaluation`'s.

    Adding a field to :class:`~groundwatch.Evaluation` that telemetry reads: declare it here and
    in :class:`EvaluationView`, and copy it in :meth:`of` and :meth:`full`.
    """

    label: Label
    faithfulness: float | None
    groundedness: float | None
    judge: str
    model: str | None
    usage: Usage | None
    explanation: str
    error: str | None
    error_type: str | None
    evidence_rejected: int
    truncated: bool
    hallucination_probability: float | None
    verdict_counts: dict[Verdict, int]
    claims_blob: bytes = b""
    _full: Evaluation | None = field(default=None, repr=False)

    @classmethod
    def of(cls, evaluation: Evaluation) -> EvaluationFields:
        claims = evaluation.claims
        return cls(
            evaluation.label,
            evaluation.faithfulness,
            evaluation.groundedness,
            evaluation.judge,
            evaluation.model,
            evaluation.usage,
            evaluation.explanation,
            evaluation.error,
            evaluation.error_type,
            evaluation.evidence_rejected,
            evaluation.truncated,
            evaluation.hallucination_probability,
            evaluation.verdict_counts,
            pickle.dumps(claims, protocol=pickle.HIGHEST_PROTOCOL) if claims else b"",
            evaluation,
        )

    def full(self) -> Evaluation:
        """The pydantic :class:`~groundwatch.Evaluation` (built once; data from our own worker
        process is trusted, so it is not validated again)."""
        if self._full is None:
            claims = pickle.loads(self.claims_blob) if self.claims_blob else []
            self._full = Evaluation.model_construct(
                label=self.label,
                faithfulness=self.faithfulness,
                groundedness=self.groundedness,
                claims=claims,
                judge=self.judge,
                model=self.model,
                usage=self.usage,
                explanation=self.explanation,
                error=self.error,
                error_type=self.error_type,
                evidence_rejected=self.evidence_rejected,
                truncated=self.truncated,
                hallucination_probability=self.hallucination_probability,
            )
        return self._full

    to_wire: ClassVar[Callable[[EvaluationFields], tuple[Any, ...]]]
    from_wire: ClassVar[Callable[[tuple[Any, ...]], EvaluationFields]]

    def __reduce__(self) -> tuple[Any, ...]:
        return EvaluationFields.from_wire, (self.to_wire(),)


_derive_codec(
    RecordFields,
    {
        "passages": (
            "[(p.text, p.id, p.score, p.metadata, p.kind, p.tool) for p in {v}]",
            # Prepared on the sending side already: not validated again.
            "[Passage.model_construct(text=t, id=i, score=s, metadata=m, kind=k, tool=o)"
            " for t, i, s, m, k, o in {v}]",
        ),
        "trace": (
            "None if {v} is None else {v}.to_wire()",
            "None if {v} is None else TraceFields(*{v})",
        ),
    },
)
_derive_codec(
    EvaluationFields,
    {
        "usage": (
            "None if {v} is None else ({v}.input_tokens, {v}.output_tokens, {v}.calls)",
            "None if {v} is None else Usage.model_construct("
            "input_tokens={v}[0], output_tokens={v}[1], calls={v}[2])",
        ),
        "verdict_counts": (
            "tuple([{v}[x] for x in VERDICTS])",
            "dict(zip(VERDICTS, {v}, strict=True))",
        ),
    },
)
