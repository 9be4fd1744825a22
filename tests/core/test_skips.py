"""A test that needs a system tool skips through ``tests.extras.require_system_tool``: only
then does the end-of-run hint name the package to install, and does ``CI`` (which installs
them all) fail the test instead of skipping it."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TOOLS = ("redis-server", "promtool", "prometheus", "chromium", "chromedriver")
OWN_SKIP = re.compile(r"pytest\.skip\(\s*[rf]?[\"']([^\"']*)")


def test_no_test_skips_for_a_system_tool_on_its_own() -> None:
    own = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == "extras.py":
            continue
        for reason in OWN_SKIP.findall(path.read_text(encoding="utf-8")):
            if any(tool in reason for tool in TOOLS):
                own.append(f"{path.relative_to(TESTS)}: {reason}")
    assert not own, own
