"""Structured tool outputs (JSON objects, rows, nested values) read as statements for the judges.

A tool's structured output reaches the judges as deterministic JSON (``_inputs.tool_output_text``:
sorted keys, one row per line). JSON is faithful but is not prose: ``{"currency": "EUR", "total":
42.5}`` never says "42.5 EUR", so a number in one field and its unit in another could not be
compared with an answer's "45.50 EUR". This module reads such a passage into *records*: one per
object that holds values (an order, a row), each with the span of the passage it comes from and a
*statement* that says its fields in words::

    {"currency": "EUR", "order_id": "A-17", "total": 42.5}
    -> currency is EUR; order id is A-17; total is 42.5 EUR.

- Field names become words (``order_id``, ``orderId`` -> "order id"); a nested object's
  statement starts with the names of the fields that lead to it ("amounts: total is ...").
- A number takes the unit its field name ends with (``weight_kg``, ``delay_minutes``,
  ``change_pct``) or, for amounts, the currency a sibling or an enclosing object names
  (``currency``, ``currency_code``), and, for any value, the unit a sibling ``unit`` field names.
  Counts and ids (``qty``, ``guests``, ``id``) never take a currency.
- An ISO date is written out ("2024-03-15" -> "March 15, 2024"), so that an answer's date is
  compared with it as a date (:func:`date_quantities`); ``true`` says the field's name,
  ``false`` says it negated; ``null`` says nothing.

The statements are only what the judges *read*: evidence still quotes the passage itself (a
record's span, an exact substring), and evidence checks accept a claim's number, date or name
when the statement of the quoted passage carries it. Only passages of kind ``tool`` are read this
way (:func:`tool_records`), so retrieved documents are judged exactly as before.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from functools import lru_cache
from typing import Any

from ...types import Passage
from .numerals import Quantity, extract_quantities

# A record's statement longer than this is cut into several records (groups of fields), so
# that evidence stays a readable span of the passage and alignment stays local.
_MAX_STATEMENT_CHARS = 400
# Passages longer than this are not parsed (the monitor caps a passage far below it).
_MAX_PARSE_CHARS = 200_000
# Nesting deeper than this is read as text (a pathological output cannot recurse far).
_MAX_DEPTH = 32


@dataclass(frozen=True)
class Record:
    """One object of a structured output: where it is in the passage, and what it says."""

    start: int
    end: int
    statement: str
    names: tuple[tuple[str, str], ...] = ()
    """``(field name in words, value)`` of the fields whose value is a name ("carrier",
    "DHL"): what an answer that puts another name in its place contradicts."""


@dataclass(frozen=True)
class _Said:
    start: int
    end: int
    text: str
    name: tuple[str, str] | None


# --- a JSON reader that keeps positions ------------------------------------------------------


@dataclass
class _Node:
    start: int
    end: int
    value: Any = None  # a scalar's value (a number as written)
    number: bool = False
    fields: list[tuple[str, int, _Node]] | None = None  # an object's (key, key start, node)
    items: list[_Node] | None = None  # an array's elements


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_LITERALS = {"true": True, "false": False, "null": None}


class _Truncated(Exception):
    """The text ends inside a value (a capped passage): what was read so far is kept."""


def _skip(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _after_member(text: str, child: _Node, node: _Node, closer: str) -> int:
    """Where the next member of ``node`` starts after ``child``; -1 when ``node`` is complete
    (its ``end`` set at ``closer``) or the text is cut there."""
    if child.end >= len(text):
        return -1
    pos = _skip(text, child.end)
    if pos >= len(text):
        return -1
    if text[pos] == ",":
        return pos + 1
    if text[pos] == closer:
        node.end = pos + 1
        return -1
    raise ValueError("comma expected")


def _parse(text: str, pos: int, depth: int) -> _Node:
    pos = _skip(text, pos)
    if pos >= len(text):
        raise _Truncated
    ch = text[pos]
    if depth > _MAX_DEPTH:
        raise ValueError("too deep")
    if ch == "{":
        node = _Node(pos, len(text), fields=[])
        pos = _skip(text, pos + 1)
        if text.startswith("}", pos):
            node.end = pos + 1
            return node
        while True:
            pos = _skip(text, pos)
            if pos >= len(text):
                return node  # cut inside the object: keep the fields read so far
            if text[pos] != '"':
                raise ValueError("key expected")
            if text.find('"', pos + 1) < 0:
                return node  # cut inside a key
            key, after = _DECODER.raw_decode(text, pos)
            if not isinstance(key, str):  # pragma: no cover - a '"' starts a string
                raise ValueError("key expected")
            colon = _skip(text, after)
            if colon >= len(text):
                return node
            if text[colon] != ":":
                raise ValueError("colon expected")
            try:
                child = _parse(text, colon + 1, depth + 1)
            except _Truncated:
                return node
            assert node.fields is not None
            node.fields.append((key, pos, child))
            pos = _after_member(text, child, node, "}")
            if pos < 0:
                return node
    if ch == "[":
        node = _Node(pos, len(text), items=[])
        pos = _skip(text, pos + 1)
        if text.startswith("]", pos):
            node.end = pos + 1
            return node
        while True:
            try:
                child = _parse(text, pos, depth + 1)
            except _Truncated:
                return node
            assert node.items is not None
            node.items.append(child)
            pos = _after_member(text, child, node, "]")
            if pos < 0:
                return node
    if ch == '"':
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            if '"' not in text[pos + 1 :]:
                raise _Truncated from None
            raise
        return _Node(pos, end, value=value)
    m = _NUMBER.match(text, pos)
    if m:
        if m.end() >= len(text):
            raise _Truncated  # a number at the cut may have lost digits
        # Kept as written ("42.50" stays so: its precision is what the answer is held to).
        return _Node(pos, m.end(), value=text[pos : m.end()], number=True)
    for word, value in _LITERALS.items():
        if text.startswith(word, pos):
            return _Node(pos, pos + len(word), value=value)
    raise ValueError("value expected")


def _parse_values(text: str) -> list[_Node] | None:
    """The JSON values of ``text``: the whole text, or one value per line (rows as lines), or
    None when it is not JSON. A value cut at the end of the text keeps what was read."""
    first = _skip(text, 0)
    if first >= len(text) or text[first] not in "{[":
        return None
    try:
        node = _parse(text, first, 0)
        if _skip(text, node.end) >= len(text):
            return [node]
    except (ValueError, _Truncated):
        pass
    nodes: list[_Node] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start = _skip(line, 0)
        if start < len(line) and line[start] in "{[":
            with contextlib.suppress(ValueError, _Truncated):
                nodes.append(_shift(_parse(line, start, 0), pos))
        pos += len(line)
    return nodes or None


def _shift(node: _Node, offset: int) -> _Node:
    node.start += offset
    node.end += offset
    for i, (key, at, child) in enumerate(node.fields or ()):
        assert node.fields is not None
        node.fields[i] = (key, at + offset, _shift(child, offset))
    for child in node.items or ():
        _shift(child, offset)
    return node


# --- records ---------------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_SPLIT = re.compile(r"[_\-\s.]+")
_CURRENCY_KEYS = frozenset({"currency", "currency code", "ccy", "curr", "currency iso"})
_UNIT_KEYS = frozenset({"unit", "units", "uom", "unit of measure"})
# Field-name words of numbers that are counts or identifiers: never an amount of money.
_COUNT_WORDS = frozenset(
    "qty quantity count number num no id ids guests people persons items pieces units year"
    " rating stars score rank page pages version code zip postcode age seats nights days hours"
    " minutes weeks months years volume shares".split()
)
_ISO_DATE = re.compile(
    r"^(\d{4})-(\d{2})(?:-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)?)?$"
)
_MONTH_NAMES = (
    "January February March April May June July August September October November December"
).split()


def _words(key: str) -> list[str]:
    return [w.lower() for w in _KEY_SPLIT.split(_CAMEL.sub(" ", key)) if w]


@lru_cache(maxsize=256)
def _unit_word(word: str) -> str | None:
    """``word`` when it names a unit the number reader knows (kg, minutes, eur, pct), else None."""
    if len(word) < 2 or not word.isalpha():
        return None
    qs = extract_quantities("1 " + word)
    if len(qs) == 1 and qs[0].unit is not None and qs[0].end == len(word) + 2:
        return "%" if qs[0].kind == "percent" else word
    return None


def _currency(value: Any) -> str | None:
    if not isinstance(value, str) or not value.isalpha():
        return None
    unit = _unit_word(value.lower())
    if unit is None:
        return None
    return value if extract_quantities("1 " + value)[0].kind == "money" else None


def _iso_date(value: str) -> str | None:
    m = _ISO_DATE.match(value.strip())
    if m is None:
        return None
    year, month, day, hour, minute = m.groups()
    try:
        date(int(year), int(month), int(day or 1))
    except ValueError:
        return None
    name = _MONTH_NAMES[int(month) - 1]
    if day is None:
        return f"{name} {year}"
    text = f"{name} {int(day)}, {year}"
    return f"{text} {hour}:{minute}" if hour else text


def _scalar(node: _Node) -> bool:
    return node.fields is None and node.items is None


def _say(words: list[str], node: _Node, unit: str | None) -> str | None:
    """One field as words: "total is 42.5 EUR", "in stock", "not refundable"."""
    name = " ".join(words)
    value = node.value
    if value is None:
        return None
    if value is True:
        return name
    if value is False:
        return f"not {name}"
    if not node.number:
        text = _iso_date(value) or value.strip()
        return f"{name} is {text}" if text else None
    return f"{name} is {value} {unit}" if unit else f"{name} is {value}"


_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z]+")


def _name_value(words: list[str], node: _Node) -> tuple[str, str] | None:
    """``(field name, value)`` when a string field holds a name: capitalised words, no digits
    (an id), not a date, not a currency or unit."""
    value = node.value
    if node.number or not isinstance(value, str) or len(value) > 60:
        return None
    if any(ch.isdigit() for ch in value) or not _CAPITALISED.search(value):
        return None
    if _unit_word(value.lower()) is not None:
        return None
    return " ".join(words), value.strip()


def _number_unit(words: list[str], money: str | None, unit: str | None) -> str | None:
    for word in reversed(words):
        found = _unit_word(word)
        if found is not None:
            return found
    if unit is not None and not ({"id", "ids", "code", "version"} & set(words)):
        return unit
    if money is not None and not (_COUNT_WORDS & set(words)):
        return money
    return None


def _contexts(
    fields: list[tuple[str, int, _Node]], money: str | None
) -> tuple[str | None, str | None]:
    """The currency and the unit an object's fields name for its numbers (the currency of an
    enclosing object holds unless this one names its own)."""
    unit: str | None = None
    for key, _, child in fields:
        name = " ".join(_words(key))
        if name in _CURRENCY_KEYS:
            money = _currency(child.value) or money
        elif name in _UNIT_KEYS and isinstance(child.value, str) and unit is None:
            unit = _unit_word(child.value.lower())
    return money, unit


def _values_of(node: _Node) -> bool:
    """Whether a field's value is a list of plain values (said in one field: "tags is a, b")."""
    return bool(node.items) and all(_scalar(i) for i in node.items or ())


