"""``groundwatch serve`` tests: the real receiver (aiohttp, and grpcio when asked for, on
loopback ports, its own event loop on a thread), the SDK's real OTLP exporters sending to it,
and the monitor on the in-memory telemetry of ``capgw``, where the evaluation spans land."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from groundwatch.testing import GroundwatchTelemetry, capgw  # noqa: F401

from ..extras import require_serve_extra
from ..runtime.conftest import _raise_internal_errors  # noqa: F401

require_serve_extra()

from groundwatch.serve import Receiver, TraceAssembler, TraceService  # noqa: E402


class RunningReceiver:
    """A :class:`Receiver` on a loopback port, its loop on a daemon thread."""

    def __init__(self, service: TraceService, *, grpc: bool = False, tls: Any = None) -> None:
        self.service = service
        self.receiver = Receiver(
            service, "127.0.0.1", 0, poll_s=0.02, grpc_port=0 if grpc else None, tls=tls
        )
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.call(self.receiver.start())
        scheme = "http" if tls is None else "https"
        self.url = f"{scheme}://127.0.0.1:{self.receiver.port}"
        self.grpc_target = f"127.0.0.1:{self.receiver.grpc_port}"
        """Where its OTLP/gRPC receiver listens (with ``grpc=True``)."""
        self.stopped = False

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return fn()

        return self.call(run())

    def stop(self, timeout_millis: int = 10_000) -> bool:
        if self.stopped:
            return True
        self.stopped = True
        ok = bool(self.call(self.receiver.stop(timeout_millis), timeout=60))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        return ok


@pytest.fixture
def make_receiver(
    capgw: GroundwatchTelemetry,  # noqa: F811
) -> Iterator[Callable[..., RunningReceiver]]:
    """Build a running receiver whose monitor emits into ``capgw``."""
    running: list[RunningReceiver] = []

    def make(
        *,
        quiet_s: float = 0.2,
        orphan_s: float = 2.0,
        max_traces: int = 1000,
        max_spans: int = 512,
        max_body_bytes: int = 1 << 20,
        per_pair: bool = False,
        route_attribute: str | None = None,
        max_queue_size: int = 64,
        grpc: bool = False,
        tls: Any = None,
        auth: Any = None,
        **monitor_kwargs: Any,
    ) -> RunningReceiver:
        monitor_kwargs.setdefault("executor", "thread")
        monitor = capgw.monitor(max_queue_size=max_queue_size, **monitor_kwargs)
        assembler = TraceAssembler(
            quiet_s=quiet_s, orphan_s=orphan_s, max_traces=max_traces, max_spans=max_spans
        )
        service = TraceService(
            monitor,
            assembler,
            per_pair=per_pair,
            max_body_bytes=max_body_bytes,
            max_queue_size=max_queue_size,
            route_attribute=route_attribute,
            meter_provider=capgw.meter_provider,
            auth=auth,
        )
        receiver = RunningReceiver(service, grpc=grpc, tls=tls)
        running.append(receiver)
        return receiver

    yield make
    for receiver in running:
        receiver.stop()


def wait_for_evaluations(capgw: GroundwatchTelemetry, n: int, timeout: float = 30) -> list[Any]:  # noqa: F811
    """The evaluation spans once ``n`` arrived (serve completes a trace after its quiet
    period, then the monitor scores it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        capgw.flush()
        spans = capgw.spans()
        if len(spans) >= n:
            return list(spans)
        time.sleep(0.05)
    raise AssertionError(f"{len(capgw.spans())} evaluation spans, expected {n}")
