"""A judge's worker process and the protocol over its pipes: :class:`WorkerProcess`.

Why a plain ``subprocess`` and not ``multiprocessing``: ``fork`` is unsafe in a threaded host,
and ``spawn``/``forkserver`` re-import the host's ``__main__`` module in the child, running any
top-level code a script has outside ``if __name__ == "__main__"``. ``python -m
groundwatch.runtime.runners._child`` imports only groundwatch and the judge's own module.

Protocol over the child's stdin/stdout: 8-byte big-endian length, then a pickle of ``(op,
payload)``; replies are ``("ok", value)`` or ``("error", (type name, message))``. The judge is
pickled once (``init``; ``ping`` starts a process ahead of its first batch). The worker sends
``evaluate_batch``: a list of records, each a :class:`~groundwatch._fields.RecordFields` encoded and
pickled on its own (one record that cannot be pickled fails alone), and the child answers with one
reply per record as each is done (:func:`encode_reply`), its evaluation as
:class:`~groundwatch._fields.EvaluationFields`: the host's CPU per record is what its request
threads compete with, so it pays one message, one thread hop, a few wake-ups of its pipe thread and
no pydantic validation per batch rather than per record (see
:data:`~groundwatch.runtime.runners.process_runner.REPLY_GATHER_S`). Both types carry their version.
The child writes its replies to a private copy of fd 1 and points fd 1 at stderr, so a judge that
prints cannot corrupt the protocol. It exits when its stdin closes (the host exited or shut down).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from typing import IO, Any

from ..._fields import EvaluationFields
from ...types import Evaluation
from ..pipeline import RunnerResult

_HEADER = struct.Struct(">Q")
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


LOST = "worker_process_lost"
START_FAILED = "worker_process_start_failed"

NO_NICE_ENV = "_GROUNDWATCH_WORKER_NO_NICE"
"""Set in a worker process's environment when it must not lower its priority (``nice=False``):
a private word between this module and ``_child``, not a setting."""


def encode_reply(
    evaluation: Evaluation, judge_ns: int, end_ns: int, exported: bool
) -> tuple[Any, ...]:
    """The worker process's reply for one record, as plain values for the pipe: the
    evaluation (:class:`~groundwatch._fields.EvaluationFields`' codec), the time in the judge and
    the scoring (the process's own clock), the wall-clock end, and whether the worker process
    exported the span and the events itself."""
    return (EvaluationFields.of(evaluation).to_wire(), judge_ns, end_ns, exported)


def result_from_reply(reply: tuple[Any, ...], received_ns: int) -> RunnerResult:
    """The host's result of a reply :func:`encode_reply` made, read at ``received_ns``."""
    evaluation, judge_ns, end_ns, exported = reply
    # The child's clock for the end (it may have been read a little later); the same machine's
    # wall clock, so never after this side's "now".
    end_ns = min(end_ns, received_ns)
    return RunnerResult(EvaluationFields.from_wire(evaluation), end_ns - judge_ns, end_ns, exported)


class WorkerProcessError(RuntimeError):
    """A call to the worker process failed; ``error_type`` says how (``worker_process_lost``,
    ``worker_process_start_failed``, or the class name of what the judge raised out there)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type


def write_message(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(stream, _HEADER.pack(len(data)) + data)


def _write_all(stream: IO[bytes], data: bytes) -> None:
    view = memoryview(data)
    while view:
        # An unbuffered pipe may take part of a large write.
        written = stream.write(view)
        if written is None:
            raise OSError("pipe would block")
        view = view[written:]
    stream.flush()


def read_message(stream: IO[bytes]) -> Any:
    header = _read_exact(stream, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise WorkerProcessError(LOST, f"message of {size} bytes")
    return pickle.loads(_read_exact(stream, size))


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("worker process closed its pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


AUTO_INSTRUMENTATION = "opentelemetry.instrumentation.auto_instrumentation"
"""The package whose directory ``opentelemetry-instrument`` puts first on ``PYTHONPATH``: its
``sitecustomize`` sets the SDK up and loads every instrumentor in each Python that starts."""


def child_path() -> str:
    """The host's ``sys.path`` for a worker process, without ``opentelemetry-instrument``'s
    ``sitecustomize`` directory: a worker process only judges, and with it each one would set
    up the SDK and import every instrumented framework first (OpenInference's instrumentors
    import LangChain, LlamaIndex), seconds that an app exiting right after its last request
    does not have (the exit hook's deadline is 5 s)."""
    auto = sys.modules.get(AUTO_INSTRUMENTATION)
    skip = {os.path.realpath(p) for p in getattr(auto, "__path__", ())}
    return os.pathsep.join(p for p in sys.path if p and os.path.realpath(p) not in skip)


class WorkerProcess:
    """One worker process and its pipes."""

    def __init__(
        self, judge_bytes: bytes, export_setup: bytes | None = None, nice: bool = True
    ) -> None:
        env = dict(os.environ)
        # The child imports what the host can import: groundwatch and the judge's module.
        env["PYTHONPATH"] = child_path()
        if not nice:
            env[NO_NICE_ENV] = "1"
        try:
            self.proc = self._popen(env)
        except OSError as exc:
            raise WorkerProcessError(START_FAILED, f"cannot run {sys.executable}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self._fd = self.stdout.fileno()
        self._buffer = bytearray()  # replies read ahead of the one asked for
        try:
            self.export_failure: str | None = self.call(("init", (judge_bytes, export_setup)))
            """Why this process cannot export its evaluations (``export_from_worker``)."""
        except WorkerProcessError as exc:
            self.kill()
            raise WorkerProcessError(START_FAILED, str(exc)) from exc

    @staticmethod
    def _popen(env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "groundwatch.runtime.runners._child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Unbuffered: a reply deadline waits on the pipe with select(), which would not
            # see bytes already sitting in a Python-level read buffer.
            bufsize=0,
            env=env,
            close_fds=True,
            # Not in the host's process group: a Ctrl-C aimed at the host does not kill it
            # mid-evaluation; it exits on its own when the host's end of stdin closes.
            start_new_session=True,
        )

    def call(self, message: Any) -> Any:
        try:
            write_message(self.stdin, message)
        except (OSError, ValueError) as exc:
            raise self._lost(exc) from exc
        return self.reply(None)

    def send(self, message: Any) -> None:
        try:
            write_message(self.stdin, message)
        except (OSError, ValueError) as exc:
            raise self._lost(exc) from exc

    def reply(self, timeout_s: float | None) -> Any:
        """The next reply's value; ``TimeoutError`` when none starts within ``timeout_s``."""
        try:
            status, value = self._next_message(timeout_s)
        except TimeoutError:  # an OSError, but the child is only slow
            raise
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, struct.error) as exc:
            raise self._lost(exc) from exc
        if status == "ok":
            return value
        error_type, text = value
        raise WorkerProcessError(error_type, text)

    def has_buffered(self) -> bool:
        """Whether (part of) a reply has been read already."""
        return bool(self._buffer)

    def _next_message(self, timeout_s: float | None) -> Any:
        # One read takes whatever the pipe holds (usually the whole reply, sometimes several):
        # on the host's CPU each system call also costs a release and a take of the GIL.
        buffer = self._buffer
        while True:
            if len(buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buffer)
                if size > MAX_MESSAGE_BYTES:
                    raise WorkerProcessError(LOST, f"message of {size} bytes")
                end = _HEADER.size + size
                if len(buffer) >= end:
                    with memoryview(buffer) as view:
                        message = pickle.loads(view[_HEADER.size : end])
                    del buffer[:end]
                    return message
            elif (
                not buffer
                and timeout_s is not None
                # The deadline is for the reply to start: the child answers when it is done.
                and not select.select([self._fd], [], [], max(0.0, timeout_s))[0]
            ):
                raise TimeoutError
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise EOFError("worker process closed its pipe")
            buffer += chunk

    def _lost(self, exc: BaseException) -> WorkerProcessError:
        return WorkerProcessError(LOST, f"exit code {self.proc.poll()}: {exc}")

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.close_pipes()

    def stop(self, grace_s: float) -> None:
        """SIGTERM now (a process that exports its own spans sends what it holds first: see
        ``_child``), SIGKILL after ``grace_s`` if it still runs; the caller does not wait."""
        self.close_pipes()
        with contextlib.suppress(OSError):
            self.proc.terminate()
        proc = self.proc

        def kill_late() -> None:
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    proc.kill()
                    proc.wait(1.0)

        threading.Thread(target=kill_late, name="groundwatch-judge-stop", daemon=True).start()

    def close(self, timeout_s: float = 2.0) -> None:
        self.close_pipes()  # the child sees EOF and exits
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self.proc.kill()

    def close_pipes(self) -> None:
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()