def _field(
    words: list[str], key_start: int, child: _Node, money: str | None, unit: str | None
) -> _Said | None:
    if _values_of(child):
        number_unit = _number_unit(words, money, unit)
        parts = [_say(words, i, number_unit if i.number else None) for i in child.items or ()]
        prefix = " ".join(words) + " is "
        values = [p[len(prefix) :] for p in parts if p and p.startswith(prefix)]
        if not values:
            return None
        return _Said(key_start, child.end, prefix + ", ".join(values), None)
    if not _scalar(child):
        return None
    said = _say(words, child, _number_unit(words, money, unit) if child.number else None)
    if said is None:
        return None
    return _Said(key_start, child.end, said, _name_value(words, child))


def _flat(node: _Node, path: list[str], money: str | None, depth: int) -> list[_Said]:
    """Every field of an object and of the objects inside it, nested names leading."""
    out: list[_Said] = []
    if node.items is not None:
        for item in node.items:
            if item.fields is not None and depth < _MAX_DEPTH:
                out += _flat(item, path, money, depth + 1)
        return out
    fields = node.fields or []
    money, unit = _contexts(fields, money)
    for key, key_start, child in fields:
        words = [*path, *_words(key)]
        said = _field(words, key_start, child, money, unit)
        if said is not None:
            out.append(said)
        elif not _scalar(child) and not _values_of(child) and depth < _MAX_DEPTH:
            out += _flat(child, words, money, depth + 1)
    return out


