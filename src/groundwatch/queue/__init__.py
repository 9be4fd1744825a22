"""Distributed scoring over a Redis stream: :class:`RedisQueue` in the app, ``groundwatch
worker`` (:mod:`.consumer`) in a pool of processes. The ``redis`` client is imported only when
a queue is built (extra ``groundwatch[redis]``); see docs/distributed.md."""

from .redis import DEFAULT_STREAM, RedisQueue

__all__ = ["DEFAULT_STREAM", "RedisQueue"]
