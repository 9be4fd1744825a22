"""Reading the rows of ``groundwatch check``: JSONL or CSV, streamed one row at a time.

Every row is validated field by field, so a bad row becomes an :class:`InvalidRow` that names
its row number and the field at fault while the rest of the file is still read.

Row numbers are what a person sees when opening the file: the line number in JSONL (blank lines
count), and the spreadsheet row in CSV (the header is row 1, so the first data row is row 2).
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._shared import inputs
from .._shared.inputs import clean_text
from ..runtime.pipeline import Prepared, prepare_inputs

ExpectedLabel = Literal["faithful", "hallucinated"]

# Spellings of the optional ``audit`` column: JSON booleans, or text in a CSV cell.
AUDIT_VALUES = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

# Human labels accepted in the optional ``label`` column, mapped onto the two classes the gate
# compares against. Both vocabularies in use (ours: grounded; benchmark sets: faithful) work.
LABEL_ALIASES: dict[str, ExpectedLabel] = {
    "faithful": "faithful",
    "grounded": "faithful",
    "hallucinated": "hallucinated",
    "unfaithful": "hallucinated",
}

ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "input"),
    "contexts": ("contexts", "context", "retrieved_contexts", "retrieval_context"),
    "answer": ("answer", "response", "actual_output"),
}
"""Names of the question, contexts and answer fields by dataset convention, first match wins:
ours; RAGAS (``user_input``, ``response``, ``retrieved_contexts``); DeepEval test cases
(``input``, ``actual_output``, ``retrieval_context``). So a team can point ``check`` at the
datasets it already has."""


def _named(obj: Mapping[str, Any], field: str) -> str:
    """The key ``obj`` uses for ``field`` (its first alias present), else the field's own name."""
    return next((name for name in ALIASES[field] if name in obj), field)


class InputFileError(Exception):
    """The input cannot be read at all (missing file, unknown format, not UTF-8, no header)."""


@dataclass(frozen=True)
class Row:
    """One valid input row."""

    number: int
    id: str | None
    question: str | None
    contexts: list[Any]
    answer: str
    expected: ExpectedLabel | None
    cuts: tuple[str, ...] = ()
    """What the judge did not read in full (:meth:`Caps.cuts`), set when the row is judged."""
    answer_read: int | None = None
    """Characters of the answer the judge read, when it read only part of it."""
    audit: bool = False
    """The row is marked ``"audit": true``: chosen at random for a human audit (the rows
    ``DatasetSink(when="audit")`` writes), so its ``label`` is a random sample's."""

    @property
    def name(self) -> str:
        """How reports name this row: its id, else its row number."""
        return self.id if self.id else f"row {self.number}"

    @property
    def where(self) -> str:
        """``id (row N)``, or ``row N`` for a row without an id."""
        return f"{self.id} (row {self.number})" if self.id else f"row {self.number}"

    def passage_texts(self) -> list[str]:
        """The text of each passage (validated by :func:`parse_row`: a string or a ``text``)."""
        return [c if isinstance(c, str) else str(c["text"]) for c in self.contexts]


@dataclass(frozen=True)
class InvalidRow:
    """A row that could not be checked, with the field at fault (``None``: the line or record
    as a whole, e.g. broken JSON)."""

    number: int
    field: str | None
    message: str
    id: str | None = None

    def __str__(self) -> str:
        if self.field is None:
            return f"row {self.number}: {self.message}"
        return f"row {self.number}: field '{self.field}': {self.message}"


MAX_CUTS_NAMED = 3
"""Cut passages named one by one in a row's :meth:`Caps.cuts`; the rest are counted."""


