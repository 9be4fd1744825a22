"""groundwatch for LlamaIndex: grounding checks on live query and chat engines.

Attach a :class:`groundwatch.Monitor` to LlamaIndex's instrumentation dispatcher::

    import groundwatch as gw
    import groundwatch_llamaindex

    monitor = gw.Monitor(sampler=gw.RatioSampler(0.1))
    groundwatch_llamaindex.instrument(monitor)            # every query and chat engine
    groundwatch_llamaindex.instrument(monitor, engine=qe)  # or only this engine

Each top-level ``query``/``aquery``/``chat``/``achat``/``stream_chat``/``astream_chat`` becomes one
record: the question, the nodes the answer was generated from (the response's source nodes, after
post-processors and re-rankers; for sub-question engines every retrieved node) and the final
answer; streamed answers are recorded when the stream has been consumed. Each top-level ``run`` of
an agent (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``) that called tools becomes one
record too, its tools' outputs as the passages (docs/agents.md). The OpenTelemetry span
current when the query started goes with the record, so the evaluation lands in that trace.

With no code change, ``opentelemetry-instrument python app.py`` does the same: the
:class:`GroundwatchLlamaIndexInstrumentor` is registered as an OpenTelemetry instrumentor.
"""

import logging
from typing import TYPE_CHECKING

from groundwatch.integration import lazy_names

from ._attach import is_instrumented

if TYPE_CHECKING:
    from ._instrumentor import GroundwatchLlamaIndexInstrumentor, instrument, uninstrument

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["GroundwatchLlamaIndexInstrumentor", "instrument", "is_instrumented", "uninstrument"]


# The instrumentor subclasses OpenTelemetry's BaseInstrumentor, whose import costs more than the
# rest of this package: it loads on first use (``opentelemetry-instrument`` and the entry point
# read it as an attribute, which works the same).
_WHERE = {
    "GroundwatchLlamaIndexInstrumentor": "._instrumentor",
    "instrument": "._instrumentor",
    "uninstrument": "._instrumentor",
}

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
