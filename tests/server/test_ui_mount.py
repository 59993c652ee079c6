"""The web UI's mount: the bundle's page for every client route, its assets, and the API untouched.

A fake bundle in a temporary folder stands for `_ui_dist/` (`ServerConfig.ui_dir`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tidemill.server import ServerConfig, create_app
from tidemill.server._ui import UI_DIST

INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tidemill</title>
<script type="module" crossorigin src="/assets/index-abc123.js"></script>
<link rel="stylesheet" crossorigin href="/assets/index-abc123.css">
</head><body><div id="root"></div><script>window.x = 1</script></body></html>
"""
API_CSP = "default-src 'none'; frame-ancestors 'none'"


def bundle(root: Path) -> Path:
    dist = root / "_ui_dist"
    (dist / "assets" / "fonts").mkdir(parents=True)
    (dist / "index.html").write_text(INDEX)
    (dist / "assets" / "index-abc123.js").write_text("console.log('hi')\n")
    (dist / "assets" / "index-abc123.css").write_text("body { margin: 0 }\n")
    (dist / "assets" / "fonts" / "a.woff2").write_bytes(b"wOF2")
    (dist / "favicon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (root / "secret.txt").write_text("not for the web")
    return dist


def make_app(tmp_path: Path, dist: Path | None) -> FastAPI:
    db = f"sqlite:///{tmp_path}/t.db"
    return create_app(ServerConfig(db=db, worker=False, ui_dir=dist))


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    """A bundle of a test's own (to change)."""
    return bundle(tmp_path)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A server on a bundle that no test changes."""
    root = tmp_path_factory.mktemp("ui")
    with TestClient(make_app(root, bundle(root))) as client:
        yield client


@pytest.fixture
def own_client(tmp_path: Path, dist: Path) -> Iterator[TestClient]:
    """A server on `dist`."""
    with TestClient(make_app(tmp_path, dist)) as client:
        yield client


def nonce_of(csp: str) -> str:
    found = re.search(r"script-src 'self' 'nonce-([A-Za-z0-9_-]{16,})'", csp)
    assert found, csp
    return found[1]


def raw_get(app: FastAPI, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """GET `raw` exactly as sent (an HTTP client would resolve `..` before sending it)."""
    path = unquote(raw.decode())
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": raw, "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": None,
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("path", ["/", "/sign-in", "/runs", "/runs/abc", "/workspace/f/x/y", "/x"])
def test_every_client_route_answers_the_index_with_a_fresh_nonce(
    client: TestClient, path: str
) -> None:
    answer = client.get(path)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["cache-control"] == "no-store"
    csp = answer.headers["content-security-policy"]
    nonce = nonce_of(csp)
    for part in (
        "default-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
        "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'",
    ):  # fmt: skip
        assert part in csp.split("; "), part
    scripts = re.findall(r"<script[^>]*>", answer.text)
    assert len(scripts) == 2
    assert all(f'nonce="{nonce}"' in tag for tag in scripts), scripts
    assert '<div id="root">' in answer.text
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_the_nonce_differs_on_every_request(client: TestClient) -> None:
    nonces = {nonce_of(client.get("/runs").headers["content-security-policy"]) for _ in range(5)}
    assert len(nonces) == 5


def test_assets_are_served_with_their_types_and_cached_for_good(client: TestClient) -> None:
    for path, kind, body in (
        ("/assets/index-abc123.js", "text/javascript", b"console.log('hi')\n"),
        ("/assets/index-abc123.css", "text/css", b"body { margin: 0 }\n"),
        ("/assets/fonts/a.woff2", "font/woff2", b"wOF2"),
    ):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].split(";")[0] == kind
        assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.content == body
    favicon = client.get("/favicon.svg")
    assert favicon.headers["content-type"].startswith("image/svg+xml")
    assert favicon.headers["cache-control"] == "no-cache"


def test_a_missing_asset_is_a_404_not_the_index(client: TestClient) -> None:
    for path in ("/assets/index-old.js", "/assets/", "/assets/fonts"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["type"] == "NotFound"


def test_the_api_paths_stay_the_apis(client: TestClient) -> None:
    for method, path in (("GET", "/api/unknown"), ("POST", "/api/unknown"), ("GET", "/v1/x")):
        answer = client.request(method, path)
        assert answer.status_code in (401, 404), (method, path)
        assert answer.headers["content-type"] == "application/json", (method, path)
        assert "<html" not in answer.text
    assert client.get("/api/unknown").json()["type"] == "NotFound"
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/api/auth/me").status_code == 401
    assert client.get("/api/auth/me").headers["content-security-policy"] == API_CSP
    assert client.post("/health").status_code == 405
    assert "swagger" in client.get("/docs").text.lower()
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/assets", "/{"))]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_ui_path_takes_only_get(client: TestClient, method: str) -> None:
    for path in ("/", "/runs/abc", "/assets/index-abc123.js"):
        answer = client.request(method, path)
        assert answer.status_code == 405, (method, path)
        assert answer.json()["type"] == "MethodNotAllowed"


@pytest.mark.parametrize(
    "raw",
    [
        b"/assets/../../secret.txt",
        b"/assets/../index.html",
        b"/assets/%2e%2e/%2e%2e/secret.txt",
        b"/assets/%2e%2e%2f%2e%2e%2fsecret.txt",
        b"/assets/fonts/../../../secret.txt",
        b"/assets//etc/passwd",
        b"/assets/../../../../../../etc/passwd",
        b"/../secret.txt",
        b"/%2e%2e/secret.txt",
        b"/assets/a%00b.js",
        b"/fav%00icon.svg",
    ],
)
def test_a_path_out_of_the_bundle_is_refused(client: TestClient, raw: bytes) -> None:
    app = client.app
    assert isinstance(app, FastAPI)
    status, headers, body = raw_get(app, raw)
    assert b"not for the web" not in body
    assert b"root:" not in body
    if raw.startswith(b"/assets/"):
        assert status == 404, raw
    else:  # not an asset: a client route, the index
        assert status == 200 and headers["cache-control"] == "no-store", raw


def test_a_symlink_out_of_the_assets_is_refused(own_client: TestClient, dist: Path) -> None:
    (dist / "assets" / "leak.js").symlink_to(dist.parent / "secret.txt")
    assert own_client.get("/assets/leak.js").status_code == 404


def test_a_rebuilt_index_is_served_at_once(own_client: TestClient, dist: Path) -> None:
    assert "v2" not in own_client.get("/").text
    (dist / "index.html").write_text(INDEX.replace("Tidemill", "Tidemill v2"))
    assert "Tidemill v2" in own_client.get("/runs").text


def test_with_no_bundle_the_root_says_how_to_build_it(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path, tmp_path / "nothing")) as client:
        for path in ("/", "/runs/abc"):
            answer = client.get(path)
            assert answer.status_code == 503
            assert answer.headers["content-type"].startswith("text/html")
            assert "make ui" in answer.text
            assert "<script" not in answer.text
        assert client.get("/assets/index-abc123.js").status_code == 404
        assert client.get("/health").json()["status"] == "ok"
        assert client.get("/api/unknown").json()["type"] == "NotFound"


def test_the_ui_can_be_turned_off(tmp_path: Path, dist: Path) -> None:
    config = ServerConfig(db=f"sqlite:///{tmp_path}/t.db", worker=False, ui=False, ui_dir=dist)
    with TestClient(create_app(config)) as client:
        assert client.get("/").status_code == 404
        assert client.get("/").json()["type"] == "NotFound"


def test_the_package_serves_its_own_bundle_by_default() -> None:
    assert UI_DIST.name == "_ui_dist"
    assert UI_DIST.parent.name == "server"
