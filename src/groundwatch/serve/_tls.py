"""TLS for both of serve's transports: ``--tls-cert`` / ``--tls-key`` (and ``--tls-client-ca``
for mutual TLS), as the OpenTelemetry Collector's OTLP receiver takes ``tls: cert_file,
key_file, client_ca_file``.

The files are read and checked once, before anything listens (:func:`load`): a missing or
unreadable file, a certificate that is not PEM, or a key that does not belong to the
certificate is a :class:`TlsConfigError` naming the option, and the command exits 2 without
listening. The same bytes then serve OTLP/HTTP (an :class:`ssl.SSLContext` for aiohttp) and
OTLP/gRPC (``grpc.ssl_server_credentials``), so both transports speak TLS from the same
files or neither starts.

The standard library's :mod:`ssl` rather than a TLS package: it is what aiohttp takes, and its
``load_cert_chain`` is OpenSSL's own check that a key matches its certificate.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

CERT_OPTION = "--tls-cert"
KEY_OPTION = "--tls-key"
CLIENT_CA_OPTION = "--tls-client-ca"

_PEM_CERT = b"-----BEGIN CERTIFICATE-----"


class TlsConfigError(ValueError):
    """A TLS file cannot be used: the message names the option and says what to do."""


@dataclass(frozen=True)
class TlsFiles:
    """Serve's certificate chain, its key and (for mutual TLS) the CA that signs client
    certificates: the paths, for OpenSSL, and the PEM bytes read from them, for gRPC.
    :func:`load` builds it, checked."""

    cert_path: str
    key_path: str
    cert_chain: bytes
    key: bytes
    client_ca: bytes | None = None

    def server_context(self) -> ssl.SSLContext:
        """The context OTLP/HTTP listens with (TLS 1.2 and up). With a client CA a client
        certificate is verified when presented; the HTTP layer refuses every request but the
        probes that comes without one (a kubelet's probe has none to present)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_path, self.key_path, password=_no_passphrase)
        if self.client_ca is not None:
            context.load_verify_locations(cadata=self.client_ca.decode("ascii"))
            context.verify_mode = ssl.CERT_OPTIONAL
        return context


def _read(path: str, option: str, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsConfigError(f"{option} {path}: no such file; give the {what}'s PEM file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TlsConfigError(f"{option} {path}: cannot read it ({reason})") from None
    if not data.strip():
        raise TlsConfigError(f"{option} {path}: the file is empty; give the {what}'s PEM file")
    return data


def _no_passphrase() -> bytes:
    # Without a callback OpenSSL would ask for a passphrase on the terminal.
    raise TlsConfigError(f"{KEY_OPTION}: the key is encrypted; give an unencrypted PEM key")


def load(cert: str | None, key: str | None, client_ca: str | None) -> TlsFiles | None:
    """Read and check the TLS files the options name; ``None`` when TLS is not asked for.

    Raises:
        TlsConfigError: one option is given without its partner, a file is missing,
            unreadable or not PEM, or the key does not match the certificate.
    """
    if cert is None and key is None:
        if client_ca is not None:
            raise TlsConfigError(
                f"{CLIENT_CA_OPTION} needs {CERT_OPTION} and {KEY_OPTION}: client certificates "
                "are asked for over TLS only"
            )
        return None
    if cert is None or key is None:
        given, missing = (CERT_OPTION, KEY_OPTION) if key is None else (KEY_OPTION, CERT_OPTION)
        raise TlsConfigError(f"{given} needs {missing}: TLS takes a certificate and its key")
    chain = _read(cert, CERT_OPTION, "certificate")
    if _PEM_CERT not in chain:
        raise TlsConfigError(f"{CERT_OPTION} {cert}: no PEM certificate in it")
    key_bytes = _read(key, KEY_OPTION, "private key")
    ca = None
    if client_ca is not None:
        ca = _read(client_ca, CLIENT_CA_OPTION, "client CA certificate")
        try:
            if _PEM_CERT not in ca:
                raise ValueError("no PEM certificate in it")
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cadata=ca.decode("ascii"))
        except (ssl.SSLError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            reason = getattr(exc, "reason", None) or exc
            raise TlsConfigError(
                f"{CLIENT_CA_OPTION} {client_ca}: not PEM CA certificates ({reason})"
            ) from None
    files = TlsFiles(cert, key, chain, key_bytes, ca)
    try:
        files.server_context()
    except TlsConfigError:
        raise
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TlsConfigError(
                f"{KEY_OPTION} {key} is not the key of {CERT_OPTION} {cert}; give the "
                "certificate's own key"
            ) from None
        raise TlsConfigError(
            f"{CERT_OPTION} {cert} / {KEY_OPTION} {key}: OpenSSL cannot use them "
            f"({exc.reason or exc}); give a PEM certificate and its unencrypted PEM key"
        ) from None
    return files
