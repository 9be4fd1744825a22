"""The OTLP/HTTP endpoint on aiohttp: ``POST /v1/traces``, ``POST /v1/logs`` (GenAI content
events), the probes ``GET /livez`` and ``GET /readyz`` (as ``groundwatch worker`` answers them)
and ``GET /health`` (the state as JSON); ``POST /v1/metrics`` is refused with a reason.
:class:`Receiver` also runs the OTLP/gRPC endpoint (``_grpc``) beside it when asked to, both
over TLS when given the files (``_tls``).

With a token file (``_auth``) every request but the two probes needs ``authorization: Bearer
<token>``, and with a client CA a verified client certificate: a missing or wrong one is
answered 401 before the body is read. ``/livez`` and ``/readyz`` stay open, since a kubelet's
probe sends no credentials and they say only ``ok``. (So the TLS handshake asks for a client
certificate without requiring one; OTLP/gRPC, which has no probes, requires it.)

aiohttp rather than an ASGI framework plus a server: one well-kept package that is both the
HTTP server and (for the tests) the client, runs inside an event loop we own
(``AppRunner``/``TCPSite``, no server process model to fit into), and lets the body be read
raw (``auto_decompress=False``), so the size cap and gzip decoding stay ours and a gzip bomb
is cut at the cap instead of being inflated by the framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from ..telemetry import semconv as sc
from ._service import Reply, TraceService

if TYPE_CHECKING:
    from ._grpc import GrpcReceiver
    from ._tls import TlsFiles

_logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
METRICS_PATH = "/v1/metrics"
HEALTH_PATH = "/health"
LIVEZ_PATH = "/livez"
READYZ_PATH = "/readyz"
OPEN_PATHS = frozenset({LIVEZ_PATH, READYZ_PATH})
"""Answered without a token: a kubelet's probe has none, and they tell nothing but ok."""

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ListenError(OSError):
    """A listener could not take its address: ``transport`` (``http`` or ``grpc``),
    ``address`` (``host:port``), ``reason`` in words, ``in_use`` when another process holds the
    port."""

    def __init__(self, transport: str, address: str, reason: str, *, in_use: bool) -> None:
        protocol = "OTLP/gRPC" if transport == "grpc" else "OTLP/HTTP"
        super().__init__(f"cannot listen on {address} for {protocol}: {reason}")
        self.transport = transport
        self.address = address
        self.reason = reason
        self.in_use = in_use