def _records(node: _Node, path: list[str], money: str | None, out: list[Record]) -> None:
    """The records of a value: an object small enough is one record with everything inside
    it; a larger one gives a record (or several) of its own fields and records of the objects
    inside it; each object of a list is its own record (a row)."""
    if node.items is not None:
        scalars = [item for item in node.items if _scalar(item)]
        if scalars and not path:  # a top-level list of values: one record of them
            parts = [_say(["value"], item, None) for item in scalars]
            values = ", ".join(s[len("value is ") :] for s in parts if s and s.startswith("value"))
            if values:
                out.append(Record(node.start, node.end, values + "."))
        for item in node.items:
            if not _scalar(item):
                _records(item, path, money, out)
        return
    if node.fields is None:  # a top-level scalar
        alone = _say(["value"], node, None)
        if alone:
            out.append(Record(node.start, node.end, alone[len("value is ") :] + "."))
        return
    whole = _flat(node, [], money, len(path))
    if whole and sum(len(f.text) + 2 for f in whole) <= _MAX_STATEMENT_CHARS:
        out.append(_record_of(whole, path, node, len(whole)))
        return
    money, unit = _contexts(node.fields, money)
    own = [
        field
        for key, key_start, child in node.fields
        if (field := _field(_words(key), key_start, child, money, unit)) is not None
    ]
    group: list[_Said] = []
    size = 0
    for part in own:
        if group and size + len(part.text) > _MAX_STATEMENT_CHARS:
            out.append(_record_of(group, path, node, len(own)))
            group, size = [], 0
        group.append(part)
        size += len(part.text) + 2
    if group:
        out.append(_record_of(group, path, node, len(own)))
    if len(path) < _MAX_DEPTH:
        for key, _, child in node.fields:
            if not _scalar(child) and not _values_of(child):
                _records(child, [*path, *_words(key)], money, out)


