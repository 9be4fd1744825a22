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

from ._extract import ANSWER_KEYS, QUESTION_KEYS, SCORE_KEYS
from ._handler import ROUTE_METADATA_KEY, GroundwatchCallbackHandler
from ._instrument import instrumented_handler
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
