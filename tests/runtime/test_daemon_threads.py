"""The runners' blocking calls run on reused daemon threads (``runner.DaemonThreads``)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from groundwatch._shared.daemon_threads import DaemonThreads


def test_a_thread_is_reused_once_its_call_returned() -> None:
    threads = DaemonThreads("gw-test-pipe")

    async def main() -> list[int]:
        return [await threads.run(threading.get_ident) for _ in range(5)]

    idents = asyncio.run(main())
    assert len(set(idents)) == 1
    assert all(t.daemon for t in threading.enumerate() if t.name == "gw-test-pipe")
    threads.close()


def test_a_call_that_never_returned_gets_no_second_call() -> None:
    threads = DaemonThreads("gw-test-pipe")
    release = threading.Event()

    async def main() -> tuple[int, int]:
        stuck = asyncio.ensure_future(threads.run(lambda: (release.wait(), threading.get_ident())))
        await asyncio.sleep(0.05)
        other = await threads.run(threading.get_ident)  # a new thread, not the stuck one
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(stuck), 0.05)
        release.set()
        return (await stuck)[1], other

    stuck_ident, other_ident = asyncio.run(main())
    assert stuck_ident != other_ident
    threads.close()


def test_errors_reach_the_awaiting_task() -> None:
    threads = DaemonThreads("gw-test-pipe")

    def fail() -> None:
        raise SystemExit(3)

    async def main() -> None:
        with pytest.raises(SystemExit):
            await threads.run(fail)
        assert await threads.run(lambda: 7) == 7  # the thread survived it

    asyncio.run(main())
    threads.close()


def test_close_ends_the_idle_threads() -> None:
    threads = DaemonThreads("gw-test-pipe")

    def call() -> int:
        time.sleep(0.05)
        return threading.get_ident()

    async def main() -> set[int]:
        return set(await asyncio.gather(*(threads.run(call) for _ in range(3))))

    idents = asyncio.run(main())
    assert len(idents) == 3  # three calls at once: three threads, all kept

    def alive() -> set[int]:
        return {t.ident for t in threading.enumerate() if t.ident is not None} & idents

    assert alive() == idents
    threads.close()
    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive()
