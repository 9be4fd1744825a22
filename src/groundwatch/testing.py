"""Helpers for users' own test suites: pytest fixtures and assertions.

Import in a ``conftest.py``::

    from groundwatch.testing import *  # noqa: F403
"""

from __future__ import annotations

__all__: list[str] = []

# --- in-memory telemetry fixture (runtime) -------------------------------------------------------

# --- assertions (offline gate) -------------------------------------------------------------------
