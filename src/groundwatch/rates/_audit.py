"""Which scored answers belong to the random audit: a hash of the trace id."""

from __future__ import annotations

import hashlib

__all__ = ["is_audited"]

# The audit must be a random sample of the *scored* answers, so its choice has to be independent
# of the sampler's, which compares the trace id's low 64 bits with ``rate * 2**64`` (as
# OpenTelemetry's TraceIdRatioBased does). Comparing those same bits again would audit a fixed
# slice of the scored traces (all of them, or none, at audit rates above or below the sampling
# rate); a keyed hash of all 128 bits is independent of them, and the same in every process.
_SALT = b"groundwatch.audit"
_MASK128 = (1 << 128) - 1
_SPAN = 1 << 64


def is_audited(key: int, audit_rate: float) -> bool:
    """Whether the answer with this trace id is in the audit at ``audit_rate``.

    Deterministic: every replica, ``serve`` and ``worker`` pick the same traces, and a lower
    rate picks a subset of a higher one. Independent of :class:`~groundwatch.RatioSampler`'s
    choice, so the audit is a uniform share of whatever was scored.

    Args:
        key: the 128-bit trace id (or another 64/128-bit key where there is no trace).
        audit_rate: the share of answers audited, in [0, 1].

    Raises:
        ValueError: ``audit_rate`` is outside [0, 1].
    """
    rate = float(audit_rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"audit_rate must be within [0, 1], got {audit_rate!r}")
    if rate >= 1.0:
        return True
    digest = hashlib.blake2b(
        (key & _MASK128).to_bytes(16, "big"), digest_size=8, key=_SALT
    ).digest()
    return int.from_bytes(digest, "big") < round(rate * _SPAN)
