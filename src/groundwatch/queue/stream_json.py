"""The wire format of a record on the queue: versioned JSON, validated on read.

One stream entry has one field, ``record``, holding a UTF-8 JSON object (docs/distributed.md
"Wire format" documents every key). JSON and not msgpack: no extra dependency on either side,
an entry stays readable with ``redis-cli XRANGE``, and the payload is text, which msgpack
would not make much smaller.

A reader accepts exactly :data:`VERSION`; an entry it cannot read (another version, a missing
or mistyped key, not JSON) raises :class:`MalformedRecord`, and the worker dead-letters it.
Unknown keys are ignored, so a writer may add optional keys within a version.

The keys are the fields of :class:`~groundwatch._fields.RecordFields` and a passage's are
:class:`~groundwatch.Passage`'s: the encoder, the validating model and the decoder are written
from those declarations at import (as the pipe's codec is), so a field added there travels
here too; the tables ``_CHECKS``, ``_ENCODED`` and ``_DECODED`` hold what the JSON does
differently (checks on untrusted input, the trace as W3C hex).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

# TraceFields is read by the derived decoder's source (_codec), not by name here.
from .._fields import PASSAGE_FIELDS, RecordFields, TraceFields  # noqa: F401
from ..telemetry import user_attributes
from ..types import Passage, RagRecord

VERSION = 1
FIELD = "record"
"""The stream entry's one field."""

_HEX32 = r"^[0-9a-f]{32}$"
_HEX16 = r"^[0-9a-f]{16}$"


class MalformedRecord(ValueError):
    """A stream entry that is not a record of this version (the worker dead-letters it)."""


class WireTrace(BaseModel):
    """The captured span context as W3C hex: the evaluation span's parent on the worker."""

    model_config = ConfigDict(extra="ignore")

    trace_id: str = Field(pattern=_HEX32)
    span_id: str = Field(pattern=_HEX16)
    flags: int = Field(ge=0, le=255)
    state: str = ""
    """W3C ``tracestate`` header form (``k1=v1,k2=v2``)."""


_Primitive = str | bool | int | float

# The JSON's keys are RecordFields' fields (its declaration is the only list of them); where
# the JSON form of a field is not its value, the three tables below say how.
_CHECKS: dict[str, tuple[Any, Any]] = {
    # field: (type, pydantic field) for reading untrusted JSON; the rest are read with the
    # dataclass's own type and default.
    "record_id": (str, Field(min_length=1, max_length=64)),
    "passages": (list[Passage], ...),
    "attributes": (
        dict[str, _Primitive | list[_Primitive]] | None,
        Field(default_factory=dict),
    ),
    "sampling_rate": (float | None, Field(default=None, ge=0.0, le=1.0)),
    "trace": (WireTrace | None, None),
    "enqueued_ns": (int, Field(ge=0)),
}
_ENCODED = {
    # field: its JSON value, an expression of ``{v}``.
    "passages": "[{{" + ", ".join(f"{n!r}: p.{n}" for n in PASSAGE_FIELDS) + "}} for p in {v}]",
    "attributes": "{v} or {{}}",
    "trace": "None if {v} is None else {{'trace_id': f'{{{v}.trace_id:032x}}', "
    "'span_id': f'{{{v}.span_id:016x}}', 'flags': {v}.flags, 'state': {v}.state}}",
}
_DECODED = {
    # field: its RecordFields value, an expression of ``{v}`` (the validated JSON value).
    "attributes": "dict({v}) or None",
    # The caller's span lives in another process.
    "trace": "None if {v} is None else TraceFields(int({v}.trace_id, 16), "
    "int({v}.span_id, 16), {v}.flags, is_remote=True, state={v}.state)",
}

_NAMES = [f.name for f in dataclasses.fields(RecordFields) if f.init]
_TYPES = typing.get_type_hints(RecordFields)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return Field(default_factory=f.default_factory)
    return ...


_FIELD_MODELS: dict[str, Any] = {
    f.name: _CHECKS.get(f.name, (_TYPES[f.name], _default(f)))
    for f in dataclasses.fields(RecordFields)
    if f.init
}
WireRecord: type[BaseModel] = create_model(
    "WireRecord",
    __config__=ConfigDict(extra="ignore"),
    __doc__=f"One record as a remote worker needs it (``version`` {VERSION}), validated.",
    version=(Literal[1], ...),
    **_FIELD_MODELS,
)
"""The JSON document's model: ``version``, then every field of :class:`RecordFields`."""


def _compile(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<wire JSON codec>", "exec"), globals(), namespace)
    return namespace


_codec = _compile(
    "def encode_doc(f):\n"
    "    return {'version': VERSION, "
    + ", ".join(f"{n!r}: " + _ENCODED.get(n, "{v}").format(v=f"f.{n}") for n in _NAMES)
    + "}\n"
    "def to_fields(doc):\n"
    "    return RecordFields("
    + ", ".join(f"{n}=" + _DECODED.get(n, "{v}").format(v=f"doc.{n}") for n in _NAMES)
    + ")\n"
)
_encode_doc = _codec["encode_doc"]
_to_fields = _codec["to_fields"]


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
    doc = _encode_doc(fields)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def decode(raw: bytes | str) -> RecordFields:
    """Read and validate one entry's ``record`` field.

    Raises:
        MalformedRecord: not JSON, another version, or a missing or mistyped key.
    """
    try:
        doc = WireRecord.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "(root)" for e in errors[:3])
        raise MalformedRecord(f"not a version {VERSION} record: {where}") from None
    fields: RecordFields = _to_fields(doc)
    return fields
