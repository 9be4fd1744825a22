"""groundwatch for LangChain: watch a RAG chain's answers for hallucinations with one line.

Per run::

    from groundwatch_langchain import GroundwatchCallbackHandler

    handler = GroundwatchCallbackHandler(monitor)
    chain.invoke("What is the refund window?", config={"callbacks": [handler]})

For every run in the process::

    import groundwatch_langchain

    groundwatch_langchain.instrument(monitor)
"""

import logging

from ._extract import ANSWER_KEYS, QUESTION_KEYS, SCORE_KEYS
from ._handler import ROUTE_METADATA_KEY, GroundwatchCallbackHandler
from ._instrument import instrument, instrumented_handler, uninstrument

logging.getLogger(__name__).addHandler(logging.NullHandler())

#: The LangChain versions this integration supports (declared once, as instrumentations do).
_instruments = ("langchain-core >= 0.3",)

__all__ = [
    "ANSWER_KEYS",
    "QUESTION_KEYS",
    "ROUTE_METADATA_KEY",
    "SCORE_KEYS",
    "GroundwatchCallbackHandler",
    "instrument",
    "instrumented_handler",
    "uninstrument",
]
