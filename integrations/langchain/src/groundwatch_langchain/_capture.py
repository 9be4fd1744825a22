"""The capture of LangChain runs: :class:`Capture`, the state and bookkeeping behind
:class:`~._handler.GroundwatchCallbackHandler`'s callbacks.

It links every run to its top-level run, starts and ends a :class:`~._root.RootRun`, and turns a
finished one into one ``Monitor.record`` (or ``record_failure``). The handler's ``__init__`` sets
the attributes declared here; every method runs on the host's request path, under the handler's
guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from groundwatch.integration import (
    Decision,
    MonitorLike,
    RunTracker,
    ToolOutput,
    bad_input,
    earlier_turns,
    user_error,
)
from groundwatch.telemetry import semconv

from ._extract import (
    MESSAGES_KEY,
    AnswerExtractor,
    QuestionExtractor,
    conversation_passage,
    default_answer,
    default_question,
    odd_question,
    plain,
    speaker,
    turn_in_progress,
    turn_tool_messages,
)

if TYPE_CHECKING:
    from uuid import UUID
from ._extract import (
    _conversation_id,
    _Passages,
    _readable,
)
from ._root import (
    EXTRACTOR_ERROR,
    NO_ANSWER,
    ROUTE_METADATA_KEY,
    RootRun,
    _openinference_span_context,
    _parent_span_context,
    _Tool,
)


class Capture:
    """The state of :class:`~._handler.GroundwatchCallbackHandler` and what its callbacks share:
    linking runs to their root, starting and ending roots, and recording a finished one."""

    _monitor: MonitorLike
    _question: QuestionExtractor
    _answer: AnswerExtractor
    _route: str | None
    _score_keys: tuple[str, ...]
    _max_documents: int
    _max_run_age: float
    _tool_filter: Callable[[str | None], bool] | None
    _conversation_context: bool
    _tracker: RunTracker[int, RootRun]

    def _link(
        self,
        key: int,
        parent_key: int,
        retriever: bool = False,
        tool: str | bool | None = False,
        context: bool = True,
    ) -> bool:
        """Map a nested run to its parent's root. False when the parent is unknown to us.

        ``tool``: the run is a tool run (its name, or None when it has none); ``context``:
        ``context_tools`` counts its output. The root's first retriever or context tool takes
        the sampler's decision for the whole run (under the lock: parallel ones must not take
        two)."""
        tracker = self._tracker
        with tracker.lock:
            root = tracker.link_locked(key, parent_key)
            if root is None:
                return False
            if root.tool_of:  # inside a tool: remember the outermost one
                outer = root.tool_of.get(parent_key)
                if outer is not None:
                    root.tool_of[key] = outer
                    if retriever and outer == parent_key:
                        root.tools[outer].retrieved = True  # a retriever wrapped as a tool
            if tool is not False:
                nested = key in root.tool_of
                context = context and not nested
                root.tools[key] = _Tool(tool if isinstance(tool, str) else None, context)
                if not nested:
                    root.tool_of[key] = key
            if retriever or (tool is not False and context):
                if root.is_chain:
                    tracker.decide(root)  # the first one asks the sampler
                else:
                    root.retrieving = True
            return True

    def _resumed_turn(self, root: RootRun, outputs: Any) -> bool:
        """A run that called no tool but finishes an agent turn whose tools ran in an earlier
        run (resumed after an interrupt): take those tools' results from the thread's state as
        its contexts, and the sampler's decision now. False when there are none."""
        if not isinstance(outputs, Mapping) or MESSAGES_KEY not in outputs:
            return False
        messages = turn_tool_messages(outputs)
        if not messages:
            return False
        kept = 0
        for message in messages:
            name = getattr(message, "name", None)
            name = name if isinstance(name, str) else None
            if self._tool_filter is not None and not self._tool_filter(name):
                continue
            root.tool_ended = True
            if getattr(message, "status", None) == "error":
                root.tool_errors += 1
            elif not _readable(message):
                root.unreadable += 1
            elif kept < self._max_documents:
                root.documents.append(ToolOutput(message, name))
                kept += 1
            else:
                root.dropped += 1
        if not root.tool_ended:
            return False
        root.tool_outputs = kept
        if self._tracker.decide(root) is not Decision.SAMPLED:
            root.documents.clear()
        return True

    def _tool_finished(self, key: int) -> tuple[RootRun | None, _Tool | None]:
        """Unlink a tool run that ended or failed: its top-level run's state and its own
        (``None``s when unknown, or when it was itself the top-level run). Call with the lock
        held."""
        root = self._tracker.pop_locked(key)
        if root is None or root.key == key:
            return None, None
        root.tool_of.pop(key, None)
        return root, root.tools.pop(key, None)

    def _start_root(
        self, run_id: UUID, inputs: Any, metadata: Mapping[str, Any] | None, *, is_chain: bool
    ) -> None:
        # A run whose parent we never saw (the handler was attached below the top, e.g. with
        # ``with_config(callbacks=...)`` on an inner chain) is a top-level run for us.
        current = trace.get_current_span().get_span_context()
        span_context = current if current.is_valid else _openinference_span_context(run_id)
        route = self._route
        if metadata:
            value = metadata.get(ROUTE_METADATA_KEY)
            if isinstance(value, str):
                route = value
        root = RootRun(
            run_id, inputs, self._monitor, span_context, route, is_chain, self._max_run_age
        )
        if metadata:
            root.conversation_id = _conversation_id(metadata)
        # Gives up (and reports) the oldest runs past the limits first.
        self._tracker.start(root)

    def _end(self, key: int) -> RootRun | None:
        """Forget a run. Returns its root state when the run was a top-level run we tracked."""
        with self._tracker.lock:
            root = self._tracker.pop_locked(key)
            if root is None:
                return None
            if root.key != key:
                if root.tool_of:
                    root.tool_of.pop(key, None)
                return None
            return root

    def _retriever_finished(self, key: int) -> RootRun | None:
        """Unlink a retriever run that ended or failed. Returns its top-level run's state, or
        None when the run is unknown or was itself the top-level run (a retriever used alone:
        forgotten, nothing answered). Call with the lock held."""
        root = self._tracker.pop_locked(key)
        if root is None or root.key == key:
            return None
        if root.tool_of:
            root.tool_of.pop(key, None)
        return root

    # -- output -----------------------------------------------------------------------------------

    def _record(self, root: RootRun, inputs: Any, outputs: Any) -> None:
        try:
            answer = self._answer(outputs)
            question = self._question(inputs)
            if (
                question is None
                and self._question is default_question
                and isinstance(outputs, Mapping)
                and MESSAGES_KEY in outputs
            ):
                # An agent's input may be a form we do not read (a dict of role and content);
                # its output state holds the turn's human message as a message. (Only agent
                # state: a plain chain's output is its answer, never its question.)
                question = default_question(outputs)
        except Exception as exc:
            # The run retrieved and ended: it is an interaction, so it gets its decision (a
            # failure), not silence; the extractor's exception is said once and logged.
            self._tracker.count("extractor_errors")
            self._tracker.fail(root, EXTRACTOR_ERROR)
            user_error("langchain extractor", exc)
            return
        if not isinstance(answer, str):
            if self._answer is default_answer and turn_in_progress(outputs):
                # Paused at an interrupt (human in the loop) after calling tools: the run that
                # resumes the turn answers, and is recorded with this turn's tool results.
                self._tracker.ignore(root, "turns_paused")
                return
            if root.generated:
                # A model answered but we cannot read the answer from the output: tell the
                # operator (an ``answer_extractor`` fixes it). A run that only retrieved (a
                # search endpoint) is not a failure.
                self._tracker.count("no_answer")
                self._tracker.fail(root, NO_ANSWER)
            else:
                self._tracker.ignore(root, "no_answer")
            return
        if isinstance(question, str):
            question = plain(question)
        else:
            odd = type(question).__name__ if question is not None else odd_question(inputs)
            if odd is not None:
                # Recorded without its question (never coerced): said, not dropped silently.
                self._tracker.count("questions_unreadable")
                bad_input(
                    "GroundwatchCallbackHandler",
                    TypeError(
                        f"the run's question is a {odd}, not a string: recorded without it "
                        "(question_extractor= reads other forms)"
                    ),
                )
            question = None
        answer = plain(answer)
        turns: list[Any] = []
        if self._conversation_context and isinstance(outputs, Mapping):
            # Opt-in, so built here: a few messages' texts, as conversation passages.
            found = map(conversation_passage, earlier_turns(outputs.get(MESSAGES_KEY), speaker))
            turns = [t for t in found if t is not None]
        contexts = _Passages(root.documents, self._score_keys, turns)
        # The tracker adds contexts.dropped, the tool counts and the conversation's id.
        self._tracker.record(
            root,
            question=question,
            contexts=contexts,
            answer=answer,
            attributes={semconv.GROUNDWATCH_LANGCHAIN_RUN_ID: str(root.run_id)},
            span_context=_parent_span_context(root),
            tools=bool(root.tools or root.tool_outputs or root.tool_errors or root.unreadable),
        )

    def _fail(self, root: RootRun, error_type: str) -> None:
        self._tracker.fail(root, error_type)

    def _internal_error(self, where: str, exc: Exception) -> None:
        # The core guard logs rate-limited, feeds the ``groundwatch.errors`` metric, and re-raises
        # only when GROUNDWATCH_RAISE_INTERNAL_ERRORS is set (our tests), then LangChain passes
        # it on because ``raise_error`` follows the same switch.
        self._tracker.internal_error(where, exc)
