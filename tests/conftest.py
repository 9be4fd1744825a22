"""Suite-wide hooks: one closing line for the tests skipped for want of a system tool."""

from __future__ import annotations

import re

import pytest

from .extras import SYSTEM_TOOL_HINT

_PACKAGES = re.compile(re.escape(SYSTEM_TOOL_HINT) + r" ([^)]+)\)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run that skipped tests for missing Debian packages (redis-server, prometheus,
    chromium), say how many and the one command that installs them all."""
    packages: set[str] = set()
    skipped = 0
    for report in terminalreporter.stats.get("skipped", []):
        found = _PACKAGES.search(str(report.longrepr))
        if found:
            skipped += 1
            packages.update(found.group(1).split())
    if skipped:
        terminalreporter.write_line(
            f"{skipped} test{'s' * (skipped != 1)} skipped for want of system tools; "
            f"install them as CI does: sudo {SYSTEM_TOOL_HINT} {' '.join(sorted(packages))}",
            yellow=True,
        )
