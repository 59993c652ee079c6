"""The administration screens and the value editors in a real browser.

As ada (an admin): add a user, a group with that user in it, a folder the
group may view, a token shown once then listed and revoked, and the audit
log of all that; edit a variable and a resource (by its type's form and as
JSON), replace a secret without its plaintext ever reaching the page, make
a variable from the folders screen. As bob (a member): the folder `private` stays out
of sight, its item says it is not there, the audit log is for admins.
Everything this module makes has a name of its own (`adm_...`, a random tail).
"""

from __future__ import annotations

import contextlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.e2e.axe import assert_accessible
from tests.e2e.conftest import PASSWORD, UiServer, screenshot, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

REGION = "f/demo/adm_region"
SECRET = "f/demo/adm_secret"
TYPE = "f/demo/adm_type"
RESOURCE = "f/demo/adm_res"
SCHEMA = {
    "type": "object",
    "properties": {"url": {"type": "string"}, "retries": {"type": "integer", "minimum": 0}},
    "required": ["url"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Seeded:
    tail: str
    old_secret: str


@pytest.fixture(scope="module")
def seeded(ui_server: UiServer) -> Seeded:
    """A variable and a secret of this module's own, written through the API."""
    tail = secrets.token_hex(3)
    old = f"sk-adm-old-{secrets.token_hex(8)}"
    writes: list[tuple[str, dict[str, Any]]] = [
        (REGION, {"kind": "variable", "value": "eu-central-1", "summary": "Where adm runs"}),
        (SECRET, {"kind": "variable", "value": old, "secret": True, "summary": "adm's key"}),
        (TYPE, {"kind": "resource_type", "value": SCHEMA}),
        (
            RESOURCE,
            {"kind": "resource", "value": {"url": "http://a"}, "resource_type": TYPE},
        ),
    ]
    with ui_server.client("ada") as client:
        for path, body in writes:
            answer = client.put(f"/api/items/{path}", json=body)
            assert answer.status_code == 200, answer.text
    return Seeded(tail, old)


def test_ada_manages_people_folders_tokens_and_reads_the_audit(
    page: Any, ui_server: UiServer, seeded: Seeded, page_errors: list[str]
) -> None:
    carol, group, folder = f"carol_{seeded.tail}", f"adm_{seeded.tail}", f"adm_{seeded.tail}"
    sign_in(page, "ada")

    # People: add carol, give her a password, put her in a new group.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="People").click()
    expect(page.get_by_role("heading", level=1, name="People")).to_be_visible()
    add_user = page.get_by_role("form", name="Add a user")
    add_user.get_by_label("User name").fill(carol)
    add_user.get_by_role("button", name="Add the user").click()
    row = page.locator(f'tr[data-user="{carol}"]')
    expect(row).to_contain_text("member")
    row.get_by_role("button", name=f"Set the password of {carol}").click()
    row.get_by_label(f"New password for {carol}").fill(PASSWORD)
    row.get_by_role("button", name="Save the password").click()
    expect(row.get_by_role("button", name=f"Set the password of {carol}")).to_be_visible()

    add_group = page.get_by_role("form", name="Add a group")
    add_group.get_by_label("Group name").fill(group)
    add_group.get_by_label("Summary (optional)").fill("adm's readers")
    add_group.get_by_role("button", name="Add the group").click()
    card = page.locator(f'article[data-group="{group}"]')
    expect(card).to_contain_text("No members.")
    card.get_by_label(f"Add a member to {group}").select_option(carol)
    card.get_by_role("button", name=f"Add to {group}").click()
    expect(card.get_by_role("list", name=f"Members of {group}")).to_contain_text(carol)
    expect(row).to_contain_text(group)  # the users list follows
    assert_accessible(page)
    screenshot(page, "people.png")

    # Folders: a new folder, whose viewers are the group.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Folders").click()
    new_folder = page.get_by_role("form", name="Create a folder")
    new_folder.get_by_label("Folder name").fill(folder)
    new_folder.get_by_role("button", name="Create the folder").click()
    folder_card = page.locator(f'article[data-folder="{folder}"]')
    expect(folder_card).to_contain_text("No grants")
    grant = folder_card.get_by_role("form", name=f"Grant a role on f/{folder}")
    grant.get_by_label("User or g/group").fill(f"g/{group}")
    grant.get_by_label("Role").select_option("viewer")
    grant.get_by_role("button", name="Grant").click()
    expect(folder_card.locator(f'tr[data-grantee="g/{group}"]')).to_be_visible()
    expect(folder_card.get_by_label(f"Role of g/{group} on f/{folder}")).to_have_value("viewer")
    with ui_server.client("ada") as client:
        folders = {f["name"]: f for f in client.get("/api/folders").json()}
    assert folders[folder]["roles"] == {f"g/{group}": "viewer"}
    assert_accessible(page)
    screenshot(page, "folders.png")

    # Tokens: made, shown once, working; listed without its text; revoked, refused.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tokens").click()
    name = f"adm-{seeded.tail}"
    made = page.get_by_role("form", name="Make a token")
    made.get_by_label("Token name").fill(name)
    made.get_by_label("Scopes").fill("items:read people:read")
    made.get_by_label("Expires in").select_option(label="7 days")
    made.get_by_role("button", name="Make the token").click()
    expect(page.get_by_text("it will not be shown again")).to_be_visible()
    text = page.get_by_label(f"The token {name}").input_value()
    assert text.startswith("tm_pat_")
    prefix = "_".join(text.split("_")[:3])
    me = httpx.get(f"{ui_server.url}/api/auth/me", headers={"Authorization": f"Bearer {text}"})
    assert me.status_code == 200 and me.json()["scopes"] == ["items:read", "people:read"]
    token_row = page.get_by_role("row").filter(has_text=name)
    expect(token_row).to_contain_text("active")
    expect(token_row).to_contain_text("items:read people:read")
    assert_accessible(page)
    screenshot(page, "tokens.png")
    page.get_by_role("button", name="I have copied it").click()
    expect(page.get_by_label(f"The token {name}")).to_have_count(0)
    assert text not in page.content()
    page.reload()
    expect(token_row).to_contain_text("active")
    assert text.split("_")[3] not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    token_row.get_by_role("button", name=f"Revoke {name}").click()
    expect(token_row).to_contain_text("revoked")
    expect(token_row.get_by_role("button")).to_have_count(0)
    refused = httpx.get(f"{ui_server.url}/api/auth/me", headers={"Authorization": f"Bearer {text}"})
    assert refused.status_code == 401

    # The audit log, filtered by actor, holds all of it.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit").click()
    filters = page.get_by_role("form", name="Filter the audit log")
    filters.get_by_label("Actor").fill("ada")
    filters.get_by_role("button", name="Filter").click()
    log = page.get_by_role("table", name="Audit log")
    expect(log).to_be_visible()
    more = page.get_by_role("button", name="Load more")
    while more.count():
        more.click()
        page.wait_for_function("() => !document.querySelector('button.load-more:disabled')")
    actors = log.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert actors and set(actors) == {"ada"}
    for action, words in [
        ("user.add", [carol]),
        ("user.password", [carol]),
        ("group.add", [group]),
        ("group.member", [group, carol]),
        ("folder.add", [f"f/{folder}"]),
        ("grant.set", [f"f/{folder}", f"g/{group}", "viewer"]),
        ("token.create", [prefix, "people:read"]),
        ("token.revoke", [prefix]),
    ]:
        rows = log.locator(f'tr[data-action="{action}"]')
        for word in words:
            rows = rows.filter(has_text=word)
        expect(rows.first).to_be_visible()
    # Narrowed to one action, only that action is listed.
    filters.get_by_label("Action").fill("grant.set")
    filters.get_by_role("button", name="Filter").click()
    expect(log.locator("tbody tr").first).to_be_visible()
    actions = set(log.locator("tbody tr td:nth-child(4)").all_inner_texts())
    assert actions == {"grant.set"}
    assert_accessible(page)
    screenshot(page, "audit.png")
    assert page_errors == []


def test_bob_sees_no_private_folder_and_no_audit(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    sign_in(page, "bob")
    page.goto("/workspace")
    nav = page.get_by_role("navigation", name="Folders")
    expect(nav.get_by_role("link", name="Everything")).to_be_visible()
    expect(nav.get_by_role("link", name="f/private/")).to_have_count(0)
    expect(page.get_by_role("heading", name="All items")).to_be_visible()
    expect(page.get_by_text("f/private/notes")).to_have_count(0)

    page.goto("/folders")
    expect(page.get_by_role("heading", level=1, name="Folders")).to_be_visible()
    expect(page.locator('article[data-folder="private"]')).to_have_count(0)
    expect(page.get_by_role("form", name="Create a folder")).to_have_count(0)
    with ui_server.client("bob") as client:
        assert "private" not in {f["name"] for f in client.get("/api/folders").json()}

    page.goto("/workspace/f/private/notes")
    expect(page.get_by_role("alert")).to_contain_text("No item at f/private/notes")
    assert "only for ada" not in page.content()

    page.goto("/audit")
    expect(page.get_by_text("Only workspace admins read the audit log.")).to_be_visible()
    expect(page.get_by_role("table", name="Audit log")).to_have_count(0)

    page.goto("/people")
    users = page.get_by_role("table", name="Users")
    expect(users.locator('tr[data-user="ada"]')).to_contain_text("admin")
    expect(page.get_by_role("form", name="Add a user")).to_have_count(0)
    changes = re.compile("^(Disable|Make|Set the password)")
    expect(page.get_by_role("button", name=changes)).to_have_count(0)
    assert_accessible(page)
    assert page_errors == []


def test_ada_edits_a_variable_replaces_a_secret_unseen_and_makes_one(
    page: Any, ui_server: UiServer, seeded: Seeded, page_errors: list[str]
) -> None:
    answers: list[str] = []

    def keep(response: Any) -> None:
        if "/api/" in response.url and response.request.method in ("GET", "PUT"):
            with contextlib.suppress(PlaywrightError):  # a body no longer there to read
                answers.append(response.text())

    page.on("response", keep)
    sign_in(page, "ada")

    # The variable: edited as text, saved, shown.
    page.goto(f"/workspace/{REGION}")
    expect(page.get_by_role("heading", level=1, name=REGION)).to_be_visible()
    page.get_by_role("button", name="Edit").click()
    value = page.get_by_label(f"Value of {REGION}")
    expect(value).to_have_value("eu-central-1")
    value.fill("eu-north-1")
    screenshot(page, "variable-editor.png")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_label(f"Value of {REGION}")).to_have_count(0)
    expect(page.locator("pre.code")).to_have_text("eu-north-1")
    with ui_server.client("ada") as client:
        stored = client.get(f"/api/items/{REGION}").json()
    assert stored["value"] == "eu-north-1" and stored["summary"] == "Where adm runs"

    # Someone else writes it while it is open: the save is refused, the text stays.
    page.get_by_role("button", name="Edit").click()
    page.get_by_label(f"Value of {REGION}").fill("ap-south-1")
    with ui_server.client("ada") as client:
        body = {"kind": "variable", "value": "us-east-1", "summary": "Where adm runs"}
        assert client.put(f"/api/items/{REGION}", json=body).status_code == 200
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("since you opened it")
    expect(page.get_by_label(f"Value of {REGION}")).to_have_value("ap-south-1")
    page.get_by_role("button", name="Cancel").click()

    # The secret: replaced through an empty password field; neither plaintext reaches the page.
    new = f"sk-adm-new-{secrets.token_hex(8)}"
    page.goto(f"/workspace/{SECRET}")
    expect(page.get_by_text("A secret: its value is never shown.")).to_be_visible()
    page.get_by_role("button", name="Replace the secret").click()
    field = page.get_by_label(f"New value of {SECRET}")
    expect(field).to_have_attribute("type", "password")
    expect(field).to_have_value("")
    field.fill(new)
    assert new not in page.content() and seeded.old_secret not in page.content()
    assert_accessible(page)
    page.get_by_role("button", name="Save the new secret").click()
    expect(page.get_by_label(f"New value of {SECRET}")).to_have_count(0)
    expect(page.get_by_text("A secret: its value is never shown.")).to_be_visible()
    html = page.content()
    assert new not in html and seeded.old_secret not in html
    assert answers and not [a for a in answers if new in a or seeded.old_secret in a]
    # The API never answers a secret: the workspace itself reveals that it changed.
    revealed = ui_server.ws.get(SECRET, reveal=True)
    assert revealed.value == new and revealed.secret and revealed.summary == "adm's key"

    # A new variable, from the folders screen's form: it opens once written.
    fresh = f"f/demo/adm_new_{seeded.tail}"
    page.goto("/folders")
    form = page.get_by_role("form", name="New variable or resource")
    form.get_by_label("Path").fill(fresh)
    form.get_by_label("Kind").select_option("variable")
    form.get_by_label("Value").fill("made here")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", level=1, name=fresh)).to_be_visible()
    expect(page.locator("pre.code")).to_have_text("made here")
    # The same path again is refused, not overwritten.
    page.goto("/folders")
    form.get_by_label("Path").fill(fresh)
    form.get_by_label("Value").fill("again")
    form.get_by_role("button", name="Create").click()
    expect(form.get_by_role("alert")).to_contain_text(f"There is already an item at {fresh}")
    assert ui_server.ws.get(fresh).value == "made here"
    assert page_errors == []


def test_ada_edits_a_resource_by_its_types_form_and_as_json(
    page: Any, ui_server: UiServer, seeded: Seeded, page_errors: list[str]
) -> None:
    sign_in(page, "ada")
    page.goto(f"/workspace/{RESOURCE}")
    expect(page.get_by_role("heading", level=1, name=RESOURCE)).to_be_visible()
    page.get_by_role("button", name="Edit").click()
    editor = page.get_by_role("form", name=f"Edit {RESOURCE}")
    expect(editor).to_contain_text(f"Resource type: {TYPE}")
    # The type is a workspace item: its schema gives the form.
    editor.get_by_label("url").fill("http://b")
    editor.get_by_label("retries").fill("3")
    assert_accessible(page)
    editor.get_by_role("button", name="Save as v2").click()
    expect(editor).to_have_count(0)
    with ui_server.client("ada") as client:
        stored = client.get(f"/api/items/{RESOURCE}").json()
    assert stored["version"] == 2 and stored["value"] == {"url": "http://b", "retries": 3}
    assert stored["resource_type"] == TYPE

    # As JSON, a value the type refuses: the server says why, the text stays.
    page.get_by_role("button", name="Edit").click()
    editor.get_by_role("button", name="JSON").click()
    code = editor.get_by_label(f"Value of {RESOURCE}")
    code.fill('{"url": "http://c", "colour": "red"}')
    editor.get_by_role("button", name="Save as v3").click()
    expect(editor.get_by_role("alert")).to_contain_text("colour")
    expect(code).to_contain_text('"colour": "red"')
    with ui_server.client("ada") as client:
        assert client.get(f"/api/items/{RESOURCE}").json()["version"] == 2
    assert page_errors == []
