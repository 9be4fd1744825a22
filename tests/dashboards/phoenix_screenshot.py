"""The screenshot of docs/phoenix.md: a real Phoenix with groundwatch's annotations on a few
LangChain chains' traces, captured by headless Chromium.

    GW_PHOENIX_BIN=.venv/phoenix/bin/phoenix python -m tests.dashboards.phoenix_screenshot \
        docs/phoenix-annotations.png

(from the repository root, with the dev requirements and Debian's ``chromium``).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import groundwatch as gw
from groundwatch.dashboards.phoenix import PhoenixSink
from testkit.chromium import headless_flags

from .phoenix_server import PhoenixServer, phoenix_binary
from .test_phoenix import HALLUCINATED, PROJECT, App, Results, monitor_with, run_chain

GROUNDED = "Refunds are accepted within 30 days of purchase with a receipt."


def chromium_screenshot(url: str, out: Path, size: str = "1600,1000") -> None:
    profile = tempfile.mkdtemp(prefix="gw-chromium-")
    subprocess.run(
        [
            "chromium",
            *headless_flags(profile, size),
            "--hide-scrollbars",
            "--virtual-time-budget=15000",
            f"--screenshot={out}",
            url,
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )


def main(out: str) -> None:
    import pytest

    with tempfile.TemporaryDirectory() as workdir:
        try:
            server = PhoenixServer(phoenix_binary(), Path(workdir))
        except pytest.skip.Exception as exc:
            sys.exit(str(exc))
        server.start()
        try:
            roots: list[Any] = []
            for answer in (HALLUCINATED, GROUNDED, HALLUCINATED):
                app = App(server)
                sink = PhoenixSink(server.url, PROJECT, schedule_delay_millis=50)
                monitor = monitor_with(sink, Results(), app, route="refunds")
                run_chain(monitor, app, answer)
                monitor.shutdown(30_000)
                roots.append(app.root())
                time.sleep(0.3)
            root = roots[-1]
            project = base64.b64encode(b"Project:" + str(_project_rowid(server)).encode()).decode()
            trace = f"{root.context.trace_id:032x}"
            [span] = [
                s["id"]
                for s in server.spans(PROJECT, root.context.trace_id)
                if s["context"]["span_id"] == f"{root.context.span_id:016x}"
            ]
            url = f"{server.url}/projects/{project}/traces/{trace}?selectedSpanNodeId={span}"
            print(url)
            chromium_screenshot(url, Path(out))
        finally:
            server.stop()


def _project_rowid(server: PhoenixServer) -> int:
    reply = server.post("graphql", {"query": "{ projects { edges { node { id name } } } }"})
    for edge in reply["data"]["projects"]["edges"]:
        if edge["node"]["name"] == PROJECT:
            return int(base64.b64decode(edge["node"]["id"]).decode().split(":")[1])
    raise LookupError(PROJECT)


if __name__ == "__main__":
    gw.Monitor  # noqa: B018 (the package loads before the test modules)
    main(sys.argv[1] if len(sys.argv) > 1 else "phoenix-annotations.png")
