"""Reading golden sets: JSONL and CSV, row numbers, field-level errors, labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundwatch.check.rows import InputFileError, InvalidRow, Row, count_rows, read_rows

from .conftest import GROUNDED, write_jsonl


def _read(path: Path) -> list[Row | InvalidRow]:
    return list(read_rows(path))


def test_jsonl_row_numbers_are_line_numbers_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", [GROUNDED, "", "   ", {**GROUNDED, "id": 7}])
    rows = _read(data)
    assert [(r.number, r.id) for r in rows] == [(1, "ok"), (4, "7")]
    assert count_rows(data) == 2


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"contexts": ["x"]}, "answer", "missing"),
        ({"answer": ["x"], "contexts": ["x"]}, "answer", "expected a string, got a list"),
        ({"answer": "a"}, "contexts", "missing"),
        ({"answer": "a", "contexts": {"text": "x"}}, "contexts", "expected a list of passages"),
        ({"answer": "a", "contexts": ["x", 3]}, "contexts[1]", "got a number"),
        ({"answer": "a", "contexts": [{"txt": "x"}]}, "contexts[0]", "an object with a 'text'"),
        (
            {"answer": "a", "contexts": ["y", {"text": "x", "metadata": "doc.pdf"}]},
            "contexts[1].metadata",
            "expected an object, got a string",
        ),
        ({"answer": "a", "contexts": ["x"], "question": 5}, "question", "got a number"),
        ({"answer": "a", "contexts": ["x"], "label": "maybe"}, "label", "unknown label 'maybe'"),
        ({"answer": "a", "contexts": ["x"], "id": {"a": 1}}, "id", "got an object"),
        ([1, 2], None, "expected a JSON object, got a list"),
    ],
)
def test_jsonl_bad_rows_name_the_field(
    tmp_path: Path, row: object, field: str | None, message: str
) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps(GROUNDED) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    first, second = _read(data)
    assert isinstance(first, Row)
    assert isinstance(second, InvalidRow)
    assert (second.number, second.field) == (2, field)
    assert message in second.message


def test_jsonl_accepts_context_passage_objects_and_label_aliases(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {"answer": "a", "context": ["x"], "label": "Grounded"},  # the shared data's spelling
            {"answer": "a", "contexts": [{"text": "x", "id": "doc-1"}], "label": "unfaithful"},
            {"answer": "a", "contexts": [], "label": ""},
        ],
    )
    rows = _read(data)
    assert all(isinstance(r, Row) for r in rows)
    assert [r.expected for r in rows if isinstance(r, Row)] == ["faithful", "hallucinated", None]


def test_jsonl_line_that_is_not_utf8_is_one_bad_row(tmp_path: Path) -> None:
    data = tmp_path / "a.jsonl"
    data.write_bytes(
        json.dumps(GROUNDED).encode()
        + b"\n"
        + b'{"answer": "\xff\xfe"}\n'
        + b'{"answer": "a", "contexts": []}\n'
    )
    rows = _read(data)
    assert [type(r).__name__ for r in rows] == ["Row", "InvalidRow", "Row"]
    assert "not UTF-8" in rows[1].message  # type: ignore[union-attr]


def test_csv_rows_count_the_header_as_row_1_and_allow_multiline_cells(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text(
        "\ufeffID,Question,Contexts,Answer,Label\n"  # BOM and capitalised headers (Excel)
        '1,q,"[""line one\nline two""]","multi\nline",faithful\n'
        '2,q,"[""x""]",a,bogus\n'
        '3,q,"[""x"", 5]",a,\n'
        "4,q,[broken,a,\n",
        encoding="utf-8",
    )
    rows = _read(data)
    assert isinstance(rows[0], Row) and rows[0].number == 2
    assert rows[0].contexts == ["line one\nline two"] and rows[0].answer == "multi\nline"
    assert [(r.number, r.field) for r in rows[1:] if isinstance(r, InvalidRow)] == [
        (3, "label"),
        (4, "contexts[1]"),
        (5, "contexts"),
    ]
    assert count_rows(data) == 4


def test_csv_without_an_answer_column_is_a_file_error(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text("question,contexts\nq,[]\n", encoding="utf-8")
    # Raised by read_rows itself, before the caller creates any output file.
    with pytest.raises(InputFileError, match="no 'answer' column"):
        read_rows(data)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputFileError, match="needs a header row"):
        read_rows(empty)


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("{}", encoding="utf-8")
    with pytest.raises(InputFileError, match="--format"):
        read_rows(tmp_path / "a.txt")
    assert [r.number for r in read_rows(tmp_path / "a.txt", "jsonl")] == [1]
    with pytest.raises(InputFileError, match="no such file"):
        read_rows(tmp_path / "missing.csv")


def test_a_jsonl_file_that_cannot_be_opened_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was raised lazily as a bare OSError, which the CLI reported as "cannot write an output".
    data = write_jsonl(tmp_path / "locked.jsonl", [GROUNDED])
    real_open = Path.open

    def deny(self: Path, *args: object, **kwargs: object) -> object:
        if self == data:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", deny)
    with pytest.raises(InputFileError, match=r"cannot read .*Permission denied"):
        read_rows(data)
