"""Users, groups, folders and grants over HTTP (scope domain `people`).

Each route is one `AsyncWorkspace` people operation as the caller: the
workspace decides who may (most changes need a workspace admin; a folder's
summary and grants its admins). A password is taken, never answered.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from tidemill.server._caller import SignedIn, requires
from tidemill.server.routes._people_models import (
    FolderChangeIn,
    FolderIn,
    FolderOut,
    GrantIn,
    GrantOut,
    GroupIn,
    GroupOut,
    PasswordIn,
    UserChangeIn,
    UserIn,
    UserOut,
)

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["people"], dependencies=[requires("people")])


@router.get("/users", response_model=list[UserOut])
async def list_users(who: SignedIn) -> list[UserOut]:
    """Every user of the workspace (any active user may list them, to share with)."""
    who.require("people", "read")
    return [UserOut.of(u) for u in await who.ws.users()]


@router.post("/users", response_model=UserOut, status_code=201)
async def add_user(body: UserIn, who: SignedIn) -> UserOut:
    """Add a user (workspace admins); it signs in once it has a password or a token."""
    who.require("people", "write")
    return UserOut.of(await who.ws.add_user(body.name, admin=body.admin))


@router.patch("/users/{name}", response_model=UserOut)
async def change_user(name: str, body: UserChangeIn, who: SignedIn) -> UserOut:
    """Make a user an admin or not, enabled or disabled (workspace admins; never the last admin)."""
    who.require("people", "write")
    return UserOut.of(await who.ws.set_user(name, admin=body.admin, disabled=body.disabled))


@router.put("/users/{name}/password", status_code=204)
async def set_password(name: str, body: PasswordIn, who: SignedIn) -> Response:
    """Set a user's password: one's own, or anyone's for a workspace admin."""
    who.require("people", "write")
    await who.ws.set_password(name, body.password)
    return Response(status_code=204)


@router.get("/groups", response_model=list[GroupOut])
async def list_groups(who: SignedIn) -> list[GroupOut]:
    """Every group, with its members."""
    who.require("people", "read")
    return [GroupOut.of(g) for g in await who.ws.groups()]


@router.post("/groups", response_model=GroupOut, status_code=201)
async def add_group(body: GroupIn, who: SignedIn) -> GroupOut:
    """Add a group (workspace admins); grants name it `g/<name>`."""
    who.require("people", "write")
    return GroupOut.of(await who.ws.add_group(body.name, summary=body.summary))


@router.delete("/groups/{name}", status_code=204)
async def delete_group(name: str, who: SignedIn) -> Response:
    """Delete a group, its memberships and its grants (workspace admins)."""
    who.require("people", "write")
    await who.ws.delete_group(name)
    return Response(status_code=204)


@router.put("/groups/{name}/members/{user}", status_code=204)
async def add_member(name: str, user: str, who: SignedIn) -> Response:
    """Add a user to a group (workspace admins); adding a member twice is no error."""
    who.require("people", "write")
    await who.ws.set_member(name, user, member=True)
    return Response(status_code=204)


@router.delete("/groups/{name}/members/{user}", status_code=204)
async def remove_member(name: str, user: str, who: SignedIn) -> Response:
    """Remove a user from a group (workspace admins)."""
    who.require("people", "write")
    await who.ws.set_member(name, user, member=False)
    return Response(status_code=204)


@router.get("/folders", response_model=list[FolderOut])
async def list_folders(who: SignedIn) -> list[FolderOut]:
    """The folders the caller may read something in (every one, for an admin)."""
    who.require("people", "read")
    return [FolderOut.of(f) for f in await who.ws.folders()]


@router.post("/folders", response_model=FolderOut, status_code=201)
async def add_folder(body: FolderIn, who: SignedIn) -> FolderOut:
    """Create a folder (workspace admins), with its first grants."""
    who.require("people", "write")
    return FolderOut.of(await who.ws.add_folder(body.name, summary=body.summary, roles=body.roles))


@router.patch("/folders/{name}", response_model=FolderOut)
async def change_folder(name: str, body: FolderChangeIn, who: SignedIn) -> FolderOut:
    """Change a folder's summary (its admins)."""
    who.require("people", "write", f"f/{name}")
    return FolderOut.of(await who.ws.set_folder(name, summary=body.summary))


@router.put("/grants", response_model=GrantOut)
async def grant(body: GrantIn, who: SignedIn) -> GrantOut:
    """Give a user or `g/<group>` a role on a folder or an item (role null revokes it)."""
    who.require("people", "write", body.target)
    await who.ws.grant(body.target, body.grantee, body.role)
    return GrantOut(target=body.target, grantee=body.grantee, role=body.role)
