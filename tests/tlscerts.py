"""Certificates made by the test, with the ``openssl`` command line: a CA, a server
certificate for ``localhost`` and ``127.0.0.1`` and a client certificate it signed, and a key
that belongs to neither (for the mismatch case). EC P-256 keys: made in milliseconds."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .extras import require_system_tool

_CURVE = ("-pkeyopt", "ec_paramgen_curve:P-256")


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_key: Path
    other_ca: Path
    """A second CA that signed nothing here: a client trusting it must refuse the server."""


def _openssl(*args: str | Path, cwd: Path) -> None:
    binary = require_system_tool("openssl", package="openssl")
    subprocess.run([binary, *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", *_CURVE, "-out", path, cwd=cwd)


def _ca(name: str, folder: Path) -> tuple[Path, Path]:
    key, cert = folder / f"{name}.key", folder / f"{name}.pem"
    _key(key, folder)
    _openssl(
        "req", "-x509", "-new", "-key", key, "-out", cert, "-days", "2",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip
    return key, cert


def _signed(name: str, usage: str, ca: tuple[Path, Path], folder: Path) -> tuple[Path, Path]:
    key, csr, cert = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.pem"
    ext = folder / f"{name}.ext"
    ext.write_text(
        f"subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage={usage}\n"
        "basicConstraints=CA:FALSE\n"
    )
    _key(key, folder)
    _openssl("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={name}", cwd=folder)
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext,
        cwd=folder,
    )  # fmt: skip
    return cert, key


def make_pki(folder: Path) -> Pki:
    """Write a test PKI into ``folder`` (skipped without ``openssl``, failed in CI)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = _ca("test-ca", folder)
    server = _signed("server", "serverAuth", ca, folder)
    client = _signed("client", "clientAuth", ca, folder)
    other_key = folder / "other.key"
    _key(other_key, folder)
    _, other_ca = _ca("other-ca", folder)
    return Pki(ca[1], server[0], server[1], client[0], client[1], other_key, other_ca)
