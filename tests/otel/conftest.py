from groundwatch.testing import capgw  # noqa: F401  (the runtime's in-memory telemetry fixture)
