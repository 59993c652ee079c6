"""The tool of benchmarks/agent_steps.py, importable by its workers and their script pools."""

__all__ = ["echo"]


def echo(i: int) -> int:
    """Return i.

    Args:
        i: Any integer.
    """
    return i
