"""The proxy's and the CLI's public names: `__all__` complete and importable."""

from __future__ import annotations

import importlib
import types

import pytest
from starlette.testclient import TestClient

from tidemill.llm.proxy import create_app


@pytest.mark.parametrize("name", ["tidemill.llm.proxy", "tidemill.cli"])
def test_all_is_importable_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported)
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", name)).startswith(name)
        and attr not in {"annotations", "TYPE_CHECKING"}
    }
    assert not public - set(exported), f"{name} has public names outside __all__"


def test_a_non_ascii_key_is_refused_not_crashed_on() -> None:
    with TestClient(create_app(api_key="proxy-key")) as client:
        answer = client.get("/v1/models", headers={"authorization": "Bearer clé".encode("latin-1")})
    assert answer.status_code == 401
