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

from .._inputs import clean_text

ExpectedLabel = Literal["faithful", "hallucinated"]

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

    @property
    def name(self) -> str:
        """How reports name this row: its id, else its row number."""
        return self.id if self.id else f"row {self.number}"


@dataclass(frozen=True)
class InvalidRow:
    """A row that could not be checked, with the field at fault."""

    number: int
    field: str
    message: str
    id: str | None = None

    def __str__(self) -> str:
        return f"row {self.number}: field '{self.field}': {self.message}"


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
    kind = detect_format(path, fmt)
    if not path.is_file():
        raise InputFileError(f"no such file: {path}")
    rows = _read_jsonl(path) if kind == "jsonl" else _read_csv(path)
    # Run the generator up to its first row now, so that a file that cannot be opened (or a CSV
    # file without a usable header) fails here as bad input, before any output file is created.
    first = next(rows, None)
    return itertools.chain(() if first is None else (first,), rows)


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
                yield InvalidRow(number, "(line)", f"not UTF-8 text ({exc.reason})")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield InvalidRow(
                    number, "(line)", f"not valid JSON: {exc.msg} at column {exc.colno}"
                )
                continue
            if not isinstance(obj, dict):
                yield InvalidRow(number, "(line)", f"expected a JSON object, got {_kind(obj)}")
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
                yield InvalidRow(number, "(row)", f"malformed CSV: {exc}")
                continue
            number += 1
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(columns):
                yield InvalidRow(
                    number, "(row)", f"{len(cells)} cells for {len(columns)} header columns"
                )
                continue
            obj = dict(zip(columns, cells, strict=False))
            yield parse_row(number, obj, contexts_are_json=True)


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
    answer = obj.get(field)
    if answer is None:
        return bad("answer", "missing")
    if not isinstance(answer, str):
        return bad(field, f"expected a string, got {_kind(answer)}")

    field = _named(obj, "question")
    question = obj.get(field)
    if question == "":
        question = None
    if question is not None and not isinstance(question, str):
        return bad(field, f"expected a string or null, got {_kind(question)}")

    field = _named(obj, "contexts")
    contexts = obj.get(field)
    if contexts is None:
        return bad("contexts", "missing (a list of passages)")
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
    return Row(number, row_id, question, contexts, answer, expected)
