"""Dashboard sink tests: the shared delivery, and each sink against its real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groundwatch._shared import guard
from groundwatch.dashboards import _delivery

EXPLODING = "exploding"
"""The component of the test exporter that raises on purpose (its internal error is expected)."""


class LostWrites:
    """What ``groundwatch.errors`` counted during the test, by ``(component, error.type)``."""

    def __init__(self) -> None:
        self.before = dict(guard.errors)

    def counts(self, component: str) -> dict[str, int]:
        return {
            error_type: n - self.before.get((where, error_type), 0)
            for (where, error_type), n in guard.errors.items()
            if where == component and n != self.before.get((where, error_type), 0)
        }


@pytest.fixture
def lost() -> LostWrites:
    return LostWrites()


@pytest.fixture(autouse=True)
def _raise_internal_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Our bugs fail our tests (entry points re-raise); lost writes are counted under each
    sink's component and asserted by the tests that expect them."""
    monkeypatch.setenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS", "1")
    before = dict(guard.errors)
    yield
    ours = {
        key: n - before.get(key, 0)
        for key, n in guard.errors.items()
        if (key[1] == "internal" or key[0] in ("record", "worker", "on_result"))
        and key[0] != EXPLODING
        and n != before.get(key, 0)
    }
    assert not ours, f"groundwatch internal errors: {ours}"


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries after milliseconds instead of half a second (the schedule is the same)."""
    monkeypatch.setattr(_delivery, "RETRY_BASE_S", 0.01)
    monkeypatch.setattr(_delivery, "RETRY_MAX_S", 0.05)
