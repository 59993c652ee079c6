"""The in-process step function of benchmarks/engine.py (importable by its workers)."""


def inc(x: int) -> int:
    """One more."""
    return x + 1


def noop() -> None:
    """Nothing at all."""
