"""groundwatch integration for langchain (work in progress)."""

__all__: list[str] = []
