"""groundwatch for LangChain: watch a RAG chain's answers for hallucinations with one line.

Per run::

    from groundwatch_langchain import GroundwatchCallbackHandler

    handler = GroundwatchCallbackHandler(monitor)
    chain.invoke("What is the refund window?", config={"callbacks": [handler]})

For every run in the process::

    import groundwatch_langchain

    groundwatch_langchain.instrument(monitor)

or with no code change, ``opentelemetry-instrument python app.py``: the
:class:`GroundwatchLangChainInstrumentor` is registered as an OpenTelemetry instrumentor.
"""

import logging
from typing import TYPE_CHECKING

from groundwatch.integration import lazy_names

from ._attach import instrumented_handler
from ._extract import ANSWER_KEYS, QUESTION_KEYS, SCORE_KEYS
from ._handler import GroundwatchCallbackHandler
from ._root import ROUTE_METADATA_KEY

if TYPE_CHECKING:
    from ._instrumentor import GroundwatchLangChainInstrumentor, instrument, uninstrument

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ANSWER_KEYS",
    "QUESTION_KEYS",
    "ROUTE_METADATA_KEY",
    "SCORE_KEYS",
    "GroundwatchCallbackHandler",
    "GroundwatchLangChainInstrumentor",
    "instrument",
    "instrumented_handler",
    "uninstrument",
]


# The instrumentor subclasses OpenTelemetry's BaseInstrumentor, whose import costs more than the
# rest of this package: it loads on first use (``opentelemetry-instrument`` and the entry point
# read it as an attribute, which works the same).
_WHERE = {
    "GroundwatchLangChainInstrumentor": "._instrumentor",
    "instrument": "._instrumentor",
    "uninstrument": "._instrumentor",
}

if not TYPE_CHECKING:  # a module __getattr__ seen by mypy would type every unknown name Any
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
