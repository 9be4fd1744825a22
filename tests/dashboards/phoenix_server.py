"""A real Arize Phoenix server for the tests, and reading annotations back through its own API.

Phoenix is heavy (its server pulls in pandas, SQLAlchemy, strawberry, grpc...), so it lives in
a venv of its own: ``GW_PHOENIX_BIN`` names its ``phoenix`` binary (``.ci/run`` installs it and
sets it; not a ``GROUNDWATCH_*`` name, which groundwatch reads as its own settings and warns
about), else ``phoenix`` on PATH; without either the tests skip, and fail with ``CI`` set. The
server listens on loopback ports chosen free, keeps its SQLite database in a temporary folder,
and can be stopped and started again on the same ports and database.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

BIN_VARIABLE = "GW_PHOENIX_BIN"
START_TIMEOUT_S = 120.0


def phoenix_binary() -> str:
    """The ``phoenix`` binary; skips (fails under CI) when there is none."""
    path = os.environ.get(BIN_VARIABLE) or shutil.which("phoenix")
    if path and os.access(path, os.X_OK):
        return path
    if os.environ.get("CI"):
        pytest.fail(f"no Phoenix server in CI: .ci/run installs it and sets {BIN_VARIABLE}")
    pytest.skip(
        f"needs an Arize Phoenix server: python -m venv .venv/phoenix && "
        f".venv/phoenix/bin/pip install arize-phoenix, then {BIN_VARIABLE}="
        ".venv/phoenix/bin/phoenix"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PhoenixServer:
    """``phoenix serve`` on loopback; :meth:`stop` and :meth:`start` keep ports and data."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.grpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "phoenix.log"

    def start(self) -> None:
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "OTEL_SDK_DISABLED": "true",
        }
        for name in ("PHOENIX_COLLECTOR_ENDPOINT", "PHOENIX_ENDPOINT", "PHOENIX_API_KEY"):
            env.pop(name, None)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"phoenix serve exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        self.stop()
        pytest.fail(f"phoenix serve did not start in {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    # --- Phoenix's own API ---------------------------------------------------------------------

    def get(self, path: str, **query: Any) -> Any:
        url = f"{self.url}/{path.lstrip('/')}"
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.load(reply)

    def post(self, path: str, body: Any) -> Any:
        return json.loads(self.post_raw(path, body))

    def post_raw(self, path: str, body: Any) -> bytes:
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            data: bytes = reply.read()
            return data

    def spans(self, project: str, trace_id: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(
            f"v1/projects/{project}/spans", trace_id=f"{trace_id:032x}", limit=1000
        )["data"]
        return found

    def wait_for_spans(self, project: str, trace_id: int, count: int) -> list[dict[str, Any]]:
        """The trace's spans once Phoenix has ingested ``count`` of them (it inserts in the
        background after the OTLP request returns)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                spans = self.spans(project, trace_id)
            except urllib.error.HTTPError:  # the project appears with its first span
                spans = []
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)

    def span_annotations(self, project: str, span_id: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(
            f"v1/projects/{project}/span_annotations", span_ids=f"{span_id:016x}", limit=1000
        )["data"]
        return found

    def document_annotations(self, span_global_id: str) -> list[dict[str, Any]]:
        """A span's document annotations, through Phoenix's GraphQL API (its REST API has no
        read for them)."""
        query = (
            "query($id: ID!) { node(id: $id) { ... on Span { documentEvaluations { "
            "name label score explanation documentPosition annotatorKind } } } }"
        )
        reply = self.post("graphql", {"query": query, "variables": {"id": span_global_id}})
        assert "errors" not in reply, reply
        found: list[dict[str, Any]] = reply["data"]["node"]["documentEvaluations"]
        return found
