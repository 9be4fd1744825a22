"""groundwatch integration for llamaindex (work in progress)."""

__all__: list[str] = []
