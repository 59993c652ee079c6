"""What a run of a path runs: the deployed flow, or a preview of the caller's drafts."""

from __future__ import annotations

import pytest

from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey

HELLO = "def main(name: str):\n    return 'hello ' + name\n"
HEY = "def main(name: str):\n    return 'hey ' + name\n"
FLOW = {"steps": [{"id": "greet", "script": {"path": "f/ops/greet"}, "inputs": {"name": "x"}}]}


def _code(plan_flow: object) -> str:
    from tidemill.flows import Flow

    assert isinstance(plan_flow, Flow)
    script = plan_flow.find("greet").script
    assert script is not None and script.code is not None
    return script.code


async def test_a_draft_of_an_included_script_alone_is_previewed_in_its_flow(
    store_url: str,
) -> None:
    ada = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await ada.add_user("bob")
        await ada.add_folder("ops", roles={"bob": "writer"})
        await ada.write("f/ops/greet", "script", HELLO)
        await ada.write("f/ops/hello", "flow", FLOW)
        bob = await ada.acting_as("bob")
        await bob.save_draft("f/ops/greet", "script", HEY)

        preview = await bob.run_plan("f/ops/hello", draft=True)
        assert _code(preview.flow) == HEY
        assert preview.source["items"] == {"f/ops/greet": 0}
        assert preview.source["flow_draft"] is False
        assert preview.source["version"] == 1

        # What everyone else runs, and what bob runs without asking for a preview: deployed.
        for plan in (
            await bob.run_plan("f/ops/hello"),
            await ada.run_plan("f/ops/hello", draft=True),
        ):
            assert _code(plan.flow) == HELLO
            assert plan.source["items"] == {"f/ops/greet": 1}
    finally:
        await ada.close()


async def test_resolving_in_the_callers_transaction_asks_as_resolve_does(store_url: str) -> None:
    from tidemill.errors import UnresolvedReference

    ada = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await ada.add_user("bob")
        await ada.add_user("carol")
        await ada.add_folder("ops", roles={"bob": "viewer"})
        await ada.write("f/ops/token", "variable", "s3cret-token", secret=True)
        bob, carol = await ada.acting_as("bob"), await ada.acting_as("carol")
        value = {"token": "$var:f/ops/token"}
        found = await ada.store.transact(lambda tx: bob.resolve_in(tx, value, purpose="test"))
        assert found is not None
        assert found.value == {"token": "s3cret-token"} and found.secrets == {"s3cret-token"}
        with pytest.raises(UnresolvedReference) as refused:
            await ada.store.transact(lambda tx: carol.resolve_in(tx, value))
        assert "s3cret-token" not in str(refused.value)
        decrypts = await ada.audit(action="secret.decrypt")
        assert [(row.actor, row.details["purpose"]) for row in decrypts] == [("bob", "test")]
    finally:
        await ada.close()
