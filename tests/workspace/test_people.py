"""Users, groups, folders and grants; the last admin; the audit log."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.workspace.conftest import Team

from tidemill.errors import ConfigurationError, ItemNotFound, PermissionDenied, WorkspaceError
from tidemill.workspace import AsyncWorkspace, Workspace


async def test_the_first_user_is_the_first_admin(ws: AsyncWorkspace) -> None:
    me = await ws.whoami()
    assert (me.name, me.is_admin, me.disabled) == ("ada", True, False)
    created = await ws.audit(action="workspace.create")
    assert [(e.actor, e.details) for e in created] == [("ada", {"first_admin": "ada"})]
    # Anyone else must be added first.
    stranger = AsyncWorkspace(ws.store, workspace=ws.name, user="eve")
    with pytest.raises(PermissionDenied, match="eve is not a user"):
        await stranger.whoami()


async def test_users(ws: AsyncWorkspace) -> None:
    bob = await ws.add_user("bob")
    assert (bob.name, bob.is_admin, bob.disabled, bob.groups) == ("bob", False, False, ())
    await ws.add_user("cat", admin=True)
    assert [(u.name, u.is_admin) for u in await ws.users()] == [
        ("ada", True),
        ("bob", False),
        ("cat", True),
    ]
    with pytest.raises(WorkspaceError, match="already a user 'bob'"):
        await ws.add_user("bob")
    with pytest.raises(ConfigurationError, match="not a valid user name"):
        await ws.add_user("Bob")
    changed = await ws.set_user("bob", admin=True)
    assert changed.is_admin
    assert not (await ws.set_user("bob", admin=False)).is_admin
    with pytest.raises(ItemNotFound):
        await ws.set_user("nobody", admin=True)
    as_bob = await ws.acting_as("bob")
    with pytest.raises(PermissionDenied):
        await as_bob.add_user("dee")
    with pytest.raises(PermissionDenied):
        await as_bob.set_user("bob", admin=True)
    with pytest.raises(ItemNotFound):
        await ws.acting_as("nobody")


async def test_the_last_admin_stays(ws: AsyncWorkspace) -> None:
    with pytest.raises(WorkspaceError, match="last active admin"):
        await ws.set_user("ada", admin=False)
    with pytest.raises(WorkspaceError, match="last active admin"):
        await ws.set_user("ada", disabled=True)
    # A disabled admin does not count.
    await ws.add_user("bob", admin=True)
    await ws.set_user("bob", disabled=True)
    with pytest.raises(WorkspaceError, match="last active admin"):
        await ws.set_user("ada", admin=False)
    await ws.set_user("bob", disabled=False)
    await ws.set_user("ada", admin=False)  # bob is one now
    assert not (await ws.whoami()).is_admin
    with pytest.raises(PermissionDenied):  # so she may not act as bob any more
        await ws.acting_as("bob")
    assert [u.name for u in await ws.users() if u.is_admin] == ["bob"]


async def test_groups(ws: AsyncWorkspace) -> None:
    await ws.add_user("bob")
    group = await ws.add_group("ops", summary="Operations")
    assert (group.name, group.summary, group.members) == ("ops", "Operations", ())
    with pytest.raises(WorkspaceError, match="already a group 'ops'"):
        await ws.add_group("ops")
    await ws.set_member("ops", "bob")
    await ws.set_member("ops", "ada")
    await ws.set_member("ops", "bob")  # twice is once
    assert [(g.name, g.members) for g in await ws.groups()] == [("ops", ("ada", "bob"))]
    assert (await (await ws.acting_as("bob")).whoami()).groups == frozenset({"ops"})
    await ws.set_member("ops", "bob", member=False)
    assert [g.members for g in await ws.groups()] == [("ada",)]
    with pytest.raises(ItemNotFound):
        await ws.set_member("nope", "bob")
    with pytest.raises(ItemNotFound):
        await ws.set_member("ops", "nobody")
    await ws.delete_group("ops")
    assert await ws.groups() == []
    with pytest.raises(ItemNotFound):
        await ws.delete_group("ops")


async def test_folders_and_grants(ws: AsyncWorkspace) -> None:
    await ws.add_user("bob")
    await ws.add_group("ops")
    folder = await ws.add_folder("team", summary="Team", roles={"bob": "writer", "g/ops": "viewer"})
    assert (folder.name, folder.summary, folder.created_by) == ("team", "Team", "ada")
    assert folder.roles == {"bob": "writer", "g/ops": "viewer"}
    with pytest.raises(WorkspaceError, match="already a folder 'team'"):
        await ws.add_folder("team")
    await ws.grant("f/team", "bob", "admin")
    await ws.grant("f/team", "g/ops", None)
    assert (await ws.folders())[0].roles == {"bob": "admin"}
    bob = await ws.acting_as("bob")
    assert (await bob.set_folder("team", summary="Bob's")).summary == "Bob's"
    assert [f.name for f in await bob.folders()] == ["team"]
    # Grantees and targets must exist; roles must be roles.
    with pytest.raises(ItemNotFound, match="no user 'nobody'"):
        await ws.grant("f/team", "nobody", "viewer")
    with pytest.raises(ItemNotFound, match="no group 'nope'"):
        await ws.grant("f/team", "g/nope", "viewer")
    with pytest.raises(ItemNotFound, match="no folder 'gone'"):
        await ws.grant("f/gone", "bob", "viewer")
    with pytest.raises(ConfigurationError) as caught:
        await ws.grant("f/team", "bob", "owner")  # type: ignore[arg-type]
    assert "'owner' is not a role" in str(caught.value)
    assert "viewer, writer, admin" in str(caught.value)
    with pytest.raises(ConfigurationError):
        await ws.grant("f/Team", "bob", "viewer")
    assert (await ws.folders())[0].roles == {"bob": "admin"}  # nothing changed


async def test_a_failed_add_folder_leaves_nothing(ws: AsyncWorkspace) -> None:
    with pytest.raises(ItemNotFound):
        await ws.add_folder("team", roles={"nobody": "viewer"})
    with pytest.raises(ConfigurationError, match="not a role"):
        await ws.add_folder("team", roles={"ada": "boss"})  # type: ignore[dict-item]
    assert await ws.folders() == []
    assert (await ws.add_folder("team")).roles == {}


async def test_folders_lists_only_folders_reached(team: Team) -> None:
    await team.ada.add_folder("ops")
    assert [f.name for f in await team.ada.folders()] == ["ops", "team"]
    assert [f.name for f in await team.vic.folders()] == ["team"]
    assert await team.max.folders() == []
    # An item grant in a folder reaches the folder.
    await team.ada.write("f/ops/runbook", "variable", "restart it")
    await team.ada.grant("f/ops/runbook", "max", "viewer")
    assert [f.name for f in await team.max.folders()] == ["ops"]


async def test_a_grant_on_a_users_item_reaches_no_folder(team: Team) -> None:
    """A grant on `u/<user>/...` is about that user's item, not a folder named like the user."""
    await team.ada.add_user("ops")
    await team.ada.add_folder("ops", summary="Nobody but admins")
    as_ops = await team.ada.acting_as("ops")
    await as_ops.write("u/ops/notes", "variable", "mine")
    await as_ops.grant("u/ops/notes", "max", "viewer")
    assert (await team.max.get("u/ops/notes")).value == "mine"
    assert await team.max.folders() == []


