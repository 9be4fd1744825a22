"""Where a judge runs: the runners the worker hands its batches to.

- :mod:`.contract`: what every runner promises the worker (:class:`~.contract.Runner`), and
  the forms a record and its result take between them;
- :mod:`.choice`: :func:`~.choice.runner_for`, the one place that picks a runner for a judge;
- :mod:`.thread_runner`, :mod:`.process_runner` (with :mod:`.worker_process` and the child's
  entry point :mod:`._child`), :mod:`.async_runner` and :mod:`.cascade_runner`: the runners.

Nothing is imported here, so the contract loads without the runners (the pipeline, below
them, imports it).
"""
