"""The worker process of ``Monitor(executor="process")``: ``python -m
groundwatch.runtime.runners._child``.

Reads ``(op, payload)`` messages on stdin, answers on a private copy of stdout (see
:mod:`groundwatch.runtime.runners.worker_process` for the protocol), exits on EOF.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import time
from typing import IO, Any

from ..._fields import RecordFields
from ...judging.judges._base import judge_name
from ...telemetry.worker_export import ChildExport
from ..pipeline import Prepared, evaluate_prepared
from .worker_process import NO_NICE_ENV, encode_reply, read_message, write_message


def _error(exc: BaseException) -> tuple[str, tuple[str, str]]:
    return "error", (type(exc).__qualname__, str(exc)[:500])


EXIT_FLUSH_MILLIS = 1500
"""At exit (the host closed its end), what the worker process's own exporters may take to
send what they hold; the host kills it 2 s after closing the pipes anyway."""


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    judge: Any = None
    exporter: ChildExport | None = None
    try:
        while True:
            try:
                op, payload = read_message(inp)
            except (EOFError, OSError):
                return
            try:
                if op == "init":
                    judge_bytes, export_setup = payload
                    judge = pickle.loads(judge_bytes)
                    exporter, why = _exporter(export_setup)
                    if exporter is not None:
                        _export_at_sigterm(exporter)
                    reply: Any = ("ok", why)
                elif op == "ping":
                    reply = ("ok", None)
                elif op == "evaluate_batch":
                    _evaluate_batch(judge, exporter, payload, out)
                    continue
                elif op == "flush":
                    reply = ("ok", exporter.flush(payload) if exporter is not None else True)
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
    finally:
        if exporter is not None:
            with contextlib.suppress(Exception):
                exporter.shutdown(EXIT_FLUSH_MILLIS)


def _export_at_sigterm(exporter: ChildExport) -> None:
    """The host stops a process stuck past a deadline with SIGTERM, and SIGKILL a moment
    later: what its batch processors hold is exported first (from the main thread, between
    two bytecodes of the stuck judge). A judge stuck inside C code, or a handler waiting for a
    lock the interrupted code holds, gets the SIGKILL: the grace is bounded either way."""

    def export_and_exit(signum: int, frame: Any) -> None:
        with contextlib.suppress(BaseException):
            exporter.shutdown(EXIT_FLUSH_MILLIS)
        os._exit(0)  # not SystemExit: a judge catching BaseException would swallow it

    with contextlib.suppress(ValueError):  # not the main thread (serve() called by a test)
        signal.signal(signal.SIGTERM, export_and_exit)


def _exporter(setup: bytes | None) -> tuple[ChildExport | None, str | None]:
    """This process's own exporting (``export_from_worker``), or why there is none: the host
    then exports what this process scores."""
    if setup is None:
        return None, None
    try:
        return ChildExport(setup), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]


def _evaluate_batch(judge: Any, exporter: ChildExport | None, payload: Any, out: IO[bytes]) -> None:
    """One reply per item, each as soon as it is done: the host times every evaluation on its
    own (the per-evaluation deadline), not the batch as a whole."""
    items, policy = payload
    name = judge_name(judge)
    for item in items:
        try:
            fields = RecordFields.from_wire(pickle.loads(item))
            # Prepared by the host already (checked and capped).
            prepared = Prepared(fields.answer, fields.passages, fields.question, fields.truncated)
            start = time.perf_counter_ns()
            evaluation = evaluate_prepared(judge, prepared, policy, name)
            # The wall-clock end too: the host may read the reply a little later.
            elapsed = time.perf_counter_ns() - start
            end_ns = time.time_ns()
            exported = False
            if exporter is not None and fields.record_id:
                try:
                    exporter.emit(fields, evaluation, end_ns - elapsed, end_ns)
                    exported = True
                except Exception as exc:  # the host exports this one instead
                    print(f"groundwatch worker process: export failed: {exc!r}", file=sys.stderr)
            reply: Any = ("ok", encode_reply(evaluation, elapsed, end_ns, exported))
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
    if not os.environ.pop(NO_NICE_ENV, None):
        with contextlib.suppress(OSError, AttributeError):  # not permitted / not on this platform
            os.nice(WORKER_NICE)
    # Keep fd 1 for the protocol only: anything the judge prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
