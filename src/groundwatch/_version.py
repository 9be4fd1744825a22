"""The installed distribution's version: the one source of ``groundwatch.__version__`` and of
the version groundwatch's OpenTelemetry tracers, meters and loggers carry. pyproject.toml holds
the number; a source tree that is not installed reads ``0+unknown``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("groundwatch")
except PackageNotFoundError:  # pragma: no cover - a source tree on sys.path, not installed
    __version__ = "0+unknown"