def _record_of(group: list[_Said], path: list[str], node: _Node, n: int) -> Record:
    lead = " ".join(path) + ": " if path else ""
    statement = lead + "; ".join(f.text for f in group) + "."
    names = tuple(f.name for f in group if f.name is not None)
    if len(group) == n:  # the whole object: its span, braces and all
        return Record(node.start, node.end, statement, names)
    return Record(group[0].start, group[-1].end, statement, names)


# The judge reads each passage's records, then scoring checks evidence against them: a few
# entries serve one evaluation; few enough that capped passages (50,000 characters) stay small.
@lru_cache(maxsize=32)
def _records_of(text: str) -> tuple[Record, ...]:
    if len(text) > _MAX_PARSE_CHARS:
        return ()
    nodes = _parse_values(text)
    if not nodes:
        return ()
    out: list[Record] = []
    for node in nodes:
        _records(node, [], None, out)
    return tuple(out)


def tool_records(passage: Passage) -> tuple[Record, ...]:
    """The records of a ``tool`` passage whose text is JSON (empty for any other passage, and
    for a tool's text that is not JSON: that is read as prose). Cached by text."""
    if passage.kind != "tool" or not passage.text[:1].isascii():
        return ()
    head = passage.text.lstrip()[:1]
    if head not in ("{", "["):
        return ()
    try:
        return _records_of(passage.text)
    except RecursionError:  # pragma: no cover - depth is bounded above
        return ()


def statements(passage: Passage) -> str | None:
    """All statements of a ``tool`` passage's records, one per line, or None (not structured)."""
    records = tool_records(passage)
    return "\n".join(r.statement for r in records) if records else None


_CODE = re.compile(
    r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)*(?![\w-])"
)


def codes(text: str) -> list[str]:
    """Identifiers of ``text`` (letters and digits together: "A-17", "SKU-3", "1Z999", "B44")
    as units, which the word units miss (their digits are no words): what picks a row out of
    a tool's rows. Only read with structured tool outputs."""
    return (
        ["#" + m.group(0).lower() for m in _CODE.finditer(text)] if _HAS_DIGIT.search(text) else []
    )


