"""The worker process of ``Monitor(executor="process")``: ``python -m groundwatch.runtime._child``.

Reads ``(op, payload)`` messages on stdin, answers on a private copy of stdout (see
:mod:`groundwatch.runtime.process` for the protocol), exits on EOF.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import time
from typing import IO, Any

from ..judging.evaluate import judge_name
from ..types import Passage
from .process import compact, read_message, write_message
from .runner import Prepared, evaluate_prepared


def _error(exc: BaseException) -> tuple[str, tuple[str, str]]:
    return "error", (type(exc).__qualname__, str(exc)[:500])


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    judge: Any = None
    while True:
        try:
            op, payload = read_message(inp)
        except (EOFError, OSError):
            return
        try:
            if op == "init":
                judge = pickle.loads(payload)
                reply: Any = ("ok", None)
            elif op == "ping":
                reply = ("ok", None)
            elif op == "evaluate_batch":
                _evaluate_batch(judge, payload, out)
                continue
            else:
                reply = ("error", ("protocol", f"unknown op {op!r}"))
        except Exception as exc:
            reply = _error(exc)
        try:
            try:
                write_message(out, reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                write_message(out, _error(exc))
        except OSError:
            return  # the host closed its end (shutdown, or it gave up on this call)


def _evaluate_batch(judge: Any, payload: Any, out: IO[bytes]) -> None:
    """One reply per item, each as soon as it is done: the host times every evaluation on its
    own (the per-evaluation deadline), not the batch as a whole."""
    items, policy = payload
    name = judge_name(judge)
    for item in items:
        try:
            answer, contexts, question = pickle.loads(item)
            passages = [
                Passage.model_construct(text=text, id=pid, score=score, metadata=metadata)
                for text, pid, score, metadata in contexts
            ]
            # Prepared by the host already (checked and capped); the host marks truncation.
            prepared = Prepared(answer, passages, question, False)
            start = time.perf_counter_ns()
            evaluation = evaluate_prepared(judge, prepared, policy, name)
            # The wall-clock end too: the host may read the reply a little later.
            elapsed = time.perf_counter_ns() - start
            reply: Any = ("ok", (compact(evaluation), elapsed, time.time_ns()))
        except BaseException as exc:
            reply = _error(exc)
        try:
            write_message(out, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            write_message(out, _error(exc))


WORKER_NICE = 10
"""Added to the worker process's nice value: scoring is background work, so when CPU cores are
short (a busy host, a small container) the host's request threads get them first. A backlog
then shows as ``queue_full`` on the request path, not as slower requests."""


def main() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not permitted / not on this platform
        os.nice(WORKER_NICE)
    # Keep fd 1 for the protocol only: anything the judge prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