async def test_audit_filters_and_pages(team: Team) -> None:
    ada = team.ada
    await team.olga.write("f/team/region", "variable", "us-east-1", message="move")
    await team.olga.write("f/team/notes", "variable", "n")
    await ada.write("u/ada/x", "variable", "x")
    everything = await ada.audit(limit=1000)
    ids = [e.id for e in everything]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert everything[0].action == "workspace.create"
    by_olga = await ada.audit(actor="olga")
    assert [(e.action, e.path) for e in by_olga] == [
        ("item.write", "f/team/region"),
        ("item.write", "f/team/notes"),
    ]
    assert by_olga[0].details == {"kind": "variable", "version": 0, "message": "move"}
    writes = await ada.audit(action="item.write")
    assert all(e.action == "item.write" for e in writes) and len(writes) == 9
    assert [e.path for e in await ada.audit(path="f/team/region")] == ["f/team/region"] * 2
    assert {e.path for e in await ada.audit(path="u/")} == {"u/ada/x"}
    assert [e.actor for e in await ada.audit(actor="olga", path="f/team/notes")] == ["olga"]
    # Pages by `after`.
    pages: list[int] = []
    after = 0
    while page := await ada.audit(after=after, limit=7):
        assert len(page) <= 7
        pages += [e.id for e in page]
        after = page[-1].id
    assert pages == ids
    assert await ada.audit(after=ids[-1]) == []
    for other in (team.olga, team.vic, team.max):
        with pytest.raises(PermissionDenied):
            await other.audit()


def test_people_with_the_blocking_workspace(tmp_path: Path) -> None:
    with Workspace(f"sqlite:///{tmp_path}/t.db", user="ada") as ws:
        ws.add_user("bob")
        ws.add_group("ops")
        ws.set_member("ops", "bob")
        ws.add_folder("team", roles={"g/ops": "writer"})
        bob = ws.acting_as("bob")
        assert bob.write("f/team/x", "variable", "by bob").updated_by == "bob"
        with pytest.raises(PermissionDenied):
            bob.add_user("cat")
        assert [e.actor for e in ws.audit(action="item.write")] == ["bob"]
