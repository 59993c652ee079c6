"""Shared fixtures of the workspace tests: a store on each backend, a team workspace.

`team` builds the workspace the permission and secret tests act on:

- `ada`, the first user: a workspace admin;
- `olga`, the admin of folder `f/team` (a folder grant);
- `vic`, a viewer of `f/team` through the group `g/readers`;
- `max`, a plain member: no role on `f/team`, but his own `u/max/`.

`f/team` holds a script (two versions), a flow that uses the script by path,
an `openai` resource whose `api_key` is `$var:f/team/key`, that secret
variable, and a plain variable.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from tests.conftest import POSTGRES_ENV, drop_postgres_schema, unique_schema

from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey

SCRIPT = "'''Say hello.'''\ndef main(name: str):\n    return 'hello ' + name\n"
SCRIPT_V2 = "'''Say hello, loudly.'''\ndef main(name: str):\n    return 'HELLO ' + name\n"
FLOW = {
    "summary": "Greet someone",
    "steps": [{"id": "greet", "script": {"path": "f/team/script"}, "inputs": {"name": "x"}}],
}
RESOURCE = {"api_key": "$var:f/team/key"}


def open_workspace(
    url: str, user: str = "ada", *, keyring: Keyring | None = None, workspace: str = "default"
) -> AsyncWorkspace:
    """A workspace on `url` as `user`, migrating the store (PostgreSQL too)."""
    return AsyncWorkspace(url, workspace=workspace, user=user, keyring=keyring, migrate=True)


def new_workspace_name() -> str:
    """A workspace name no other test uses."""
    return f"w{uuid.uuid4().hex[:16]}"


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def shared_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store URL on each backend, shared by the tests of this folder.

    Each test takes a workspace of its own in it (`new_workspace_name`):
    every workspace query is by workspace, so they do not see each other,
    and PostgreSQL builds its schema once rather than once a test. A test
    about the store as a whole (its files, its tables) uses `store_url`.
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('workspace')}/tidemill.db"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
    schema = unique_schema()
    try:
        yield f"{base}?schema={schema}"
    finally:
        drop_postgres_schema(base, schema)


@pytest.fixture
def keyring() -> Keyring:
    """A fresh master key for one test."""
    return Keyring(MasterKey.generate())


@pytest.fixture
async def ws(shared_store: str, keyring: Keyring) -> AsyncIterator[AsyncWorkspace]:
    """An empty workspace of its own on each backend, as its first admin `ada`."""
    workspace = open_workspace(shared_store, keyring=keyring, workspace=new_workspace_name())
    try:
        yield workspace
    finally:
        await workspace.close()


@dataclass
class Team:
    """The team workspace, as each of its principals."""

    url: str
    workspace: str
    keyring: Keyring
    secret: str
    ada: AsyncWorkspace
    olga: AsyncWorkspace
    vic: AsyncWorkspace
    max: AsyncWorkspace

    def as_(self, name: str) -> AsyncWorkspace:
        """The workspace as `name`."""
        found: AsyncWorkspace = getattr(self, name)
        return found


async def build_team(ada: AsyncWorkspace, secret: str) -> None:
    """Fill an empty workspace (as its admin) with the team's users, folder and items."""
    for name in ("olga", "vic", "max"):
        await ada.add_user(name)
    await ada.add_group("readers", summary="Read the team folder")
    await ada.set_member("readers", "vic")
    await ada.add_folder("team", summary="The team", roles={"olga": "admin", "g/readers": "viewer"})
    await ada.write("f/team/script", "script", SCRIPT, message="first")
    await ada.write("f/team/script", "script", SCRIPT_V2, message="second")
    await ada.write("f/team/flow", "flow", FLOW)
    await ada.write("f/team/key", "variable", secret, secret=True)
    await ada.write("f/team/openai", "resource", RESOURCE, resource_type="openai")
    await ada.write("f/team/region", "variable", "eu-west-1")


@pytest.fixture
async def team(shared_store: str, keyring: Keyring) -> AsyncIterator[Team]:
    """The team workspace, a workspace of its own on each backend (see the module docstring)."""
    secret = f"sk-PLAINTEXT-{uuid.uuid4().hex}"
    name = new_workspace_name()
    ada = open_workspace(shared_store, keyring=keyring, workspace=name)
    try:
        await build_team(ada, secret)
        others = [await ada.acting_as(who) for who in ("olga", "vic", "max")]
        yield Team(shared_store, name, keyring, secret, ada, *others)
    finally:
        await ada.close()
