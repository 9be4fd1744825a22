"""The dashboard sinks ``serve --sink NAME`` and ``worker --sink NAME`` know, by name (no sink is
imported until one is built)."""

from __future__ import annotations

import importlib
from typing import Any

SINKS: dict[str, str] = {
    "phoenix": "groundwatch.dashboards.phoenix:PhoenixSink",
    "mlflow": "groundwatch.dashboards.mlflow:MLflowSink",
}
"""``--sink`` names: the ``module:class`` of each sink (built with no arguments: its tool's
environment variables configure it)."""


def sink_by_name(name: str) -> Any:
    """The dashboard sink named ``name``, configured from its tool's own environment
    variables.

    Raises:
        ValueError: no sink of that name.
    """
    if name not in SINKS:
        raise ValueError(f"no dashboard sink named {name!r}; known: {', '.join(sorted(SINKS))}")
    module_name, _, class_name = SINKS[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)()