async def _read_capped(request: web.Request, limit: int) -> bytes | None:
    """The raw body, or ``None`` once it passes ``limit`` bytes (read no further)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _response(reply: Reply) -> web.Response:
    response = web.Response(status=reply.status, body=reply.body)
    response.content_type = reply.content_type
    for name, value in reply.headers:
        response.headers[name] = value
    return response


def build_app(service: TraceService, *, client_certificates: bool = False) -> web.Application:
    """The aiohttp application serving ``service``; with ``client_certificates`` (mutual TLS)
    every request but the probes must have come with a verified client certificate."""

    async def export(request: web.Request) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type", "")
        body = await _read_capped(request, service.max_body_bytes)
        if body is None:
            return _response(service.too_large(content_type))
        encoding = request.headers.get("Content-Encoding", "")
        logs = request.path == LOGS_PATH
        return _response(service.export(body, content_type, encoding, logs=logs))

    async def metrics(request: web.Request) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type", "")
        return _response(service.not_served(content_type, request.path))

    async def health(request: web.Request) -> web.StreamResponse:
        state = service.health()
        return web.Response(
            status=503 if service.stopping else 200,
            text=json.dumps(state),
            content_type="application/json",
        )

    async def livez(request: web.Request) -> web.StreamResponse:
        # The event loop answered: alive. (Stopping is not dead: no restart mid-shutdown.)
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.StreamResponse:
        if service.stopping:
            return web.Response(status=503, text="not ready\n")
        return web.Response(text="ok\n")

    def refusal(request: web.Request) -> str | None:
        """Why ``request`` may not go on (an ``error.type``), or ``None``."""
        transport = request.transport
        if client_certificates and (transport is None or not transport.get_extra_info("peercert")):
            return sc.SERVE_MISSING_CLIENT_CERTIFICATE
        if service.auth is not None:
            return service.auth.check(request.headers.get("Authorization"))
        return None

    @web.middleware
    async def authenticate(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            reason = refusal(request)
            if reason is not None and request.path == HEALTH_PATH:
                # Not an export: refused, but not counted among the OTLP requests.
                return web.Response(status=401, text="unauthorized\n")
            if reason is not None:
                content_type = request.headers.get("Content-Type", "")
                return _response(service.unauthenticated(reason, content_type))
        return await handler(request)

    # client_max_size: aiohttp's own cap for request.read(); ours reads the stream itself.
    guarded = service.auth is not None or client_certificates
    app = web.Application(
        client_max_size=service.max_body_bytes + 1,
        middlewares=[authenticate] if guarded else [],
    )
    app.router.add_post(TRACES_PATH, export)
    app.router.add_post(LOGS_PATH, export)
    app.router.add_post(METRICS_PATH, metrics)
    app.router.add_get(HEALTH_PATH, health)
    app.router.add_get(LIVEZ_PATH, livez)
    app.router.add_get(READYZ_PATH, readyz)
    return app


class Receiver:
    """The OTLP/HTTP server, the OTLP/gRPC server when asked for, and the completion loop of
    one :class:`TraceService`, all on the running event loop.

    Args:
        service: what requests go to.
        host, port: where to listen (port 0 picks a free one: see :attr:`port`).
        poll_s: how often finished traces are looked for.
        grpc_port: where OTLP/gRPC listens on ``host`` (0 picks a free one: see
            :attr:`grpc_port`); ``None`` serves OTLP/HTTP only. Needs ``grpcio``.
        tls: the certificate and key both transports serve TLS with (and the client CA
            they require certificates from); ``None``: plaintext.
    """

    def __init__(
        self,
        service: TraceService,
        host: str,
        port: int,
        poll_s: float,
        grpc_port: int | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        self.poll_s = poll_s
        self.grpc_port = grpc_port
        self.tls = tls
        self._runner: web.AppRunner | None = None
        self._grpc: GrpcReceiver | None = None
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        mutual = self.tls is not None and self.tls.client_ca is not None
        self._runner = web.AppRunner(
            build_app(self.service, client_certificates=mutual),
            auto_decompress=False,
            access_log=None,
        )
        await self._runner.setup()
        try:
            context = None if self.tls is None else self.tls.server_context()
            await web.TCPSite(self._runner, self.host, self.port, ssl_context=context).start()
        except OSError as exc:
            await self._runner.cleanup()
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            in_use = exc.errno == errno.EADDRINUSE
            raise ListenError("http", f"{self.host}:{self.port}", reason, in_use=in_use) from exc
        self.port = int(self._runner.addresses[0][1])  # the real one, with port 0
        if self.grpc_port is not None:
            from ._grpc import GrpcReceiver  # grpcio is loaded only when gRPC is served

            self._grpc = GrpcReceiver(self.service, self.host, self.grpc_port, tls=self.tls)
            try:
                await self._grpc.start()
            except BaseException as exc:
                await self._runner.cleanup()
                if isinstance(exc, OSError):
                    # grpcio itself says only "Failed to bind": a taken port, the usual cause.
                    address = f"{self.host}:{self.grpc_port}"
                    reason = os.strerror(exc.errno) if exc.errno else str(exc)
                    raise ListenError("grpc", address, reason, in_use=True) from exc
                raise
            self.grpc_port = self._grpc.port
        self._poller = asyncio.create_task(self._poll(), name="groundwatch-serve-poll")

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                self.service.complete_due()
            except Exception as exc:  # pragma: no cover - complete_due guards itself
                _logger.warning("serve: completing traces failed: %r", exc)

    async def stop(self, timeout_millis: int) -> bool:
        """Answer 503 from now on, stop listening, record what is pending, shut the monitor
        down (it scores within the deadline and counts the rest as dropped)."""
        self.service.stopping = True
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self._grpc is not None:
            await self._grpc.stop(grace_s=1.0)  # calls in progress get answered
        if self._runner is not None:
            await self._runner.cleanup()
        self.service.drain()
        return await asyncio.to_thread(self.service.monitor.shutdown, timeout_millis)
