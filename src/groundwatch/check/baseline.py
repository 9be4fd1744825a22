"""``groundwatch check --baseline previous.json``: this run against a previous run, row by row.

The baseline is a previous run's ``--json`` output. Rows are matched by ``id`` (a row without
one by its row number, ``row N``). A row *fails* when its answer is flagged as a test case
(:func:`~.summary.is_failure`: ``hallucinated``, ``insufficient_context``, or a contradicted
claim), its judge failed (``error``) or it is invalid; it *passes* otherwise. Each row matched
in both runs is one of: newly failing (passed before, fails now: a *regression*, which the
``--max-regressions`` gate counts), newly passing, label changed (same pass or fail, another
label), or unchanged. Rows only here are *added*, rows only there *removed*.

Memory: the baseline's ids with a label each, and the ids seen so far (to find the removed
rows); the changes themselves are counted, and the first :data:`MAX_LISTED` of each kind kept
for the reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..types import Evaluation
from .rows import InputFileError, InvalidRow, Row

MAX_LISTED = 20
"""Changes of each kind listed in the reports; the rest are counted."""

KINDS = ("newly_failing", "newly_passing", "label_changed", "added", "removed")
TITLES = {
    "newly_failing": "newly failing",
    "newly_passing": "newly passing",
    "label_changed": "label changed",
    "added": "added",
    "removed": "removed",
}
INVALID = "invalid"
"""The label of a row that could not be checked."""


@dataclass(frozen=True)
class Change:
    """One row that differs from the baseline."""

    name: str
    """The row's id, or ``row N``."""
    before: str | None
    """Its label in the baseline (``None``: added)."""
    after: str | None
    """Its label now (``None``: removed)."""

    def text(self) -> str:
        return f"{self.name}: {self.before or '-'} -> {self.after or '-'}"


def _key(row_id: Any, number: Any) -> str:
    return str(row_id) if row_id not in (None, "") else f"row {number}"


def _failed(label: str, claims: Any) -> bool:
    if label in ("hallucinated", "insufficient_context", "error", INVALID):
        return True
    return isinstance(claims, list) and any(
        isinstance(c, dict) and c.get("verdict") == "contradicted" for c in claims
    )


def read_baseline(path: Path) -> dict[str, tuple[str, bool]]:
    """``key -> (label, failed)`` of every row of a previous run's ``--json`` output.

    Raises:
        InputFileError: the file is missing, unreadable, or not a ``--json`` output.
    """
    if path.is_dir():
        raise InputFileError(f"--baseline {path} is a directory, not a file")
    try:
        f = path.open("rb")
    except OSError as exc:
        raise InputFileError(f"--baseline: cannot read {path}: {exc.strerror or exc}") from exc
    rows: dict[str, tuple[str, bool]] = {}
    summary = False
    with f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise InputFileError(
                    f"--baseline {path}: line {number} is not JSON ({exc}); the baseline is "
                    "the file a previous run wrote with --json"
                ) from exc
            kind = obj.get("kind") if isinstance(obj, dict) else None
            if kind == "evaluation":
                ev = obj.get("evaluation")
                label = ev.get("label") if isinstance(ev, dict) else None
                if not isinstance(label, str):
                    raise InputFileError(
                        f"--baseline {path}: line {number} has no evaluation label"
                    )
                key = _key(obj.get("id"), obj.get("row"))
                rows[key] = (label, _failed(label, ev.get("claims")))
            elif kind == "invalid_row":
                rows[_key(obj.get("id"), obj.get("row"))] = (INVALID, True)
            elif kind == "summary":
                summary = True
            else:
                raise InputFileError(
                    f"--baseline {path}: line {number} is not a line of a groundwatch check "
                    "--json output (no kind evaluation, invalid_row or summary)"
                )
    if not rows and not summary:
        raise InputFileError(f"--baseline {path} is empty: pass a previous run's --json output")
    return rows


@dataclass
class BaselineDiff:
    """The comparison, fed row by row in input order (by :class:`~.summary.CheckSummary`)."""

    path: str
    before: dict[str, tuple[str, bool]]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    listed: dict[str, list[Change]] = field(default_factory=lambda: {k: [] for k in KINDS})
    seen: set[str] = field(default_factory=set)
    compared: int = 0
    regressed: dict[str, str] = field(default_factory=dict)
    """Newly failing rows: key -> baseline label (read by the JUnit writer as rows arrive)."""
    finished: bool = False

    @classmethod
    def read(cls, path: Path) -> BaselineDiff:
        return cls(str(path), read_baseline(path))

    def _note(self, kind: str, change: Change) -> None:
        self.counts[kind] += 1
        if len(self.listed[kind]) < MAX_LISTED:
            self.listed[kind].append(change)

    def _compare(self, key: str, label: str, failed: bool) -> None:
        self.seen.add(key)
        old = self.before.get(key)
        if old is None:
            self._note("added", Change(key, None, label))
            return
        self.compared += 1
        old_label, old_failed = old
        if failed and not old_failed:
            self.regressed[key] = old_label
            self._note("newly_failing", Change(key, old_label, label))
        elif old_failed and not failed:
            self._note("newly_passing", Change(key, old_label, label))
        elif old_label != label:
            self._note("label_changed", Change(key, old_label, label))

    def add(self, row: Row, ev: Evaluation, failed: bool) -> None:
        """Compare one scored row; ``failed``: whether it fails as a test case now (the
        summary's :func:`~.summary.is_failure`, or an ``error``)."""
        self._compare(_key(row.id, row.number), ev.label, failed)

    def add_invalid(self, bad: InvalidRow) -> None:
        self._compare(_key(bad.id, bad.number), INVALID, True)

    def regression(self, row_id: str | None, number: int) -> str | None:
        """The baseline label of a row that newly fails, else ``None``."""
        return self.regressed.get(_key(row_id, number))

    def finish(self) -> None:
        """Count the removed rows (in the baseline, not in this run); once."""
        if self.finished:
            return
        self.finished = True
        for key, (label, _) in self.before.items():
            if key not in self.seen:
                self._note("removed", Change(key, label, None))

    @property
    def regressions(self) -> int:
        return self.counts["newly_failing"]

    def lines(self) -> Iterator[str]:
        """The summary's section, after the counts line."""
        for kind in KINDS:
            if not self.counts[kind]:
                continue
            yield f"  {TITLES[kind]} ({self.counts[kind]})"
            for change in self.listed[kind]:
                yield f"    {change.text()}"
            if self.counts[kind] > len(self.listed[kind]):
                yield f"    … and {self.counts[kind] - len(self.listed[kind])} more"

    def headline(self) -> str:
        return " · ".join(f"{TITLES[k]} {self.counts[k]}" for k in KINDS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "baseline_rows": len(self.before),
            "compared": self.compared,
            **{k: self.counts[k] for k in KINDS},
            "changes": {
                k: [{"id": c.name, "before": c.before, "after": c.after} for c in self.listed[k]]
                for k in KINDS
            },
        }
