"""The public API: every module's `__all__` is complete and importable."""

from __future__ import annotations

import importlib
import types

import pytest

PUBLIC_MODULES = [
    "tidemill",
    "tidemill.errors",
    "tidemill.types",
    "tidemill.tools",
    "tidemill.tools.mcp",
    "tidemill.llm",
    "tidemill.llm.proxy",
    "tidemill.agents",
    "tidemill.agents.journal",
    "tidemill.agents.memory",
    "tidemill.agents.checkpoint",
    "tidemill.agents.graph",
    "tidemill.agents.guardrails",
    "tidemill.agents.tracing",
    "tidemill.agents.checkpoint.conformance",
    "tidemill.flows",
    "tidemill.store",
    "tidemill.engine",
    "tidemill.engine.triggers",
    "tidemill.workspace",
    "tidemill.server",
    "tidemill.copilot",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_importable_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"
    assert len(set(exported)) == len(exported), "duplicates in __all__ (ruff RUF022 sorts it)"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", name)).startswith(name)
        and attr not in {"annotations", "TYPE_CHECKING"}
    }
    missing = public - set(exported)
    assert not missing, f"{name} has public names outside __all__: {sorted(missing)}"


def test_the_package_is_typed() -> None:
    from importlib import resources

    assert resources.files("tidemill").joinpath("py.typed").is_file()


def test_every_error_derives_from_the_base() -> None:
    import tidemill.errors as errors

    for symbol in errors.__all__:
        cls = getattr(errors, symbol)
        assert issubclass(cls, errors.TidemillError), symbol
