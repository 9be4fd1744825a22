"""The OTLP/gRPC endpoint: ``TraceService/Export`` and ``LogsService/Export`` on grpcio's
asyncio server, on the same event loop and the same :class:`TraceService` as OTLP/HTTP.

OTLP/gRPC is what the Collector's ``otlp`` exporter and most SDKs send by default. The methods
are registered as generic handlers on raw bytes: a request body is the same protobuf message
an OTLP/HTTP ``application/x-protobuf`` body is, so both transports go through one
``TraceService.export`` (decoding, caps, backpressure, accounting) and only the status mapping
differs. grpcio itself decompresses ``grpc-encoding: gzip`` and refuses a message past
``--max-body-bytes`` with ``RESOURCE_EXHAUSTED``.

Status mapping (https://opentelemetry.io/docs/specs/otlp/#failures-1): an undecodable body is
``INVALID_ARGUMENT``; a full scoring queue is ``RESOURCE_EXHAUSTED`` and a stopping server
``UNAVAILABLE``, both with a ``google.rpc.RetryInfo`` in the status details, which makes
exporters retry after the delay it gives (``RESOURCE_EXHAUSTED`` without one, for a message
over the cap, is final); metrics are ``UNIMPLEMENTED`` with the reason; our own failure is
``INTERNAL``; a call without an accepted ``authorization: Bearer`` metadata entry (with a
token file) is ``UNAUTHENTICATED``, before its message is looked at.

With TLS files (``_tls``) the port serves TLS only (``grpc.ssl_server_credentials``, client
certificates required with a client CA), from the same bytes as OTLP/HTTP.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import DecodeError
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from grpc import aio
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from . import _otlp
from ._service import Reply, TraceService

if TYPE_CHECKING:
    from ._tls import TlsFiles

TRACE_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name
METRICS_SERVICE = metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name

_CODES: dict[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    404: grpc.StatusCode.UNIMPLEMENTED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,  # no RetryInfo: the same message fails again
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,  # with RetryInfo: retry after its delay
    500: grpc.StatusCode.INTERNAL,
    503: grpc.StatusCode.UNAVAILABLE,
}
"""The gRPC status for each HTTP status ``TraceService`` answers with."""

_Method = Callable[[bytes, aio.ServicerContext[bytes, bytes]], Awaitable[bytes]]


def _message(reply: Reply) -> str:
    try:
        return str(Status.FromString(reply.body).message)
    except DecodeError:  # pragma: no cover - error bodies are our own Status messages
        return f"HTTP {reply.status}"


async def _answer(reply: Reply, context: aio.ServicerContext[bytes, bytes]) -> bytes:
    """The response body of a 200; otherwise abort the call with the mapped status."""
    if reply.status == 200:
        return reply.body
    code = _CODES.get(reply.status, grpc.StatusCode.INTERNAL)
    message = _message(reply)
    retry_after = dict(reply.headers).get("Retry-After")
    trailing: tuple[tuple[str, bytes], ...] = ()
    if retry_after is not None:
        # The OTLP exporters read the delay from the status details, as the spec asks.
        detail = Status(code=code.value[0], message=message)
        detail.details.add().Pack(RetryInfo(retry_delay=Duration(seconds=int(retry_after))))
        trailing = (("grpc-status-details-bin", detail.SerializeToString()),)
    await context.abort(code, message, trailing_metadata=trailing)
    raise AssertionError("unreachable: abort raises")  # pragma: no cover


def _refusal(service: TraceService, context: aio.ServicerContext[bytes, bytes]) -> Reply | None:
    """The 401 for a call without an accepted bearer token (``None``: go on)."""
    if service.auth is None:
        return None
    # gRPC metadata keys are lower case; several entries: the first decides, as in HTTP.
    values = [v for k, v in context.invocation_metadata() or () if k == "authorization"]
    authorization = values[0] if values and isinstance(values[0], str) else None
    return service.authenticate(authorization, _otlp.PROTOBUF)


def _export(service: TraceService, *, logs: bool) -> _Method:
    async def export(body: bytes, context: aio.ServicerContext[bytes, bytes]) -> bytes:
        refused = _refusal(service, context)
        if refused is not None:
            return await _answer(refused, context)
        # grpcio has already decompressed the message: the body is plain protobuf.
        return await _answer(service.export(body, _otlp.PROTOBUF, "", logs=logs), context)

    return export


def _metrics(service: TraceService) -> _Method:
    async def export(body: bytes, context: aio.ServicerContext[bytes, bytes]) -> bytes:
        refused = _refusal(service, context)
        if refused is not None:
            return await _answer(refused, context)
        return await _answer(service.not_served(_otlp.PROTOBUF, METRICS_SERVICE), context)

    return export


def _handlers(service: TraceService) -> list[grpc.GenericRpcHandler]:
    # No (de)serializers: the methods take and return the raw protobuf bytes.
    def handler(name: str, method: _Method) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            name, {"Export": grpc.unary_unary_rpc_method_handler(method)}
        )

    return [
        handler(TRACE_SERVICE, _export(service, logs=False)),
        handler(LOGS_SERVICE, _export(service, logs=True)),
        handler(METRICS_SERVICE, _metrics(service)),
    ]


def _refuse_if_taken(host: str, port: int) -> None:
    """Raise ``OSError(EADDRINUSE)`` when another process listens on ``host:port``: grpcio
    would print its own error lines on stderr before failing, under the command's one line."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # grpcio reports what it cannot resolve
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise
                # Another reason (no IPv6 here): grpcio decides.


def _credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials(
        [(tls.key, tls.cert_chain)],
        root_certificates=tls.client_ca,
        require_client_auth=tls.client_ca is not None,
    )


class GrpcReceiver:
    """The OTLP/gRPC server of one :class:`TraceService`.

    Args:
        service: what requests go to.
        host, port: where to listen (port 0 picks a free one: see :attr:`port`).
        tls: serve TLS only, with these files; ``None``: plaintext, like the Collector's
            default receiver.
    """

    def __init__(
        self, service: TraceService, host: str, port: int, *, tls: TlsFiles | None = None
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        self.tls = tls
        self._server: aio.Server | None = None

    async def start(self) -> None:
        limit = self.service.max_body_bytes
        server = aio.server(
            handlers=_handlers(self.service),
            options=(
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                # One server per port: a second serve on a taken port fails to start (with
                # SO_REUSEPORT, grpcio's default, both would listen and share the calls).
                ("grpc.so_reuseport", 0),
            ),
        )
        address = f"{self.host}:{self.port}"
        if self.port:
            _refuse_if_taken(self.host, self.port)
        try:
            if self.tls is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, _credentials(self.tls))
        except RuntimeError as exc:  # grpcio's "Failed to bind" (older ones return 0)
            raise OSError(f"cannot listen on {address} for OTLP/gRPC: {exc}") from None
        if bound == 0:
            raise OSError(f"cannot listen on {address} for OTLP/gRPC")
        self.port = bound
        await server.start()
        self._server = server

    async def stop(self, grace_s: float) -> None:
        """Stop taking calls; calls in progress get ``grace_s`` to finish."""
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
