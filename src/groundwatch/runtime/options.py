"""A :class:`~groundwatch.Monitor`'s options, grouped by concern as OpenTelemetry's SDK groups a
``TracerProvider``'s (a sampler, span limits, a resource): :class:`ScoringOptions` (where and
how the judge runs), :class:`CaptureOptions` (what content leaves the process),
:class:`AuditOptions` (the random audit and the feedback it brings back) and
:class:`QueueOptions` (the queue in front of the scoring, or a remote one).

Every field is also a keyword argument of ``Monitor`` itself (``Monitor(executor="thread")`` is
``Monitor(scoring=ScoringOptions(executor="thread"))``); a field left ``None`` takes its
``GROUNDWATCH_*`` variable's value, read when the monitor is built
(:mod:`groundwatch._shared.config`). Each group checks its own values when it is made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from .._shared import config as _config

if TYPE_CHECKING:
    from ..judging.scoring import LabelPolicy
    from ..telemetry.worker_export import WorkerProviders
    from .worker import RecordQueue

__all__ = ["AuditOptions", "CaptureOptions", "QueueOptions", "ScoringOptions"]


def _at_least_one(owner: object, *names: str) -> None:
    for name in names:
        value = getattr(owner, name)
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value!r}")


@dataclass(frozen=True)
class ScoringOptions:
    """Where and how the judge runs.

    Args:
        executor: where a sync (CPU-bound) judge runs: ``"process"``, a worker process
            started on first use, so scoring never holds this interpreter's GIL (the judge
            must be picklable); ``"thread"``, a thread of this interpreter (no extra process,
            but it slows the host's requests: docs/runtime.md "Overhead"); ``"auto"`` (the default,
            ``GROUNDWATCH_EXECUTOR``), a process, falling back to a thread with a warning
            when the judge cannot be pickled or no process can start. Async judges run on
            the worker's event loop (on threads once one blocks the loop: see
            :mod:`groundwatch.runtime.runners.async_runner`).
        processes: worker processes for ``executor="process"`` (started on first use).
        max_concurrency: evaluations in flight for an async judge
            (``GROUNDWATCH_MAX_CONCURRENCY``, default 8); sync judges run one at a time.
        evaluation_timeout_millis: deadline of one evaluation; past it the evaluation fails
            with ``error.type=timeout`` (``GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS``, 60000).
        policy: thresholds that turn scores into a label (:class:`~groundwatch.LabelPolicy`;
            its defaults when ``None``).
        export_from_worker: with the process executor, each worker process exports the span
            and the two events of what it scores itself, so this interpreter no longer pays
            the OpenTelemetry SDK's work for them; metric points stay here
            (:mod:`groundwatch.telemetry.worker_export`, docs/runtime.md). ``True``: over OTLP,
            configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables
            (:func:`~groundwatch.otlp_worker_providers`); or a picklable function that builds
            the worker process's tracer and logger providers. Default off
            (``GROUNDWATCH_EXPORT_FROM_WORKER``): this process's providers export everything.

    Raises:
        ValueError: a count or timeout below 1, or an unknown ``executor``.
    """

    executor: str | None = None
    processes: int | None = None
    max_concurrency: int | None = None
    evaluation_timeout_millis: int | None = None
    policy: LabelPolicy | None = None
    export_from_worker: bool | WorkerProviders | None = None

    def __post_init__(self) -> None:
        _at_least_one(self, "processes", "max_concurrency", "evaluation_timeout_millis")
        if self.executor is not None and self.executor not in _config.EXECUTORS:
            raise ValueError(f"executor must be one of {_config.EXECUTORS}, got {self.executor!r}")


@dataclass(frozen=True)
class CaptureOptions:
    """What content leaves the process (never any unless asked for).

    Args:
        capture_content: put the question, answer and claims with their quotes on the
            evaluation span (``GROUNDWATCH_CAPTURE_CONTENT``, default off).
        redact: applied to every captured text before it leaves the process.
        content_max_chars: cap per captured text attribute (``GROUNDWATCH_CONTENT_MAX_CHARS``).

    Raises:
        ValueError: ``content_max_chars`` below 1.
    """

    capture_content: bool | None = None
    redact: Callable[[str], str] | None = None
    content_max_chars: int | None = None

    def __post_init__(self) -> None:
        _at_least_one(self, "content_max_chars")


@dataclass(frozen=True)
class AuditOptions:
    """The random audit, and the feedback that brings people's labels back.

    Args:
        audit_rate: the share of judged answers in the random audit (``0.02`` or ``"2%"``),
            chosen by trace id
            (``Monitor.audited``), marked ``groundwatch.audit=true`` for people to label and
            bring back with ``feedback(source="audit")`` (docs/feedback.md "Audits";
            ``GROUNDWATCH_AUDIT_RATE``, default 0).
        feedback_memory: scored traces whose judge's label ``Monitor.feedback`` can still
            compare a person's label with (trace and span ids, label and route; never
            content): the most recent 10000 by default, ``0`` for none.

    Raises:
        ValueError: an ``audit_rate`` outside [0, 1], a negative ``feedback_memory``.
    """

    audit_rate: float | str | None = None
    feedback_memory: int | None = None

    def __post_init__(self) -> None:
        if self.audit_rate is not None:
            # 0.02 or "2%", as GROUNDWATCH_AUDIT_RATE reads (frozen: set through object).
            share = _config.parse_share(self.audit_rate, "audit_rate")
            object.__setattr__(self, "audit_rate", share)
        if self.feedback_memory is not None and self.feedback_memory < 0:
            raise ValueError(f"feedback_memory must be >= 0, got {self.feedback_memory!r}")


@dataclass(frozen=True)
class QueueOptions:
    """The queue between ``Monitor.record`` and the scoring.

    Args:
        max_queue_size: records waiting for the worker; more are dropped and counted
            (``GROUNDWATCH_MAX_QUEUE_SIZE``, default 1024).
        queue: send sampled records to a queue for ``groundwatch worker`` processes to score,
            instead of scoring them here (a :class:`~groundwatch.RedisQueue`;
            docs/distributed.md). The judge and the scoring options then go unused: the
            workers judge.

    Raises:
        ValueError: ``max_queue_size`` below 1.
    """

    max_queue_size: int | None = None
    queue: RecordQueue | None = None

    def __post_init__(self) -> None:
        _at_least_one(self, "max_queue_size")


class GroupedKeywords(TypedDict, total=False):
    """The groups' fields, each also a keyword argument of ``Monitor``."""

    executor: str | None
    processes: int | None
    max_concurrency: int | None
    evaluation_timeout_millis: int | None
    policy: LabelPolicy | None
    export_from_worker: bool | WorkerProviders | None
    capture_content: bool | None
    redact: Callable[[str], str] | None
    content_max_chars: int | None
    audit_rate: float | str | None
    feedback_memory: int | None
    max_queue_size: int | None
    queue: RecordQueue | None


