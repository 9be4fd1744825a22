"""The typed forms a record and an evaluation take where they leave this interpreter.

Three boundaries carry them: the pipe to a worker process (``executor="process"``), the
worker process's own exporting (``export_from_worker``), and the Redis queue (JSON, validated
by :mod:`groundwatch.queue.stream_json`). Each carries the same two types:

- :class:`RecordFields`: one record as a judge and its span need it (prepared inputs, the
  record's id, route, attributes, sampling rate, the caller's trace);
- :class:`EvaluationFields`: one evaluation as telemetry needs it (the scalar fields and the
  verdict counts), with its claims as one pickled blob that becomes a real
  :class:`~groundwatch.Evaluation` only when something asks (:meth:`EvaluationFields.full`).

Anything that reads an evaluation on the emit path takes an :data:`EvaluationView`: an
:class:`~groundwatch.Evaluation` or an :class:`EvaluationFields`.

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
import pickle  # noqa: F401  (read by the derived copies' source)
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from opentelemetry.trace import SpanContext, TraceFlags, TraceState

# VERDICTS is read by the derived codec's source (_derive_codec), not by name here.
from .types import VERDICTS, Evaluation, Label, Passage, RagRecord, Usage, Verdict  # noqa: F401

__all__ = [
    "PASSAGE_FIELDS",
    "WIRE_VERSION",
    "EvaluationFields",
    "EvaluationView",
    "RecordFields",
    "TraceFields",
    "WireVersionError",
    "as_evaluation",
]

WIRE_VERSION = 3

PASSAGE_FIELDS: tuple[str, ...] = tuple(Passage.model_fields)
"""A passage's fields, in :class:`~groundwatch.Passage`'s declaration order: its form on the
pipe and on the Redis queue is derived from them."""
"""The version of :class:`RecordFields` and :class:`EvaluationFields` between two processes
(the Redis queue's JSON has its own: :data:`groundwatch.queue.stream_json.VERSION`)."""


class WireVersionError(ValueError):
    """A value pickled by another version of these types."""


def _check_version(version: int) -> None:
    if version != WIRE_VERSION:
        raise WireVersionError(
            f"wire version {version} received, {WIRE_VERSION} expected: the worker process "
            "runs another groundwatch"
        )


def _compiled(source: str, where: str) -> dict[str, Any]:
    """The functions ``source`` defines, compiled once, reading this module's globals (as
    :mod:`dataclasses` writes ``__init__``: they then run as hand-written code does)."""
    namespace: dict[str, Any] = {}
    # In this module's globals themselves: WIRE_VERSION is read when a value is encoded.
    exec(compile(source, where, "exec"), globals(), namespace)
    return namespace


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
    namespace = _compiled(source, f"<{cls.__name__} codec>")
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


def _derive_record_copies(
    cls: type, from_record: Mapping[str, str], onto_record: Mapping[str, str]
) -> None:
    """Give ``cls`` (:class:`RecordFields`) its ``of`` and ``to_record``, written from its
    declaration: a field is copied from and onto the :class:`~groundwatch.RagRecord`
    attribute of the same name unless a conversion names it.

    Args:
        cls: the dataclass.
        from_record: per field, the expression ``of`` fills it with (of ``record`` and the
            arguments ``passages``, ``attributes``, ``sampling_rate``, ``enqueued_ns``).
        onto_record: per field, the ``RagRecord`` keyword arguments ``to_record`` gives it (of
            ``{v}``, the value; ``""``: the field is not on the record).

    Raises:
        ValueError: a conversion names no field of ``cls``.
    """
    names = [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    unknown = (set(from_record) | set(onto_record)) - set(names)
    if unknown:
        raise ValueError(f"conversions of fields {cls.__name__} does not have: {unknown}")
    taken = ", ".join(from_record.get(n, f"record.{n}") for n in names)
    given = [onto_record.get(n, f"{n}={{v}}").format(v=f"self.{n}") for n in names]
    source = (
        "def of(cls, record, passages, *, attributes=None, sampling_rate=None, enqueued_ns=0):\n"
        f"    return cls({taken})\n"
        "def to_record(self):\n"
        f"    return RagRecord({', '.join(g for g in given if g)})\n"
    )
    namespace = _compiled(source, f"<{cls.__name__} record copies>")
    of, to_record = namespace["of"], namespace["to_record"]
    of.__qualname__, to_record.__qualname__ = f"{cls.__name__}.of", f"{cls.__name__}.to_record"
    of.__doc__ = (
        "A prepared record's fields (``passages`` as prepared; ``attributes`` collected for "
        "the purpose, kept as they are)."
    )
    to_record.__doc__ = (
        "The record as the in-process path has it after preparing (``contexts`` as "
        ":class:`~groundwatch.Passage` objects, the caller's span context rebuilt)."
    )
    cls.of = classmethod(of)  # type: ignore[attr-defined]
    cls.to_record = to_record  # type: ignore[attr-defined]


def _derive_evaluation_copies(cls: type, conversions: Mapping[str, str]) -> None:
    """Give ``cls`` (:class:`EvaluationFields`) its ``of`` and ``_build``, written from its
    declaration: each field is the :class:`~groundwatch.Evaluation` attribute of its name,
    unless ``conversions`` gives its expression (of ``evaluation``) for ``of``; those fields
    are not :class:`~groundwatch.Evaluation`'s, and ``_build`` gives it its claims instead.
    """
    names = [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    unknown = set(conversions) - set(names)
    if unknown:
        raise ValueError(f"conversions of fields {cls.__name__} does not have: {unknown}")
    taken = ", ".join(conversions.get(n, f"evaluation.{n}") for n in names)
    model = [
        f"{n}=self.{n}" for n in names if n not in conversions and n in Evaluation.model_fields
    ]
    source = (
        "def of(cls, evaluation):\n"
        f"    return cls({taken}, _full=evaluation)\n"
        "def _build(self):\n"
        "    claims = pickle.loads(self.claims_blob) if self.claims_blob else []\n"
        f"    return Evaluation.model_construct(claims=claims, {', '.join(model)})\n"
    )
    namespace = _compiled(source, f"<{cls.__name__} copies>")
    namespace["of"].__qualname__ = f"{cls.__name__}.of"
    cls.of = classmethod(namespace["of"])  # type: ignore[attr-defined]
    cls._build = namespace["_build"]  # type: ignore[attr-defined]


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

    Adding a field: declare it on :class:`~groundwatch.RagRecord` and here, under the same
    name and with a default (so older senders' values still read within a version). Every
    form derives from this declaration: the pipe's tuple (:func:`_derive_codec`), the copies
    from and onto the record (:func:`_derive_record_copies`) and the Redis queue's JSON
    (:mod:`groundwatch.queue.stream_json`); docs/distributed.md lists the JSON's keys.
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

    # Derived from the fields above (_derive_record_copies, below the class): each field is
    # the RagRecord attribute of its name unless a conversion there says otherwise.
    of: ClassVar[Callable[..., RecordFields]]
    """``of(record, passages, *, attributes=None, sampling_rate=None, enqueued_ns=0)``: a
    prepared record's fields."""
    to_record: ClassVar[Callable[[RecordFields], RagRecord]]

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

    Adding a field to :class:`~groundwatch.Evaluation`: declare it here too, under the same name
    (``tests/runtime/test_pipeline.py`` fails until it is); :meth:`of`, :meth:`full` and the
    pipe's tuple are written from this declaration.
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

    # Derived from the fields above (_derive_evaluation_copies, below the class): each field
    # is the Evaluation attribute of its name, the claims excepted.
    of: ClassVar[Callable[[Evaluation], EvaluationFields]]
    """The fields of an evaluation (the claims pickled into one blob)."""

    def full(self) -> Evaluation:
        """The pydantic :class:`~groundwatch.Evaluation` (built once; data from our own worker
        process is trusted, so it is not validated again)."""
        if self._full is None:
            self._full = self._build()
        return self._full

    _build: ClassVar[Callable[[EvaluationFields], Evaluation]]

    to_wire: ClassVar[Callable[[EvaluationFields], tuple[Any, ...]]]
    from_wire: ClassVar[Callable[[tuple[Any, ...]], EvaluationFields]]

    def __reduce__(self) -> tuple[Any, ...]:
        return EvaluationFields.from_wire, (self.to_wire(),)


_derive_codec(
    RecordFields,
    {
        "passages": (
            f"[({', '.join(f'p.{n}' for n in PASSAGE_FIELDS)},) for p in {{v}}]",
            # Prepared on the sending side already: not validated again.
            "[Passage.model_construct("
            + ", ".join(f"{n}=_p{i}" for i, n in enumerate(PASSAGE_FIELDS))
            + f") for ({', '.join(f'_p{i}' for i in range(len(PASSAGE_FIELDS)))},) in {{v}}]",
        ),
        "trace": (
            "None if {v} is None else {v}.to_wire()",
            "None if {v} is None else TraceFields(*{v})",
        ),
    },
)
EvaluationView: TypeAlias = "Evaluation | EvaluationFields"
"""What the emit path reads of an evaluation: an :class:`~groundwatch.Evaluation`, or the
:class:`EvaluationFields` a worker process sent back (the same names, by declaration)."""

_derive_record_copies(
    RecordFields,
    from_record={
        "passages": "passages",
        "attributes": "attributes or None",
        "sampling_rate": "sampling_rate",
        "trace": "TraceFields.of(record.span_context)",
        "enqueued_ns": "enqueued_ns",
    },
    onto_record={
        "passages": "contexts=list({v})",
        "trace": "trace_id=0 if {v} is None else {v}.trace_id, "
        "span_id=0 if {v} is None else {v}.span_id, "
        "span_context=None if {v} is None else {v}.span_context()",
        "sampling_rate": "",
        "enqueued_ns": "",
    },
)
_derive_evaluation_copies(
    EvaluationFields,
    {
        # verdict_counts: Evaluation's property of the same name; the claims, one blob.
        "claims_blob": "pickle.dumps(evaluation.claims, protocol=pickle.HIGHEST_PROTOCOL) "
        "if evaluation.claims else b''",
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
