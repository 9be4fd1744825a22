"""``groundwatch serve``: score RAG traces received over OTLP/HTTP and OTLP/gRPC (docs/serve.md).

Needs the ``serve`` extra (from a clone, ``pip install -e ".[serve]"``: opentelemetry-proto,
aiohttp and grpcio); the core never imports this package. The names below load on first use, so that
``groundwatch --help`` (which imports :mod:`groundwatch.serve.cli`) works without the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._shared.errors import install_hint

INSTALL_HINT = f"groundwatch serve needs the serve extra, {install_hint('serve')}"

if TYPE_CHECKING:
    from ._assemble import Counts, TraceAssembler
    from ._http import Receiver, build_app
    from ._interactions import Interaction, interactions
    from ._otlp import SpanData, spans_of
    from ._service import Reply, TraceService

_WHERE = {
    "Counts": "._assemble",
    "TraceAssembler": "._assemble",
    "Interaction": "._interactions",
    "interactions": "._interactions",
    "Receiver": "._http",
    "build_app": "._http",
    "SpanData": "._otlp",
    "spans_of": "._otlp",
    "Reply": "._service",
    "TraceService": "._service",
}

__all__ = [
    "INSTALL_HINT",
    "Counts",
    "Interaction",
    "Receiver",
    "Reply",
    "SpanData",
    "TraceAssembler",
    "TraceService",
    "build_app",
    "interactions",
    "spans_of",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(where, __name__)
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
    return getattr(module, name)