@dataclass(frozen=True)
class Caps:
    """How much of a row the judge reads: the answer's characters, each passage's characters
    and the number of passages (``--max-answer-chars``, ``--max-context-chars``,
    ``--max-passages``; by default the runtime's caps, which the ``GROUNDWATCH_MAX_*``
    environment variables set). What lies past them is cut before judging."""

    answer_chars: int = inputs.MAX_ANSWER_CHARS
    passage_chars: int = inputs.MAX_PASSAGE_CHARS
    passages: int = inputs.MAX_PASSAGES

    def cuts(self, row: Row) -> tuple[str, ...]:
        """What of ``row`` the judge does not read, one phrase per cut naming the option that
        raises the cap; empty when it reads everything."""
        out: list[str] = []
        if len(row.answer) > self.answer_chars:
            out.append(
                f"answer: {len(row.answer):,} characters, the judge read the first "
                f"{self.answer_chars:,} (--max-answer-chars)"
            )
        texts = row.passage_texts()
        long = [
            i for i, text in enumerate(texts[: self.passages]) if len(text) > self.passage_chars
        ]
        for i in long[:MAX_CUTS_NAMED]:
            out.append(
                f"contexts[{i}]: {len(texts[i]):,} characters, the judge read the first "
                f"{self.passage_chars:,} (--max-context-chars)"
            )
        if len(long) > MAX_CUTS_NAMED:
            out.append(
                f"{len(long) - MAX_CUTS_NAMED} more passages longer than "
                f"{self.passage_chars:,} characters (--max-context-chars)"
            )
        if len(texts) > self.passages:
            out.append(
                f"contexts: {len(texts)} passages, the judge read the first {self.passages} "
                "(--max-passages)"
            )
        return tuple(out)

    def prepare(self, row: Row) -> Prepared:
        """The row as the runner judges it, prepared by the scoring pipeline with these caps
        (:func:`groundwatch.runtime.pipeline.prepare_inputs`). Raises ``TypeError`` as it
        does."""
        return prepare_inputs(
            row.answer,
            row.contexts,
            row.question,
            max_answer_chars=self.answer_chars,
            max_passage_chars=self.passage_chars,
            max_passages=self.passages,
        )


def detect_format(path: Path, explicit: str | None = None) -> Literal["jsonl", "csv"]:
    """The file's format: ``explicit`` when given, else from its extension."""
    if explicit:
        if explicit not in ("jsonl", "csv"):
            raise InputFileError(f"unknown format {explicit!r}; use jsonl or csv")
        return "jsonl" if explicit == "jsonl" else "csv"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    raise InputFileError(
        f"cannot tell the format of {path.name!r} from its extension; "
        "use a .jsonl or .csv file, or pass --format jsonl|csv"
    )


def read_rows(path: Path, fmt: str | None = None) -> Iterator[Row | InvalidRow]:
    """Yield the rows of ``path`` one at a time, never holding the whole file in memory.

    Raises:
        InputFileError: the file is missing, unreadable or not in the expected format as a
            whole (for example a CSV file without an ``answer`` column).
    """
    if path.is_dir():
        raise InputFileError(f"{path} is a directory, not a file")
    if not path.exists():
        raise InputFileError(f"no such file: {path}")
    kind = detect_format(path, fmt)
    rows = _read_jsonl(path) if kind == "jsonl" else _read_csv(path)
    # Run the generator up to its first row now, so that a file that cannot be opened (or a CSV
    # file without a usable header, or no row at all) fails here as bad input, before any
    # output file is created and before a summary of nothing is printed.
    first = next(rows, None)
    if first is None:
        raise InputFileError(_no_rows(path, kind))
    return itertools.chain((first,), rows)


def _no_rows(path: Path, kind: str) -> str:
    """Why a file that could be read yielded no row."""
    try:
        empty = path.stat().st_size == 0
    except OSError:
        empty = False
    if empty:
        return f"{path} is empty: there is no row to check"
    if kind == "csv":
        return f"{path} has a header row but no rows to check"
    return f"{path} has only blank lines: there is no row to check"


def count_rows(path: Path, fmt: str | None = None) -> int | None:
    """A quick count of the rows (non-blank lines / CSV records) for the progress bar."""
    try:
        kind = detect_format(path, fmt)
        if kind == "jsonl":
            with path.open("rb") as f:
                return sum(1 for line in f if line.strip())
        with path.open(encoding="utf-8-sig", newline="") as f:
            return max(0, sum(1 for _ in csv.reader(f)) - 1)
    except (OSError, InputFileError, UnicodeDecodeError, csv.Error):
        return None


