"""A push re-pins a pin to an item of the same push that the workspace does not hold.

`ada` keeps, in the workspace `main`, the script `f/s/lookup` at version 3,
the agent `f/s/helper` at version 2, the agent `f/s/triage` (its tools pin
`f/s/lookup@3` and `f/s/helper@2`) and the flow `f/s/uses` linking
`f/s/triage@1`. Pulled and pushed into the empty workspace `other`, each
item is version 1 there: the pins follow them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey, MissingReferences
from tidemill.workspace._sync import pull, push


def script(n: int) -> str:
    return f"def main(order_id: str):\n    return 'v{n} ' + order_id\n"


def agent(*tools: dict[str, Any]) -> dict[str, Any]:
    return {"model": "fake", "tools": list(tools)}


TRIAGE = agent(
    {"name": "look", "script": {"path": "f/s/lookup@3"}, "inputs": {"path": "f/s/lookup@3"}},
    {"name": "helper", "agent": {"agent": "f/s/helper@2"}},
)


@pytest.fixture
async def pair(store_url: str) -> AsyncIterator[tuple[AsyncWorkspace, AsyncWorkspace]]:
    keyring = Keyring(MasterKey.generate())
    ws = AsyncWorkspace(store_url, user="ada", keyring=keyring, migrate=True)
    other = AsyncWorkspace(store_url, workspace="other", user="ada", keyring=keyring)
    try:
        await ws.add_folder("s")
        for n in (1, 2, 3):
            await ws.write("f/s/lookup", "script", script(n))
        for system in ("one", "two"):
            await ws.write("f/s/helper", "resource", {"model": "fake", "system": system},
                           resource_type="ai_agent")  # fmt: skip
        await ws.write("f/s/triage", "resource", TRIAGE, resource_type="ai_agent")
        await ws.write(
            "f/s/uses", "flow", {"steps": [{"id": "a", "ai_agent": {"agent": "f/s/triage@1"}}]}
        )
        yield ws, other
    finally:
        await ws.close()
        await other.close()


async def test_an_export_pushed_into_an_empty_workspace_keeps_its_pins_working(
    pair: tuple[AsyncWorkspace, AsyncWorkspace], tmp_path: Path
) -> None:
    ws, other = pair
    await pull(ws, tmp_path / "export")
    dry = await push(other, tmp_path / "export", dry_run=True)
    assert dry.problem is None
    plan = await push(other, tmp_path / "export", message="moved")
    assert plan.applied and plan.counts()["create"] == 5  # the folder too
    repins = {change.path: change.repinned for change in plan.items}
    assert repins == {
        "f/s/helper": (),
        "f/s/lookup": (),
        "f/s/triage": ("f/s/lookup@3 -> f/s/lookup@1", "f/s/helper@2 -> f/s/helper@1"),
        "f/s/uses": (),  # triage@1: the version the push writes anyway
    }
    assert plan.to_dict()["items"][2]["repinned"] == list(repins["f/s/triage"])
    stored = (await other.get("f/s/triage")).value
    assert stored["tools"][0]["script"] == {"path": "f/s/lookup@1"}
    assert stored["tools"][0]["inputs"] == {"path": "f/s/lookup@3"}  # a value, not a pin
    assert stored["tools"][1]["agent"] == {"agent": "f/s/helper@1"}
    # The pin runs the content it named: version 3 in `main` is version 1 in `other`.
    inlined = await other.inline_agent(stored)
    assert inlined["tools"][0]["script"]["code"] == script(3)
    assert inlined["tools"][0]["script"]["source_path"] == "f/s/lookup@1"
    # The same directory again changes nothing, there and where it came from.
    again = await push(other, tmp_path / "export")
    assert again.counts() == {"create": 0, "update": 0, "unchanged": 5}
    home = await push(ws, tmp_path / "export")
    assert home.counts()["unchanged"] == 5
    assert all(not change.repinned for change in home.items)
    assert (await ws.get("f/s/triage")).value == TRIAGE


async def test_a_push_follows_an_item_it_updates_and_keeps_pins_the_workspace_holds(
    pair: tuple[AsyncWorkspace, AsyncWorkspace], tmp_path: Path
) -> None:
    ws, other = pair
    await pull(ws, tmp_path / "export")
    await other.add_folder("s")
    await other.write("f/s/lookup", "script", "def main(order_id: str):\n    return 'other'\n")
    await other.write("f/s/helper", "resource", {"model": "fake"}, resource_type="ai_agent")
    await other.write("f/s/helper", "resource", {"model": "fake", "system": "mine"},
                      resource_type="ai_agent")  # fmt: skip
    plan = await push(other, tmp_path / "export")
    triage = next(change for change in plan.items if change.path == "f/s/triage")
    # lookup@3 is not in `other` and the push writes it as version 2; helper@2 is there: kept.
    assert triage.repinned == ("f/s/lookup@3 -> f/s/lookup@2",)
    assert (await other.get("f/s/triage")).value["tools"][1]["agent"] == {"agent": "f/s/helper@2"}


async def test_a_pin_to_what_neither_the_push_nor_the_workspace_holds_is_refused(
    pair: tuple[AsyncWorkspace, AsyncWorkspace], tmp_path: Path
) -> None:
    ws, other = pair
    await pull(ws, tmp_path / "export", flow="f/s/uses")
    (tmp_path / "export" / "f/s/lookup.py").unlink()  # the script stays behind
    with pytest.raises(MissingReferences) as caught:
        await push(other, tmp_path / "export")
    assert caught.value.missing == ["f/s/lookup@3"]
    assert caught.value.context["file"] == "f/s/triage.agent.yaml"
