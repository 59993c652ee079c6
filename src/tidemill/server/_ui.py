"""The web UI: the built bundle in `_ui_dist/`, served at the server's root.

`mount_ui(app, dist)` adds two routes, after every API route, neither in
the OpenAPI document:

- `GET /assets/{file}`: the bundle's hashed files, cached for a year
  (`immutable`: a new build has new names);
- `GET` of any other path that is not the API's (`API_PREFIXES`): the
  bundle's `index.html`, whose router shows the page of the path. Each
  answer carries a fresh nonce, on every `<script` tag and in its content
  security policy (`ui_csp`), and is never cached.

The API's paths never reach these routes, so an unknown `/api/...` path is
the API's JSON 404, and a method a UI path does not take is a 405. With no
bundle built (a checkout before `make ui`), every UI path answers a short
page saying how to build it, with status 503; the API works the same.

Examples:
    >>> ui_csp("abc").split("; ")[1]
    "script-src 'self' 'nonce-abc'"
    >>> is_api_path("/api/nothing"), is_api_path("/runs/r1"), is_api_path("/healthy")
    (True, False, False)
    >>> with_nonce('<script type="module" src="/assets/i.js"></script>', "abc")
    '<script nonce="abc" type="module" src="/assets/i.js"></script>'
"""

from __future__ import annotations

import mimetypes
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Match, Route
from starlette.types import Scope

__all__ = ["API_PREFIXES", "UI_DIST", "is_api_path", "mount_ui", "ui_csp", "with_nonce"]

UI_DIST = Path(__file__).parent / "_ui_dist"
"""Where `make ui` writes the bundle; it ships in the package."""

API_PREFIXES = ("/api", "/v1", "/docs", "/redoc", "/openapi.json", "/health", "/metrics")
"""Paths (and what is under them) that are the API's, never the UI's."""

_IMMUTABLE = "public, max-age=31536000, immutable"
_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".map": "application/json",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".wasm": "application/wasm",
}
_SCRIPT = re.compile(r"<script(?=[\s>])", re.IGNORECASE)
_TOP_FILE = re.compile(r"/([A-Za-z0-9][A-Za-z0-9._-]*)")
"""A file at the bundle's top (`/favicon.svg`, copied from `ui/public/`)."""

_NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tidemill: the web UI is not built</title>
</head><body><h1>The web UI is not built</h1>
<p>This server's package has no UI bundle. In a checkout of Tidemill, build it
with <code>make ui</code> (it needs Node.js and npm), then reload this page; a released
package ships it built.</p>
<p>The API works without it: see <a href="/docs">/docs</a>.</p></body></html>
"""


def is_api_path(path: str) -> bool:
    """Whether `path` is one of the API's (`API_PREFIXES`, or under one)."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in API_PREFIXES)


def ui_csp(nonce: str) -> str:
    """The content security policy of the UI's page, whose scripts carry `nonce`."""
    return (
        f"default-src 'self'; script-src 'self' 'nonce-{nonce}'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


def with_nonce(page: str, nonce: str) -> str:
    """`page` with a `nonce` attribute on each `<script` tag."""
    return _SCRIPT.sub(f'<script nonce="{nonce}"', page)


def _media_type(path: Path) -> str:
    known = _TYPES.get(path.suffix.lower())
    return known or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


class _UiRoute(Route):
    """A route that never matches one of the API's paths."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and is_api_path(scope.get("path", "")):
            return Match.NONE, {}
        return super().matches(scope)


@dataclass
class _Bundle:
    """The bundle in `dist`, read when asked (a rebuild is served at once)."""

    dist: Path
    _page: tuple[tuple[int, int], str] | None = None

    def index(self) -> str | None:
        """`index.html`, None when the bundle is not built."""
        try:
            stat = (self.dist / "index.html").stat()
            key = (stat.st_mtime_ns, stat.st_size)
            if self._page is None or self._page[0] != key:
                self._page = (key, (self.dist / "index.html").read_text(encoding="utf-8"))
        except OSError:
            return None
        return self._page[1]

    def file(self, folder: Path, name: str) -> Path | None:
        """The file `name` under `folder`, None if absent or outside it."""
        try:
            base = folder.resolve(strict=True)
            found = (base / name).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):  # absent, a loop, a NUL byte
            return None
        return found if found.is_relative_to(base) and found.is_file() else None

    async def asset(self, request: Request) -> Response:
        found = self.file(self.dist / "assets", request.path_params["file"])
        if found is None:
            raise HTTPException(404, "There is no such file in the UI's bundle.")
        return FileResponse(
            found, media_type=_media_type(found), headers={"Cache-Control": _IMMUTABLE}
        )

    async def page(self, request: Request) -> Response:
        top = _TOP_FILE.fullmatch(request.scope["path"])
        if top and top[1] != "index.html" and (found := self.file(self.dist, top[1])):
            return FileResponse(
                found, media_type=_media_type(found), headers={"Cache-Control": "no-cache"}
            )
        index = self.index()
        if index is None:
            return HTMLResponse(_NOT_BUILT, status_code=503, headers={"Cache-Control": "no-store"})
        nonce = secrets.token_urlsafe(18)
        return HTMLResponse(
            with_nonce(index, nonce),
            headers={"Content-Security-Policy": ui_csp(nonce), "Cache-Control": "no-store"},
        )


def mount_ui(app: FastAPI, dist: Path | None = None) -> None:
    """Serve the UI bundle in `dist` (default: `UI_DIST`) at `app`'s root, after its routes.

    Call it last: its page route takes every GET path no route before it took.
    """
    bundle = _Bundle(dist or UI_DIST)
    app.router.routes.append(
        Route("/assets/{file:path}", bundle.asset, methods=["GET"], include_in_schema=False)
    )
    app.router.routes.append(
        _UiRoute("/{page:path}", bundle.page, methods=["GET"], include_in_schema=False)
    )