_HAS_DIGIT = re.compile(r"\d")


def has_structured(passages: Sequence[Passage]) -> bool:
    """Whether any passage is a tool's structured output with at least one record."""
    return any(tool_records(p) for p in passages if p.kind == "tool")


# --- dates -----------------------------------------------------------------------------------

_MONTH_ALT = (
    r"(?P<m>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_PATTERNS = (
    # March 15, 2024 / Mar 15th 2024
    re.compile(r"\b" + _MONTH_ALT + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})\b", re.I),
    # 15 March 2024 / 15th of March, 2024
    re.compile(
        r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?"
        + _MONTH_ALT.replace("(?P<m>", "(?P<m>")
        + r",?\s+(?P<y>\d{4})\b",
        re.I,
    ),
    # 2024-03-15
    re.compile(r"\b(?P<y>\d{4})-(?P<mn>\d{2})-(?P<d>\d{2})\b"),
)
_MONTH_YEAR = re.compile(r"\b" + _MONTH_ALT + r",?\s+(?P<y>\d{4})\b", re.I)
_MONTH_INDEX = {name.lower()[:3]: i + 1 for i, name in enumerate(_MONTH_NAMES)}

# Kinds are one word each: the judge masks a quantity as the word "zq" + kind.
DATE_KIND = "calendardate"
"""The kind of a whole date (day, month and year): values are days since year 1."""
MONTH_KIND = "calendarmonth"
"""The kind of a month of a year ("March 2024"): values are months since year 0."""


def date_quantities(text: str, *, months: bool) -> list[Quantity]:
    """The whole dates of ``text`` as quantities of kind :data:`DATE_KIND`, so that "March 16,
    2024" conflicts with "March 15, 2024" as one value; a month written with its year alone
    is a :data:`MONTH_KIND` quantity. With ``months``, each whole date gives its month too:
    the statements of a record say both, so an answer's "in March 2024" finds its date."""
    found: list[Quantity] = []
    taken: list[tuple[int, int]] = []
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            month = (
                int(m.group("mn"))
                if "mn" in m.groupdict()
                else _MONTH_INDEX[m.group("m").lower()[:3]]
            )
            try:
                day = date(int(m.group("y")), month, int(m.group("d")))
            except ValueError:
                continue
            taken.append((m.start(), m.end()))
            found.append(Quantity(float(day.toordinal()), 1.0, DATE_KIND, None, *m.span()))
            if months:
                value = float(day.year * 12 + month - 1)
                found.append(Quantity(value, 1.0, MONTH_KIND, None, *m.span()))
    for m in _MONTH_YEAR.finditer(text):
        if any(s < m.end() and m.start() < e for s, e in taken):
            continue
        value = float(int(m.group("y")) * 12 + _MONTH_INDEX[m.group("m").lower()[:3]] - 1)
        found.append(Quantity(value, 1.0, MONTH_KIND, None, *m.span()))
    return found


def with_dates(text: str, quantities: list[Quantity], *, keep_parts: bool) -> list[Quantity]:
    """``quantities`` of ``text`` with its whole dates added (:func:`date_quantities`).

    An answer's date replaces the numbers it is written with (its day is not a count, its
    year is compared within the date); a statement keeps them too (``keep_parts``), so an
    answer that gives the day or the year alone still finds it."""
    dates = date_quantities(text, months=keep_parts)
    if not dates:
        return quantities
    spans = [(q.start, q.end) for q in dates]
    inside = [any(s <= q.start and q.end <= e for s, e in spans) for q in quantities]
    if not keep_parts:
        return [q for q, part in zip(quantities, inside, strict=True) if not part] + dates
    # The day of a date is a day of the month, not a count: it must not pass for "3.5 kg"
    # (a count matches any kind) while "on May 4" still finds it.
    return [
        replace(q, kind="date", unit="day") if part and q.kind == "count" else q
        for q, part in zip(quantities, inside, strict=True)
    ] + dates


def statement_quantities(statement: str) -> list[Quantity]:
    """The quantities a record's statement states, dates included."""
    return with_dates(statement, extract_quantities(statement), keep_parts=True)
