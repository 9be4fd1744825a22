"""``DatasetSink``: the scored answers that went wrong in production, as a file ``groundwatch
check`` reads.

An ``on_result`` callback. On the worker thread it only asks ``when`` and appends the record and
its evaluation to a bounded buffer (a full buffer drops the row and counts it); a writer thread
of its own redacts, serialises and writes each row, so a slow or stuck disk never holds up the
worker, let alone the app. Each row is one JSON object on one line: ``id`` (the trace id),
``question``, ``contexts``, ``answer`` (the fields ``groundwatch check`` reads), the judge's
``judge_label``, ``faithfulness``, ``groundedness`` and ``claims`` with their verdicts, and an
empty ``label`` for a person to fill (``grounded`` or ``hallucinated``): then the same file is a
golden set, and ``check`` prints the judge-human table.

``when="audit"`` keeps exactly the answers of the monitor's random audit (``audit_rate``), each
row marked ``"audit": true`` with its ``trace_id``, ``route``, ``judge_label`` and
``hallucination_probability``: once labelled, the file goes back with ``groundwatch feedback
import`` (docs/feedback.md "Audits") and is a random audit for ``groundwatch check``.
"""

from __future__ import annotations

import collections.abc
import json
import os
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, Any

from .._shared import guard
from .._shared.weakhooks import reinit_after_fork
from ..telemetry._emitter import scrub_secrets
from ..types import Evaluation, Passage, RagRecord
from ._background import BackgroundQueue

When = Callable[[RagRecord, Evaluation], bool] | Collection[str] | str
"""Which scored answers to write: a predicate ``(record, evaluation) -> bool``, a set of
labels, or ``"audit"``."""

AUDIT = "audit"
"""``when="audit"``: the answers of the monitor's random audit, and only those."""

AUDIT_RATE_REQUIRED = (
    'DatasetSink(when="audit") keeps the answers of the monitor\'s random audit, and this '
    "monitor audits none: pass audit_rate=0.02 (say) to the Monitor, or set "
    "GROUNDWATCH_AUDIT_RATE"
)

DEFAULT_LABELS = frozenset({"hallucinated", "insufficient_context", "no_claims", "error"})
"""Every label but ``grounded``."""

CAPTURE_CONTENT_REQUIRED = (
    "DatasetSink writes the question, the passages and the answer of each row, which this "
    "monitor does not capture: pass capture_content=True to the Monitor (or set "
    "GROUNDWATCH_CAPTURE_CONTENT=true), with a redact= hook for what must not be written"
)


def _never(record: RagRecord, evaluation: Evaluation) -> bool:
    return False


