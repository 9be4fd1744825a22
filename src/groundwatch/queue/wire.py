"""The wire format of a record on the queue: versioned JSON, validated on read.

One stream entry has one field, ``record``, holding a UTF-8 JSON object (docs/distributed.md
"Wire format" documents every key). JSON and not msgpack: no extra dependency on either side,
an entry stays readable with ``redis-cli XRANGE``, and the payload is text, which msgpack
would not make much smaller.

A reader accepts exactly :data:`VERSION`; an entry it cannot read (another version, a missing
or mistyped key, not JSON) raises :class:`MalformedRecord`, and the worker dead-letters it.
Unknown keys are ignored, so a writer may add optional keys within a version.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._wire import RecordFields, TraceFields
from ..telemetry import user_attributes
from ..types import Passage, PassageKind, RagRecord

VERSION = 1
FIELD = "record"
"""The stream entry's one field."""

_HEX32 = r"^[0-9a-f]{32}$"
_HEX16 = r"^[0-9a-f]{16}$"


class MalformedRecord(ValueError):
    """A stream entry that is not a record of this version (the worker dead-letters it)."""


class WireTrace(BaseModel):
    """The captured span context: the evaluation span's parent on the worker."""

    model_config = ConfigDict(extra="ignore")

    trace_id: str = Field(pattern=_HEX32)
    span_id: str = Field(pattern=_HEX16)
    flags: int = Field(ge=0, le=255)
    state: str = ""
    """W3C ``tracestate`` header form (``k1=v1,k2=v2``)."""


class WirePassage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str
    id: str | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    kind: PassageKind = "retrieved"
    tool: str | None = None


class WireRecord(BaseModel):
    """One record as a remote worker needs it (``version`` 1)."""

    model_config = ConfigDict(extra="ignore")

    version: Literal[1]
    record_id: str = Field(min_length=1, max_length=64)
    question: str | None
    answer: str
    passages: list[WirePassage]
    route: str | None = None
    attributes: dict[str, str | bool | int | float | list[str | bool | int | float]] = Field(
        default_factory=dict
    )
    sampling_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    always_score: bool = False
    truncated: bool = False
    trace: WireTrace | None = None
    enqueued_ns: int = Field(ge=0)
    """``time.time_ns()`` when the producer encoded the record (the end-to-end delay)."""

    def to_fields(self) -> RecordFields:
        """The record's typed fields, as every boundary carries them."""
        trace = None
        if self.trace is not None:
            trace = TraceFields(
                int(self.trace.trace_id, 16),
                int(self.trace.span_id, 16),
                self.trace.flags,
                is_remote=True,  # the caller's span lives in another process
                state=self.trace.state,
            )
        return RecordFields(
            self.record_id,
            self.question,
            self.answer,
            [
                Passage(
                    text=p.text,
                    id=p.id,
                    score=p.score,
                    metadata=p.metadata,
                    kind=p.kind,
                    tool=p.tool,
                )
                for p in self.passages
            ],
            self.route,
            dict(self.attributes) or None,
            self.sampling_rate,
            self.always_score,
            self.truncated,
            trace,
            self.enqueued_ns,
        )

    def to_record(self) -> RagRecord:
        """The record as the in-process path has it after preparing (passages as
        :class:`Passage`, the caller's span context rebuilt)."""
        return self.to_fields().to_record()


def encode(record: RagRecord, sampling_rate: float | None, enqueued_ns: int) -> bytes:
    """A prepared record (``contexts`` are capped :class:`Passage` objects) as wire JSON.

    Raises:
        TypeError, ValueError: the record cannot be encoded (a metadata key that is not a
            string, number or bool); the producer counts it ``invalid_input``.
    """
    fields = RecordFields.of(
        record,
        record.contexts,
        attributes=dict(user_attributes(record)),
        sampling_rate=sampling_rate,
        enqueued_ns=enqueued_ns,
    )
    return encode_fields(fields)


def encode_fields(fields: RecordFields) -> bytes:
    """A record's fields as wire JSON (every key documented in docs/distributed.md).

    Metadata values JSON cannot hold are sent as their ``str()``.
    """
    trace = fields.trace
    doc = {
        "version": VERSION,
        "record_id": fields.record_id,
        "question": fields.question,
        "answer": fields.answer,
        "passages": [
            {
                "text": p.text,
                "id": p.id,
                "score": p.score,
                "metadata": p.metadata,
                "kind": p.kind,
                "tool": p.tool,
            }
            for p in fields.passages
        ],
        "route": fields.route,
        "attributes": fields.attributes or {},
        "sampling_rate": fields.sampling_rate,
        "always_score": fields.always_score,
        "truncated": fields.truncated,
        "trace": None
        if trace is None
        else {
            "trace_id": f"{trace.trace_id:032x}",
            "span_id": f"{trace.span_id:016x}",
            "flags": trace.flags,
            "state": trace.state,
        },
        "enqueued_ns": fields.enqueued_ns,
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def decode(raw: bytes | str) -> WireRecord:
    """Read and validate one entry's ``record`` field.

    Raises:
        MalformedRecord: not JSON, another version, or a missing or mistyped key.
    """
    try:
        return WireRecord.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "(root)" for e in errors[:3])
        raise MalformedRecord(f"not a version {VERSION} record: {where}") from None
