"""An agent's tool calls: one slot per call of the agent itself, in call order (parallel calls
finish in any order), filled with what each tool returned (documents, a readable value, or
nothing for an error or the routing tool), and the contexts the slots become at the end."""

from __future__ import annotations

from typing import Any

from llama_index.core.agent.workflow.workflow_events import ToolCallResult
from llama_index.core.schema import NodeWithScore

from groundwatch.integration import (
    Decision,
    RunTracker,
    ToolOutput,
)

from ._extract import _node_key, _passage, _source_nodes, _tool_value
from ._root import HANDOFF_TOOL, MAX_NODES_PER_ROOT, RootRun

Tracker = RunTracker[str, RootRun]


def tool_started_locked(tracker: Tracker, root: RootRun, span_id: str) -> None:
    root.tool_called = True
    # Taken when the first tool (or retrieval) starts, as for a query's retrieval: a run
    # that will not be scored keeps no outputs.
    if tracker.decide(root) is not Decision.SAMPLED:
        return
    if len(root.tool_slots) >= MAX_NODES_PER_ROOT:
        root.dropped += 1
        tracker.count_locked("documents_dropped")
        return
    root.tool_steps[span_id] = len(root.tool_slots)
    root.tool_slots.append(None)


def tool_result(tracker: Tracker, root: RootRun, span_id: str, result: Any) -> None:
    """Keeps a reference to what a tool call returned, in its call's slot."""
    with tracker.lock:
        slot = root.tool_steps.pop(span_id, None)
    if slot is None or not isinstance(result, ToolCallResult):
        return
    name = result.tool_name
    output = result.tool_output
    if output.is_error:
        # What the model was told about the failure is not evidence for the answer.
        with tracker.lock:
            root.tool_errors += 1
            tracker.count_locked("tool_errors")
        return
    if name == HANDOFF_TOOL and root.handoffs:
        return
    accepts = root.binding.tools
    if accepts is not None and not accepts(name):
        return
    value: Any
    nodes = _source_nodes(output.raw_output)
    if nodes is not None:
        value = (name, nodes)
    else:
        data, readable = _tool_value(output)
        if not readable:
            with tracker.lock:
                root.unreadable += 1
                tracker.count_locked("tool_outputs_unreadable")
            return
        value = ToolOutput(data, name)
    with tracker.lock:
        root.tool_slots[slot] = value


def agent_contexts(tracker: Tracker, root: RootRun) -> list[Any]:
    """An agent run's passages: each tool call's output in call order (a retrieving tool's
    documents, each once), with the counts of what was left out."""
    contexts: list[Any] = []
    seen: set[str] = set()
    tools = 0
    for slot in root.tool_slots:
        if slot is None:
            continue
        if isinstance(slot, ToolOutput):
            contexts.append(slot)
            tools += 1
            continue
        name, nodes = slot
        for node in nodes:
            with_score = node if isinstance(node, NodeWithScore) else NodeWithScore(node=node)
            key = _node_key(with_score)
            if key in seen:
                continue
            seen.add(key)
            passage = _passage(with_score)
            passage["kind"] = "retrieved"
            passage["tool"] = name
            contexts.append(passage)
    root.tool_outputs = tools
    tracker.count("tool_outputs", tools)
    return contexts


# --- events -----------------------------------------------------------------------------