class DatasetSink:
    """Write the scored answers that match ``when`` as JSONL rows ``groundwatch check`` reads.

    Pass it as (or among) a monitor's ``on_result``; the monitor hands it its content settings
    and flushes and closes it with itself. It needs the monitor's ``capture_content=True`` (the
    monitor refuses it otherwise, at construction) and writes every text through the
    monitor's ``redact`` hook (and scrubs what looks like an API key).

    Args:
        path: the file (JSON Lines, appended to). When it passes ``max_bytes`` it is renamed
            ``<stem>.1<suffix>`` (the older ones shift up to ``backups``; the oldest goes) and a
            new one begins, so ``flagged.jsonl`` rotates to ``flagged.1.jsonl``, still a file
            ``check`` reads as it is. A process forked after the sink began writes to
            ``<stem>.<pid><suffix>`` (one writer per file).
        when: a set of labels (default: every label but ``grounded``), a predicate
            ``(record, evaluation) -> bool``, run on the worker thread (keep it quick), or
            ``"audit"``: exactly the answers of the monitor's random audit (its
            ``audit_rate``), each row marked ``"audit": true``.
        max_bytes: size at which the file rotates (default 64 MiB; ``0``: never).
        backups: rotated files kept.
        max_buffered: rows waiting for the writer; more are dropped and counted (:attr:`dropped`,
            and ``groundwatch.errors{groundwatch.component="dataset", error.type="buffer_full"}``).

    Raises:
        ValueError: a size or count below 0, ``max_buffered`` below 1, or a ``when`` that is
            none of the above.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        when: When | None = None,
        max_bytes: int = 64 * 1024 * 1024,
        backups: int = 5,
        max_buffered: int = 10_000,
    ) -> None:
        if max_bytes < 0 or backups < 0:
            raise ValueError(f"max_bytes and backups must be >= 0, got {max_bytes}, {backups}")
        if max_buffered < 1:
            raise ValueError(f"max_buffered must be >= 1, got {max_buffered!r}")
        self.path = Path(path)
        self._wanted: Callable[[RagRecord, Evaluation], bool]
        self.audit = when == AUDIT
        """Whether the sink keeps the random audit (``when="audit"``)."""
        self._audited: Callable[[RagRecord, Evaluation], bool] = _never
        if when is None:
            when = DEFAULT_LABELS
        if self.audit:
            # Read through the attribute: the monitor binds its audit when it takes the sink.
            self._wanted = lambda record, evaluation: self._audited(record, evaluation)
        elif callable(when):
            self._wanted = when
        elif isinstance(when, collections.abc.Collection) and not isinstance(when, str):
            labels = frozenset(when)
            self._wanted = lambda record, evaluation: evaluation.label in labels
        else:
            raise ValueError(f"when must be a set of labels or a predicate, got {when!r}")
        self.max_bytes = max_bytes
        self.backups = backups
        self.max_buffered = max_buffered
        self.capture_content: bool | None = None
        """Set by the monitor (``None``: not attached to a monitor yet)."""
        self.redact: Callable[[str], str] | None = None
        self.written = 0
        """Rows written so far."""
        self.dropped = 0
        """Rows that matched but were not written (buffer full, a write that failed)."""
        self.rotations = 0
        self._lock = threading.Lock()
        self._init_state()
        # The writer thread and its bounded buffer (a forked child gets a fresh one).
        self._queue: BackgroundQueue[tuple[RagRecord, Evaluation]] = BackgroundQueue(
            "groundwatch-dataset",
            self._write_batch,
            max_items=max_buffered,
            on_stop=self._close_file,
        )
        reinit_after_fork(self._at_fork_reinit)

    def _init_state(self) -> None:
        self._pid = os.getpid()
        self._file: IO[bytes] | None = None
        self._size = 0

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
        had_file = self._file is not None
        self._init_state()
        if had_file:
            self.path = self.path.with_name(f"{self.path.stem}.{os.getpid()}{self.path.suffix}")

    # --- the monitor ---------------------------------------------------------------------------

    def bind_monitor(
        self,
        *,
        capture_content: bool,
        redact: Callable[[str], str] | None,
        audited: Callable[[RagRecord, Evaluation], bool] | None = None,
        audit_rate: float = 0.0,
    ) -> None:
        """Called by the monitor that runs this sink: its content settings and its audit.

        Raises:
            ValueError: the monitor does not capture content, or this sink keeps the audit
                (``when="audit"``) and the monitor audits nothing.
        """
        if not capture_content:
            raise ValueError(CAPTURE_CONTENT_REQUIRED)
        if self.audit and (audited is None or not audit_rate):
            raise ValueError(AUDIT_RATE_REQUIRED)
        self.capture_content = capture_content
        self.redact = redact
        if audited is not None:
            self._audited = audited

    # --- worker thread -------------------------------------------------------------------------

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        """The ``on_result`` callback: ask ``when``, buffer the row (never waits)."""
        if not self.capture_content:
            # Not attached to a monitor that captures content: never write content it was not
            # allowed to keep (the monitor refuses that at construction; this is a direct call).
            self._drop("content_capture_off")
            return
        if not self._wanted(record, evaluation):
            return
        if self._pid != os.getpid():
            self._at_fork_reinit()
        if not self._queue.offer((record, evaluation)):
            self._drop("closed" if self._queue.closed else "buffer_full")

    def _drop(self, why: str, n: int = 1) -> None:
        with self._lock:
            self.dropped += n
        guard.user_fault(
            "dataset",
            why,
            "groundwatch: DatasetSink(%s) dropped rows (%s); DatasetSink.dropped counts them",
            self.path,
            why,
        )

    # --- writer thread -------------------------------------------------------------------------

    def _write_batch(self, batch: list[tuple[RagRecord, Evaluation]]) -> None:
        lines: list[bytes] = []
        for record, evaluation in batch:
            try:
                lines.append(self.row_line(record, evaluation))
            except Exception as exc:  # the redact hook, or a row we could not build
                guard.user_error("dataset", exc)
                with self._lock:
                    self.dropped += 1
        if lines:
            self._write(lines)

    def _write(self, lines: list[bytes]) -> None:
        try:
            for line in lines:
                f = self._open()
                if self.max_bytes and self._size and self._size + len(line) > self.max_bytes:
                    f = self._rotate()
                f.write(line)
                self._size += len(line)
            if self._file is not None:
                self._file.flush()
        except OSError as exc:
            guard.user_error("dataset", exc)
            with self._lock:
                self.dropped += len(lines)
            self._close_file()
            return
        with self._lock:
            self.written += len(lines)

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
            try:
                self._size = os.fstat(self._file.fileno()).st_size
            except OSError:
                self._size = 0
        return self._file

    def rotated_path(self, n: int) -> Path:
        """The ``n``-th rotated file: ``flagged.jsonl`` -> ``flagged.<n>.jsonl``."""
        return self.path.with_name(f"{self.path.stem}.{n}{self.path.suffix}")

    def _rotate(self) -> IO[bytes]:
        self._close_file()
        if self.backups:
            for n in range(self.backups - 1, 0, -1):
                if self.rotated_path(n).exists():
                    os.replace(self.rotated_path(n), self.rotated_path(n + 1))
            os.replace(self.path, self.rotated_path(1))
        else:
            self.path.unlink(missing_ok=True)
        self.rotations += 1
        return self._open()

    def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError as exc:
                guard.user_error("dataset", exc)

    def _text(self, text: str) -> str:
        if self.redact is not None:
            text = self.redact(text)
        return scrub_secrets(text)

    def row(self, record: RagRecord, evaluation: Evaluation) -> dict[str, Any]:
        """The JSON object of one row (writer thread): texts redacted, ``label`` empty."""
        contexts: list[Any] = []
        for passage in record.contexts:
            if isinstance(passage, Passage):
                text = self._text(passage.text)
                if passage.kind != "retrieved" or passage.tool:
                    # As check reads a passage's origin (and names it in its reports).
                    item: dict[str, str] = {"text": text, "kind": passage.kind}
                    if passage.tool:
                        item["tool"] = passage.tool
                    contexts.append(item)
                else:
                    contexts.append(text)
            else:  # a record that never reached preparation (not expected on the worker)
                contexts.append(self._text(str(passage)))
        row: dict[str, Any] = {
            "id": format(record.trace_id, "032x") if record.trace_id else record.record_id,
            "question": None if record.question is None else self._text(record.question),
            "contexts": contexts,
            "answer": self._text(record.answer),
            "label": "",
            "judge_label": evaluation.label,
            "faithfulness": evaluation.faithfulness,
            "groundedness": evaluation.groundedness,
            "claims": [
                {
                    "text": self._text(claim.text),
                    "verdict": claim.verdict,
                    "sources": [e.name for e in claim.evidence[:3]],
                }
                for claim in evaluation.claims
            ],
            "judge": evaluation.judge,
            "hallucination_probability": evaluation.hallucination_probability,
            "trace_id": format(record.trace_id, "032x") if record.trace_id else None,
        }
        if self.audit:
            # Chosen by the random audit, not by a label or a predicate: what tells
            # `groundwatch check` and `groundwatch feedback import` that a person's labels of
            # these rows are a random sample of the judged answers.
            row["audit"] = True
        if record.route is not None:
            row["route"] = record.route
        if evaluation.label == "error":
            row["error_type"] = evaluation.error_type or "error"
        if evaluation.truncated:
            row["truncated"] = True
        return row

    def row_line(self, record: RagRecord, evaluation: Evaluation) -> bytes:
        return (json.dumps(self.row(record, evaluation), ensure_ascii=False) + "\n").encode()

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Rows waiting for the writer."""
        return len(self._queue)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every buffered row is written; ``False`` past the deadline (a stuck
        disk). Never raises."""
        return self._queue.flush(timeout_s)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Write what is buffered within the deadline (the rest is counted dropped), then close
        the file. Later rows are dropped and counted."""
        ok, lost = self._queue.close(timeout_s)
        if lost:
            self._drop("shutdown", lost)
        return ok

    def __repr__(self) -> str:
        return (
            f"DatasetSink({str(self.path)!r}: written {self.written}, dropped {self.dropped}, "
            f"buffered {self.buffered})"
        )
