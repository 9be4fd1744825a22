"""The base every part of groundwatch builds on, imported by the packages above it and
importing none of them (as opentelemetry-sdk keeps ``_shared_internal``), so that the package
root shows the public surface and the packages:

- :mod:`.config`: every environment variable groundwatch reads, and the defaults;
- :mod:`.guard`: the internal-error guard around every entry point from the host (log, count,
  continue), and :class:`~.guard.LossWarning`;
- :mod:`.error_types`: the ``error.type`` values of a failed evaluation;
- :mod:`.record` (``RagRecord``), :mod:`.capture` (the size caps, ``ToolOutput``),
  :mod:`.passage` and :mod:`.inputs` (checking and capping what callers hand us);
- :mod:`.lazy`, :mod:`.suppression`, :mod:`.weakhooks` and :mod:`.daemon_threads`: small
  mechanisms (lazy package faces, instrumentation suppression, fork and exit hooks, daemon
  threads for blocking calls).

Nothing here is public: the names users need are handed on by ``groundwatch``,
``groundwatch.integration`` and ``groundwatch.types``.
"""
