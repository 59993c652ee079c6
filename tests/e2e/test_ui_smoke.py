"""The web UI served by a real `tidemill server`: its page, its policy, signing in in Chromium."""

from __future__ import annotations

import http.client
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from tests.e2e.conftest import PASSWORD, UiServer

pytest.importorskip("playwright")
from playwright.sync_api import expect


def nonce_of(answer: httpx.Response) -> str:
    csp = answer.headers["content-security-policy"]
    found = re.search(r"script-src 'self' 'nonce-([^']+)'", csp)
    assert found, csp
    return found[1]


@pytest.mark.parametrize("path", ["/", "/runs/abc", "/sign-in", "/workspace/f/demo/hello"])
def test_the_server_answers_the_index_for_every_client_route(
    ui_server: UiServer, path: str
) -> None:
    answer = httpx.get(ui_server.url + path)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-frame-options"] == "DENY"
    nonce = nonce_of(answer)
    scripts = re.findall(r"<script\b[^>]*>", answer.text)
    assert scripts, "the bundle's index loads its scripts"
    assert all(f'nonce="{nonce}"' in tag for tag in scripts), scripts
    assert nonce != nonce_of(httpx.get(ui_server.url + path))


def test_the_bundles_assets_are_served_and_cached(ui_server: UiServer) -> None:
    index = httpx.get(ui_server.url + "/").text
    assets = re.findall(r'(?:src|href)="(/assets/[^"]+)"', index)
    assert any(a.endswith(".js") for a in assets), index
    for asset in assets:
        answer = httpx.get(ui_server.url + asset)
        assert answer.status_code == 200, asset
        assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
        if asset.endswith(".js"):
            assert answer.headers["content-type"].startswith("text/javascript")


def test_the_api_keeps_its_paths(ui_server: UiServer) -> None:
    unknown = httpx.get(ui_server.url + "/api/nothing-here")
    assert unknown.status_code == 404
    assert unknown.json()["type"] == "NotFound"
    assert httpx.get(ui_server.url + "/health").json()["status"] == "ok"
    assert httpx.post(ui_server.url + "/runs").status_code == 405


@pytest.mark.parametrize(
    "raw", ["/assets/../../_app.py", "/assets/%2e%2e/%2e%2e/_app.py", "/assets/..%2f_ui.py"]
)
def test_a_path_out_of_the_bundle_is_refused(ui_server: UiServer, raw: str) -> None:
    where = urlsplit(ui_server.url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    try:
        connection.request("GET", raw)  # as sent: no client resolves the `..` first
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    assert answer.status == 404, body
    assert b"create_app" not in body


def test_signing_in_shows_the_runs(page: Any, page_errors: list[str]) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/sign-in"))
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="Runs")).to_be_visible()
    nav = page.get_by_role("navigation").filter(has=page.get_by_role("link", name="Approvals"))
    for link in ("Runs", "Approvals", "Workspace"):
        expect(nav.get_by_role("link", name=link, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.goto("/runs/not-a-run")  # a deep link, loaded afresh: still signed in
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    assert page_errors == []


def test_a_wrong_password_says_so(page: Any, page_errors: list[str]) -> None:
    page.goto("/sign-in")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("not her password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    expect(page.get_by_role("alert")).not_to_be_empty()
    expect(page).to_have_url(re.compile(r"/sign-in"))
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page_errors == []


def test_an_inline_script_is_blocked_by_the_policy(page: Any, page_errors: list[str]) -> None:
    """The page's CSP is in force: a script without the nonce does not run (and is reported)."""
    page.goto("/sign-in")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.__injected = true'; document.body.append(s); }"
    )
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    for _ in range(100):  # the violation is reported a moment later
        if any("CSP violation: script-src" in error for error in page_errors):
            break
        page.wait_for_timeout(50)
    assert page.evaluate("() => window.__injected === undefined")
    assert any("CSP violation: script-src" in error for error in page_errors), page_errors
