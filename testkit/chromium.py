"""Headless Chromium as this machine's closed network needs it: the HTML report's browser test
and the dashboards' screenshots start it with these flags."""

from __future__ import annotations

HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these, Chromium's background connections are refused, many at a time.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def headless_flags(profile: str, window_size: str) -> list[str]:
    """The flags, with the (fresh) profile folder and the window's size (``"1200,1600"``)."""
    return [*HEADLESS_FLAGS, f"--user-data-dir={profile}", f"--window-size={window_size}"]
