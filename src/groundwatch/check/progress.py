"""The progress of ``groundwatch check`` on stderr."""

from __future__ import annotations

import time
from typing import IO


class Progress:
    """A progress bar on a terminal; on CI logs an occasional line, never a flood."""

    LINE_INTERVAL_S = 30.0
    BAR_INTERVAL_S = 0.1

    def __init__(self, stream: IO[str], total: int | None, mode: str) -> None:
        if mode == "auto":
            mode = "bar" if stream.isatty() else "lines"
        self.stream = stream
        self.total = total
        self.mode = mode
        self.start = time.monotonic()
        self._last = self.start
        self._drawn = False

    def update(self, done: int) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        interval = self.BAR_INTERVAL_S if self.mode == "bar" else self.LINE_INTERVAL_S
        last_row = self.mode == "bar" and done == self.total
        if now - self._last < interval and not last_row:
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        if self.mode == "bar":
            if self.total:
                width = 30
                filled = int(width * min(done, self.total) / self.total)
                bar = "█" * filled + "·" * (width - filled)
                text = f"\r{bar} {done}/{self.total} rows  {rate:.0f} rows/s"
            else:
                text = f"\r{done} rows  {rate:.0f} rows/s"
            self.stream.write(text)
            self._drawn = True
        else:
            of = f"/{self.total}" if self.total else ""
            self.stream.write(f"groundwatch check: {done}{of} rows, {rate:.0f} rows/s\n")
            self._drawn = True
        self.stream.flush()

    def finish(self, done: int | None = None) -> None:
        """Clear the bar; after progress lines, end with one line saying the run is done."""
        if not self._drawn:
            return
        if self.mode == "bar":
            self.stream.write("\r\x1b[K")
        else:
            seconds = time.monotonic() - self.start
            self.stream.write(f"groundwatch check: done, {done} rows in {seconds:.0f} s\n")
        self.stream.flush()
