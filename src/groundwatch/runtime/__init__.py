"""The runtime: a record from ``Monitor.record`` through sampling and the worker to the judge."""