def _read_jsonl(path: Path) -> Iterator[Row | InvalidRow]:
    # Bytes in, decoded line by line: one line that is not UTF-8 is one bad row, not a crash.
    try:
        f = path.open("rb")
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from exc
    with f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield InvalidRow(number, None, f"not UTF-8 text ({exc.reason})")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield InvalidRow(number, None, f"not valid JSON: {json_problem(text, exc)}")
                continue
            if not isinstance(obj, dict):
                yield InvalidRow(number, None, f"expected a JSON object, got {_kind(obj)}")
                continue
            yield parse_row(number, obj, contexts_are_json=False)


def _read_csv(path: Path) -> Iterator[Row | InvalidRow]:
    # CSV cells can be large (whole passages); lift the module's 128 KiB default.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        f = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from exc
    dialect: type[csv.Dialect] = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
    with f:
        reader = csv.reader(f, dialect)
        try:
            header = next(reader, None)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise InputFileError(f"cannot read the CSV header of {path}: {exc}") from exc
        if header is None:
            raise InputFileError(f"{path} is empty: a CSV file needs a header row")
        columns = [h.strip().lower() for h in header]
        if not set(ALIASES["answer"]) & set(columns):
            raise InputFileError(
                f"the CSV header of {path} has no 'answer' column "
                f"(nor {', '.join(repr(a) for a in ALIASES['answer'][1:])}; "
                f"found: {', '.join(columns)})"
            )
        number = 1
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError as exc:
                raise InputFileError(f"{path} is not UTF-8 text after row {number}: {exc}") from exc
            except csv.Error as exc:
                number += 1
                yield InvalidRow(number, None, f"malformed CSV: {exc}")
                continue
            number += 1
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(columns):
                yield InvalidRow(
                    number, None, f"{len(cells)} cells for {len(columns)} header columns"
                )
                continue
            obj = dict(zip(columns, cells, strict=False))
            yield parse_row(number, obj, contexts_are_json=True)


