"""The request path of a :class:`~groundwatch.Monitor`: ``record()``, ``decide()``,
``record_decision()`` and ``record_failure()``, which run on the host's threads.

``record()`` captures references and the current span context, asks the sampler, appends to a
bounded queue and returns, in microseconds (see ``benchmarks/overhead.py``). Every call ends in
exactly one ``groundwatch.records{groundwatch.decision, groundwatch.route}`` count. What this
needs is imported at start-up, and nothing else: ``from groundwatch import Monitor`` defines
no pydantic model and loads no judge (tests/core/test_lazy_imports.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from .._shared import guard
from .._shared.capture import MAX_PASSAGES
from .._shared.record import RagRecord
from ..telemetry import semconv as sc
from ._arguments import NOT_PASSAGES, a_decision, invalid_reason, misuse_reason
from .sampling import Decision, Sampler

if TYPE_CHECKING:
    from typing_extensions import Never

    from ..telemetry import Stats
    from .worker import Worker

__all__ = ["RequestPath"]

_getrandbits = random.getrandbits
_get_current_span = trace.get_current_span
_SAMPLED = Decision.SAMPLED


class RequestPath:
    """The methods of :class:`~groundwatch.Monitor` that the host calls per request (a mixin:
    the monitor holds the state they read)."""

    route: str | None
    sampler: Sampler
    stats: Stats
    _shut: bool
    _disabled: bool
    _worker: Worker

    def record(
        self,
        *args: Never,
        question: str | None = None,
        contexts: Sequence[Any] | None = None,
        answer: str | None = None,
        span_context: SpanContext | None = None,
        route: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        always_score: bool = False,
        decision: Decision | None = None,
        **unknown: Never,
    ) -> None:
        """Hand one RAG interaction to the monitor. Returns at once; never raises.

        Every call is counted once in ``groundwatch.records``. A call that cannot be scored as
        given is never coerced or guessed at: a missing ``answer`` or ``contexts``, a value of
        the wrong type, positional arguments or an unknown keyword are counted
        ``groundwatch.decision="error"``, ``error.type="invalid_input"``, with a warning
        (rate-limited) that names the argument. The passages inside ``contexts`` are read only
        when the record is sampled: an item that is plainly not a passage (``None``, a number,
        bytes) is counted the same way then; one that fails when the worker reads it (a
        document without text) is an evaluation with ``label="error"``,
        ``error.type="invalid_input"``.

        Args:
            question: the user's question, if known.
            contexts: the retrieved passages: strings, :class:`~groundwatch.Passage` objects,
                mappings with ``text``, LangChain documents or LlamaIndex nodes, in a list (or
                any iterable but a string or a mapping). Only a shallow copy of the sequence is
                kept; the items must not be mutated afterwards.
            answer: the generated answer.
            span_context: the span the evaluation belongs to; by default the span current in
                the caller.
            route: the pipeline's name, for per-route sampling and metric attributes.
            attributes: extra attributes for the evaluation span (primitive values only).
            always_score: score this record whatever the sampler says (a thumbs-down).
            decision: the sampler's decision taken for this interaction with :meth:`decide`
                (integrations: when its retrieval started); the sampler is not asked again.
        """
        error_type: str | None
        try:
            if args or unknown:
                guard.bad_input("Monitor.record", TypeError(misuse_reason(args, unknown)))
                outcome, error_type = Decision.ERROR, sc.ERROR_INVALID_INPUT
            else:
                outcome, error_type = self._record(
                    question,
                    contexts,
                    answer,
                    span_context,
                    route,
                    attributes,
                    always_score,
                    decision,
                )
        except Exception as exc:
            outcome, error_type = Decision.ERROR, sc.ERROR_INTERNAL
            self.stats.count_decision(outcome.value, error_type, self._route_of(route))
            guard.internal_error("record", exc)
            return
        self.stats.count_decision(outcome.value, error_type, self._route_of(route))

    def _route_of(self, route: Any) -> str | None:
        """The route a call is counted under: its own, else the monitor's (none for a route
        that is not a string: the call is counted as invalid input)."""
        if route is None:
            return self.route
        return route if type(route) is str else None

    def _record(
        self,
        question: Any,
        contexts: Any,
        answer: Any,
        span_context: Any,
        route: Any,
        attributes: Any,
        always_score: Any,
        decided: Any,
    ) -> tuple[Decision, str | None]:
        if self._shut:
            return Decision.ERROR, sc.ERROR_SHUTDOWN
        if (
            not isinstance(answer, str)
            or (question is not None and not isinstance(question, str))
            or contexts is None
            or isinstance(contexts, (str, bytes, Mapping))
            or not hasattr(contexts, "__iter__")
            or (span_context is not None and not isinstance(span_context, SpanContext))
            or (route is not None and not isinstance(route, str))
            or (attributes is not None and not isinstance(attributes, Mapping))
            or not isinstance(always_score, bool)
            or (decided is not None and type(decided) is not Decision and not a_decision(decided))
        ):
            reason = invalid_reason(
                question, contexts, answer, span_context, route, attributes, always_score, decided
            )
            guard.bad_input("Monitor.record", TypeError(reason))
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if span_context is None:
            span_context = _get_current_span().get_span_context()
        if span_context.is_valid:
            trace_id, span_id = span_context.trace_id, span_context.span_id
        else:
            trace_id = span_id = 0
            span_context = None
        record = RagRecord(
            question,
            contexts,
            answer,
            route if route is not None else self.route,
            attributes,
            "%016x" % _getrandbits(64),  # noqa: UP031 (the fastest spelling)
            trace_id,
            span_id,
            always_score,
            span_context,
        )
        if self._disabled:
            return Decision.NOT_SAMPLED, None
        if not always_score:
            if decided is not None:
                decision = Decision(decided)
            else:
                try:
                    decision = self.sampler.decide(record)
                except Exception as exc:
                    guard.user_error("sampler", exc)
                    return Decision.ERROR, sc.ERROR_SAMPLER
            if decision is not _SAMPLED:
                return Decision(decision), None
        try:
            # One more than the cap, so the worker still sees (and marks) the truncation without
            # the request path copying a huge or endless sequence.
            copied = record.contexts = list(islice(contexts, MAX_PASSAGES + 1))
            if attributes is not None:
                record.attributes = dict(attributes)
        except Exception as exc:
            # The caller's objects raised while read (a generator, a lazy document list, a
            # mapping that is not one): their input, not our bug.
            guard.bad_input("Monitor.record", exc)
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if not NOT_PASSAGES.isdisjoint(map(type, copied)):  # one C-level pass
            i, item = next((i, x) for i, x in enumerate(copied) if type(x) in NOT_PASSAGES)
            reason = f"contexts[{i}] must be a string or a passage, got {type(item).__name__}"
            guard.bad_input("Monitor.record", TypeError(reason))
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if not self._worker.submit(record):
            return Decision.QUEUE_FULL, None
        return _SAMPLED, None

    def decide(
        self, *, span_context: SpanContext | None = None, route: str | None = None
    ) -> Decision:
        """The sampler's decision for an interaction, taken before its content exists.

        For integrations, when an interaction's retrieval starts (its trace id is known then):
        an interaction that will not be scored need keep no documents and build no record. End
        it with ``record(..., decision=SAMPLED)`` or :meth:`record_decision`, which count it;
        ``decide`` counts nothing. The sampler sees a record with the span context and route
        only (the built-in samplers need no more). Never raises: a raising sampler gives
        ``ERROR``.
        """
        try:
            if self._disabled:
                return Decision.NOT_SAMPLED
            if span_context is None:
                span_context = _get_current_span().get_span_context()
            valid = isinstance(span_context, SpanContext) and span_context.is_valid
            record = RagRecord(
                None,
                (),
                "",
                route if route is not None else self.route,
                None,
                "%016x" % _getrandbits(64),  # noqa: UP031 (the fastest spelling)
                span_context.trace_id if valid else 0,
                span_context.span_id if valid else 0,
                False,
                span_context if valid else None,
            )
            decision = self.sampler.decide(record)
            return decision if type(decision) is Decision else Decision(decision)
        except Exception as exc:
            guard.user_error("sampler", exc)
            return Decision.ERROR

    def record_decision(self, decision: Decision, *, route: str | None = None) -> None:
        """Count an interaction that :meth:`decide` did not sample, in place of ``record``.

        Counted as ``groundwatch.records{groundwatch.decision=<decision>, groundwatch.route}``
        (``ERROR``: the sampler raised, ``error.type=sampler_error``); the route as
        ``record`` counts it. Never raises.
        """
        try:
            if type(decision) is not Decision:
                decision = Decision(decision)
            where = self._route_of(route)
            if decision is Decision.ERROR:
                self.stats.count_decision(decision.value, sc.ERROR_SAMPLER, where)
            elif self._shut:
                self.stats.count_decision(Decision.ERROR.value, sc.ERROR_SHUTDOWN, where)
            else:
                self.stats.count_decision(decision.value, None, where)
        except Exception as exc:
            guard.internal_error("record_decision", exc)

    def record_failure(self, error_type: str, *, route: str | None = None) -> None:
        """Count an interaction that could not be turned into a record (for integrations: the
        chain, retriever or LLM raised, so there is no answer to score), as
        ``groundwatch.records{groundwatch.decision="error", error.type=..., groundwatch.route}``.
        Never raises.
        """
        try:
            error = str(error_type) or "error"
            self.stats.count_decision(Decision.ERROR.value, error, self._route_of(route))
        except Exception as exc:
            guard.internal_error("record_failure", exc)
