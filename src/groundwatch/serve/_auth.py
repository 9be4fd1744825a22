"""Bearer-token authentication of OTLP requests: ``--auth-token-file``, as the OpenTelemetry
Collector's ``bearertokenauth`` extension checks ``authorization: Bearer <token>``.

The tokens come from a file (one a line, blank lines ignored), not from a flag, so that they
stay out of ``ps`` and shell history; several lines let a token be rotated without downtime
(add the new one, move the senders over, remove the old one), and ``SIGHUP`` re-reads the
file (:meth:`TokenFile.reload`; a Kubernetes Secret mounted as a file updates in place).

A token is never written anywhere: not in a message, an error, a log line or a span. Messages
name the file and a line number only. The comparison hashes both sides to the same length
first and compares every configured token with :func:`hmac.compare_digest`, so neither which
token matched nor how much of it did shows in the time an answer takes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from pathlib import Path

from ..telemetry import semconv as sc

_logger = logging.getLogger("groundwatch")

OPTION = "--auth-token-file"

MISSING_TOKEN = sc.SERVE_MISSING_TOKEN
INVALID_TOKEN = sc.SERVE_INVALID_TOKEN

_SCHEME = "bearer"


class TokenFileError(ValueError):
    """The token file cannot be used; the message names the option and the file, never a
    token."""


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def read_tokens(path: str) -> list[bytes]:
    """The tokens of the file at ``path``, one a line (surrounding whitespace and blank lines
    ignored).

    Raises:
        TokenFileError: the file is missing, unreadable, holds no token, or a line holds
            something that cannot be sent as a bearer token (inner spaces, control or
            non-ASCII characters).
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise TokenFileError(f"{OPTION} {path}: no such file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TokenFileError(f"{OPTION} {path}: cannot read it ({reason})") from None
    tokens: list[bytes] = []
    for number, line in enumerate(raw.splitlines(), 1):
        token = line.strip()
        if not token:
            continue
        if not all(0x21 <= byte <= 0x7E for byte in token):
            # Which character is not said: it is part of a secret.
            raise TokenFileError(
                f"{OPTION} {path}: line {number} is not a token (spaces inside, control or "
                "non-ASCII characters); one token a line"
            )
        tokens.append(token)
    if not tokens:
        raise TokenFileError(f"{OPTION} {path}: the file holds no token; one token a line")
    return tokens


class TokenFile:
    """The accepted tokens, read from ``path``; :meth:`check` judges an ``authorization``
    header, :meth:`reload` reads the file again.

    Raises:
        TokenFileError: as :func:`read_tokens`, when built.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._digests = [_digest(t) for t in read_tokens(path)]

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r}, {len(self)} tokens)"

    def __len__(self) -> int:
        with self._lock:
            return len(self._digests)

    def reload(self) -> bool:
        """Read the file again (on ``SIGHUP``); whether that worked. A file that cannot be
        used now keeps the tokens read before, and says why in one warning."""
        try:
            digests = [_digest(t) for t in read_tokens(self.path)]
        except TokenFileError as exc:
            _logger.warning(
                "groundwatch serve: %s; keeping the %d tokens read before", exc, len(self)
            )
            return False
        with self._lock:
            self._digests = digests
        _logger.warning("groundwatch serve: re-read %s %s: %d tokens", OPTION, self.path, len(self))
        return True

    def check(self, authorization: str | None) -> str | None:
        """``None`` when ``authorization`` (the header's value) carries an accepted bearer
        token; otherwise why not: :data:`MISSING_TOKEN` or :data:`INVALID_TOKEN`."""
        if not authorization:
            return MISSING_TOKEN
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() != _SCHEME or not credentials:
            return MISSING_TOKEN
        offered = _digest(credentials.encode("utf-8", "surrogateescape"))
        with self._lock:
            digests = list(self._digests)
        accepted = False
        for digest in digests:  # every token is compared: no early exit to time
            accepted |= hmac.compare_digest(offered, digest)
        return None if accepted else INVALID_TOKEN
