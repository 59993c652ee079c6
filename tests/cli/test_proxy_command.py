"""`tidemill proxy`'s uvicorn options."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill.cli import main


@pytest.mark.parametrize(("flags", "access_log"), [([], True), (["--no-access-log"], False)])
def test_the_access_log_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], access_log: bool
) -> None:
    served: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **options: served.update(options))
    assert main(["proxy", *flags]) == 0
    assert served["access_log"] is access_log
    assert "loop" not in served and "http" not in served  # uvloop and httptools when installed
