"""A throwaway ``redis-server`` for the benchmarks and the test suite (tests/distributed and
tests/serve import it from here): started on a free loopback port with persistence off, stopped
by its PID. Internal to this repository; not part of the groundwatch package.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

REDIS_SERVER = shutil.which("redis-server")
"""The ``redis-server`` binary on PATH, or ``None`` (Debian package ``redis-server``)."""


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process; :meth:`stop` and :meth:`start` again keep the port (an
    outage and a restart: persistence is off, so the restarted server is empty)."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        """The command line (a subclass adds TLS or ACL users)."""
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.workdir),
            "--logfile", str(self.workdir / "redis.log"),
        ]  # fmt: skip

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=5)