def json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """What is wrong with one line of JSON Lines, in words a person can act on.

    ``json`` says where it stopped (``Expecting ',' delimiter``); the usual causes are named
    instead: an object not closed, a missing bracket, single quotes, a trailing comma, two
    objects on a line, a pretty-printed file.
    """
    body = text.strip()
    if body.startswith("["):
        return "the line holds a JSON array: check reads JSON Lines, one object per line"
    if not body.startswith("{"):
        return "not JSON: a JSON Lines row starts with '{' (one object per line)"
    column = f"column {exc.colno}"
    if exc.pos >= len(text.rstrip()):
        # Nothing after the error: the line stops inside the object.
        for closer, missing in (
            ("}", "a '}' is missing at the end"),
            ("]}", "a ']}' is missing at the end"),
            ('"}', "a closing '\"}' is missing at the end"),
        ):
            if _parses(text.rstrip() + closer):
                return f"the line ends before the JSON object is closed: {missing}"
        return (
            "the line ends before the JSON object is closed (each row must be one whole "
            "object on one line; is the file pretty-printed JSON?)"
        )
    for mark in ("]", "}", ","):
        if _parses(text[: exc.pos] + mark + text[exc.pos :]):
            return f"a '{mark}' is missing before {column}"
    before = text[: exc.pos].rstrip()[-1:]
    at = text[exc.pos : exc.pos + 1]
    if exc.msg.startswith("Extra data"):
        return f"more than one JSON value on the line (the second starts at {column})"
    if exc.msg.startswith("Expecting property name"):
        if before == ",":
            return f"a comma before '}}' (JSON allows none) at {column}"
        return f'names must be in double quotes, like {{"answer": ...}} ({column})'
    if exc.msg.startswith("Expecting value"):
        if at == "'":
            return f"strings must be in double quotes, not single quotes ({column})"
        if before == "," and at in "]}":
            return f"a comma before '{at}' (JSON allows none) at {column}"
        return (
            f'a value is missing or is not JSON at {column} (JSON has "strings", numbers, '
            "true, false, null, [lists] and {objects})"
        )
    if exc.msg.startswith("Expecting ',' delimiter"):
        return (
            f"a ',' or a closing bracket is expected at {column} (a '\"' inside a string must "
            'be written \\")'
        )
    if exc.msg.startswith("Unterminated string"):
        return f"a string is not closed: its '\"' is missing (the string starts at {column})"
    if exc.msg.startswith("Invalid control character"):
        return f"a raw tab or line break inside a string at {column}: write it as \\t or \\n"
    if exc.msg.startswith("Invalid"):
        return f"a backslash escape JSON does not have at {column}: write a backslash as \\\\"
    return f"{exc.msg[:1].lower()}{exc.msg[1:]} at {column}"


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def parse_row(number: int, obj: Mapping[str, Any], *, contexts_are_json: bool) -> Row | InvalidRow:
    """Validate one row's fields; ``contexts_are_json``: the contexts cell holds JSON (CSV)."""
    raw_id = obj.get("id")
    row_id = None if raw_id in (None, "") else clean_text(str(raw_id))

    def bad(field: str, message: str) -> InvalidRow:
        return InvalidRow(number, field, message, row_id)

    if isinstance(raw_id, (dict, list)):
        return bad("id", f"expected a string or a number, got {_kind(raw_id)}")

    field = _named(obj, "answer")
    if field not in obj:
        return bad(field, "missing (the answer to check)")
    answer = obj[field]
    if answer is None:
        return bad(field, "null; expected a string (the answer to check)")
    if not isinstance(answer, str):
        return bad(field, f"expected a string, got {_kind(answer)}")

    field = _named(obj, "question")
    question = obj.get(field)
    if question == "":
        question = None
    if question is not None and not isinstance(question, str):
        return bad(field, f"expected a string or null, got {_kind(question)}")

    field = _named(obj, "contexts")
    if field not in obj:
        return bad(field, "missing (a list of passages)")
    contexts = obj[field]
    if contexts is None:
        return bad(field, "null; expected a list of passages")
    if contexts_are_json:
        if not isinstance(contexts, str) or not contexts.strip().startswith("["):
            return bad(field, 'expected a JSON list in the cell, like ["first passage", "second"]')
        try:
            # strict=False: passages pasted into a spreadsheet cell keep their raw newlines.
            contexts = json.loads(contexts, strict=False)
        except json.JSONDecodeError as exc:
            return bad(field, f"not a valid JSON list: {exc.msg} at column {exc.colno}")
    if not isinstance(contexts, list):
        return bad(field, f"expected a list of passages, got {_kind(contexts)}")
    for i, item in enumerate(contexts):
        if isinstance(item, str):
            continue
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            metadata = item.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                return bad(f"{field}[{i}].metadata", f"expected an object, got {_kind(metadata)}")
            continue
        return bad(
            f"{field}[{i}]", f"expected a string or an object with a 'text', got {_kind(item)}"
        )

    raw_label = obj.get("label")
    expected: ExpectedLabel | None = None
    # JSON escapes can spell lone surrogates, which no output file could encode.
    answer = clean_text(answer)
    question = None if question is None else clean_text(question)
    contexts = [
        clean_text(c) if isinstance(c, str) else {**c, "text": clean_text(c["text"])}
        for c in contexts
    ]
    if raw_label not in (None, ""):
        if not isinstance(raw_label, str) or raw_label.strip().lower() not in LABEL_ALIASES:
            return bad(
                "label",
                f"unknown label {raw_label!r}; use one of {', '.join(sorted(LABEL_ALIASES))}",
            )
        expected = LABEL_ALIASES[raw_label.strip().lower()]
    raw_audit = obj.get("audit")
    audit = False
    if isinstance(raw_audit, bool):
        audit = raw_audit
    elif isinstance(raw_audit, str) and raw_audit.strip().lower() in AUDIT_VALUES:
        audit = AUDIT_VALUES[raw_audit.strip().lower()]
    elif raw_audit not in (None, ""):
        return bad("audit", f"expected true or false, got {raw_audit!r}")
    return Row(number, row_id, question, contexts, answer, expected, audit=audit)
