"""Runtime tests: the real OpenTelemetry SDK with in-memory exporters (``capgw``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groundwatch._shared import guard
from groundwatch.testing import capgw, groundwatch_telemetry  # noqa: F401


@pytest.fixture(autouse=True)
def _raise_internal_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Our bugs must fail our tests: entry points re-raise, and the worker's (which cannot
    raise to anybody) are checked after each test. Faults of user code (callbacks, samplers,
    judges) are counted there too, and are not ours; nor is a disk that cannot keep up with a
    DatasetSink (its drops are counted under ``dataset``)."""
    monkeypatch.setenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS", "1")
    before = dict(guard.errors)
    yield
    ours = {
        key: n - before.get(key, 0)
        for key, n in guard.errors.items()
        if key[0] not in ("on_result", "sampler", "judge", "redact", "dataset")
        and n != before.get(key, 0)
    }
    assert not ours, f"groundwatch internal errors: {ours}"
