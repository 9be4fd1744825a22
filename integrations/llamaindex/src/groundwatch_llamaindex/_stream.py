"""Streamed answers: the wrappers around a query engine's token generator that record the query
once the stream is exhausted or closed (a consumer that stops early closes it: the text shown so
far is recorded, marked ``llama_index.stream = closed``)."""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Generator,
    Iterator,
)
from typing import Protocol

from ._root import RootRun


class StreamEnd(Protocol):
    """Where a stream's end is told (the handler's ``Capture``): this module needs only this."""

    def stream_end(
        self, root: RootRun, parts: list[str], outcome: BaseException | bool
    ) -> None: ...


def _sync_stream(
    capture: StreamEnd, root: RootRun, inner: Iterator[str]
) -> Generator[str, None, None]:
    """Wraps a query engine's token generator; records once it is exhausted or closed.

    A consumer that stops early closes the generator (explicitly, or when it is garbage
    collected): the text shown so far is recorded, marked ``llama_index.stream = closed``.
    """
    parts: list[str] = []
    outcome: BaseException | bool = False  # True: exhausted; an exception: failed
    try:
        for token in inner:
            parts.append(token)
            yield token
        outcome = True
    except GeneratorExit:
        raise
    except BaseException as exc:
        outcome = exc
        raise
    finally:
        capture.stream_end(root, parts, outcome)


async def _async_stream(
    capture: StreamEnd, root: RootRun, inner: AsyncIterator[str]
) -> AsyncGenerator[str, None]:
    """Async twin of :func:`_sync_stream`."""
    parts: list[str] = []
    outcome: BaseException | bool = False
    try:
        async for token in inner:
            parts.append(token)
            yield token
        outcome = True
    except GeneratorExit:
        raise
    except BaseException as exc:
        outcome = exc
        raise
    finally:
        capture.stream_end(root, parts, outcome)
