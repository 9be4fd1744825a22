"""is_audited: a deterministic share of the scored answers, independent of the sampler."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from groundwatch.rates import is_audited
from groundwatch.runtime.sampling import Decision, RatioSampler
from groundwatch.types import RagRecord

_TRACES = [random.Random(seed).getrandbits(128) for seed in range(20_000)]


def _within(share: float, rate: float, n: int) -> bool:
    """``share`` is within five binomial standard errors of ``rate`` (false alarm ~1e-6)."""
    return abs(share - rate) <= 5 * (rate * (1 - rate) / n) ** 0.5


@pytest.mark.parametrize("rate", [0.02, 0.1, 0.5])
def test_the_audited_share_is_the_audit_rate(rate: float) -> None:
    share = sum(is_audited(t, rate) for t in _TRACES) / len(_TRACES)
    assert _within(share, rate, len(_TRACES))


def test_a_lower_rate_audits_a_subset_of_a_higher_one() -> None:
    low = {t for t in _TRACES if is_audited(t, 0.05)}
    high = {t for t in _TRACES if is_audited(t, 0.2)}
    assert low and low < high


def test_edges() -> None:
    assert not any(is_audited(t, 0.0) for t in _TRACES[:500])
    assert all(is_audited(t, 1.0) for t in _TRACES[:500])
    with pytest.raises(ValueError, match="audit_rate"):
        is_audited(1, 1.5)


def test_the_choice_is_the_same_in_another_process() -> None:
    # A different hash seed would change Python's hash(), never this choice.
    keys = _TRACES[:300]
    code = (
        "import sys; from groundwatch.rates import is_audited;"
        "keys = [int(k) for k in sys.stdin.read().split()];"
        "print(''.join('1' if is_audited(k, 0.3) else '0' for k in keys))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=" ".join(map(str, keys)),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout.strip()
    assert out == "".join("1" if is_audited(k, 0.3) else "0" for k in keys)


@pytest.mark.parametrize("sampling_rate", [0.1, 0.5])
def test_the_audit_is_independent_of_the_ratio_samplers_choice(sampling_rate: float) -> None:
    """Among traces the sampler scores, and among those it does not, the audit takes its own
    rate. A choice made from the same low 64 bits as the sampler's would audit all of the
    scored traces or none of them."""
    sampler = RatioSampler(sampling_rate)
    scored, skipped = [], []
    for trace_id in _TRACES:
        record = RagRecord(answer="a", contexts=[], trace_id=trace_id)
        (scored if sampler.decide(record) is Decision.SAMPLED else skipped).append(trace_id)
    for group in (scored, skipped):
        share = sum(is_audited(t, 0.2) for t in group) / len(group)
        assert _within(share, 0.2, len(group))
