"""A real MLflow tracking server for the tests: ``mlflow server`` on loopback with a SQLite store
in a temporary folder, and a small client for its REST API (what the tests read back).

MLflow is not a dependency of groundwatch or of its dev requirements (it pins many packages of
its own), so it lives in a virtual environment of its own: ``GW_MLFLOW_BIN`` names its ``mlflow``
executable (``.ci/run`` sets it), else ``mlflow`` on PATH. Without either the tests skip; with
``CI`` set they fail. (Not a ``GROUNDWATCH_*`` name: groundwatch warns about every such
variable it does not read, and subprocess tests check that nothing is said.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

MLFLOW_BIN_ENV = "GW_MLFLOW_BIN"
START_TIMEOUT_S = 120.0
"""The server's start takes 10-30 s on a busy 2-core machine (it migrates its SQLite schema)."""


def mlflow_binary() -> str:
    """The ``mlflow`` executable to run; skips (or, with ``CI`` set, fails) without one."""
    named = os.environ.get(MLFLOW_BIN_ENV)
    if named:
        if not os.access(named, os.X_OK):
            pytest.fail(f"{MLFLOW_BIN_ENV}={named} is not an executable", pytrace=False)
        return named
    found = shutil.which("mlflow")
    if found:
        return found
    hint = (
        "needs an MLflow server: python3 -m venv /tmp/mlflow && /tmp/mlflow/bin/pip install "
        f"mlflow, then {MLFLOW_BIN_ENV}=/tmp/mlflow/bin/mlflow (.ci/run does this)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"MLflow is missing in CI: {hint}", pytrace=False)
    pytest.skip(hint)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class MLflowServer:
    """``mlflow server`` on ``127.0.0.1:<port>``; :meth:`stop` and :meth:`start` keep the port
    and the store, so a test can take it away and bring it back."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
        }
        for name in list(env):  # the tests' own MLflow settings are the client's, not the server's
            if name.startswith("MLFLOW_TRACKING_"):
                del env[name]
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    "server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    "1",
                    "--backend-store-uri",
                    f"sqlite:///{self.folder / 'mlflow.db'}",
                    "--default-artifact-root",
                    str(self.folder / "artifacts"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its gunicorn/uvicorn children stop with it
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"mlflow server did not start: {self.log.read_text()[-3000:]}")

    @property
    def up(self) -> bool:
        """Whether the server process is running (started and not stopped)."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)  # the session this server leads, nothing else
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    # --- MLflow's REST API, as the tests read it back -------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as reply:
                return reply.status, _body(reply.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, _body(exc.read())

    def create_experiment(self, name: str) -> str:
        status, body = self.call("POST", "/api/2.0/mlflow/experiments/create", {"name": name})
        assert status == 200, body
        return str(body["experiment_id"])

    def trace(self, trace_id: int) -> dict[str, Any] | None:
        """The trace's info (assessments included), ``None`` while it is not there."""
        status, body = self.call("GET", f"/api/3.0/mlflow/traces/tr-{trace_id:032x}")
        if status == 404:
            return None
        assert status == 200, body
        info: dict[str, Any] = body["trace"]["trace_info"]
        return info

    def span_ids(self, trace_id: int) -> set[str]:
        """The ids (16 hex digits) of the trace's spans the server stored."""
        status, body = self.call(
            "GET", f"/api/3.0/mlflow/traces/batchGet?trace_ids=tr-{trace_id:032x}"
        )
        assert status == 200, body
        (trace,) = body["traces"]
        return {_hex_span_id(span["span_id"]) for span in trace["spans"]}

    def assessments(self, trace_id: int) -> list[dict[str, Any]]:
        info = self.trace(trace_id)
        return [] if info is None else list(info.get("assessments", []))

    def search(self, experiment_id: str, filter_string: str) -> list[str]:
        """The trace ids MLflow's own search finds with ``filter_string``."""
        status, body = self.call(
            "POST",
            "/api/3.0/mlflow/traces/search",
            {
                "locations": [
                    {
                        "type": "MLFLOW_EXPERIMENT",
                        "mlflow_experiment": {"experiment_id": experiment_id},
                    }
                ],
                "filter": filter_string,
                "max_results": 100,
            },
        )
        assert status == 200, body
        return [t["trace_id"] for t in body.get("traces", [])]


def _body(data: bytes) -> Any:
    """A reply's JSON, or its text when it is not JSON (a plain 404 page)."""
    try:
        return json.loads(data or b"null")
    except ValueError:
        return data.decode("utf-8", "replace")


def _hex_span_id(value: str) -> str:
    """A span id as MLflow's trace JSON carries it (base64 of the 8 bytes) as 16 hex digits."""
    import base64

    if len(value) == 16 and all(c in "0123456789abcdef" for c in value):
        return value
    return base64.b64decode(value).hex()