_GROUPS: dict[str, type[Any]] = {
    "scoring": ScoringOptions,
    "capture": CaptureOptions,
    "audit": AuditOptions,
    "queueing": QueueOptions,
}
_GROUP_OF: dict[str, str] = {
    field.name: group for group, cls in _GROUPS.items() for field in dataclasses.fields(cls)
}


def gather(groups: Mapping[str, Any], keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The option groups ``Monitor`` was given (``groups``: ``scoring=``, ``capture=``, ...;
    ``None`` where not given), with its flat keywords (``keywords``) put in their group.

    Raises:
        TypeError: an unknown keyword, or one a given group sets too.
        ValueError: a value its group refuses.
    """
    fields: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
    for name, value in keywords.items():
        group = _GROUP_OF.get(name)
        if group is None:
            raise TypeError(f"Monitor() got an unexpected keyword argument {name!r}")
        if value is not None:
            fields[group][name] = value
    gathered: dict[str, Any] = {}
    for group, cls in _GROUPS.items():
        given = groups.get(group)
        if given is not None and not isinstance(given, cls):
            raise TypeError(f"{group} must be a {cls.__name__}, got {type(given).__name__}")
        if given is None:
            gathered[group] = cls(**fields[group])
            continue
        twice = sorted(n for n in fields[group] if getattr(given, n) is not None)
        if twice:
            raise TypeError(f"Monitor() got {', '.join(twice)} both as a keyword and in {group}=")
        gathered[group] = dataclasses.replace(given, **fields[group])
    return gathered
