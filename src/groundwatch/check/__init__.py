"""``groundwatch check``: the offline gate for CI (command, input, summary, outputs, report)."""
