"""The server: an HTTP API (FastAPI) over the workspace and the engine, with sign-in.

`create_app` builds the ASGI app, `serve` runs it with uvicorn; `tidemill
server` does that from a terminal. The API is published as OpenAPI 3.1 at
`/openapi.json`, with docs at `/docs`. Every route asks the workspace's
permission module as its caller (a token's scopes narrow that further), and
answers errors as JSON with a type, a message and a hint.

Examples:
    >>> import tempfile
    >>> from fastapi.testclient import TestClient
    >>> app = create_app(ServerConfig(db=f"sqlite:///{tempfile.mkdtemp()}/t.db", worker=False))
    >>> with TestClient(app) as client:
    ...     print(client.get("/health").json()["status"], client.get("/api/auth/me").status_code)
    ok 401
"""

from tidemill.server._app import Started, create_app, open_state
from tidemill.server._caller import CSRF_HEADER, SESSION_COOKIE, Caller
from tidemill.server._config import ServerConfig
from tidemill.server._errors import ErrorBody
from tidemill.server._serve import serve
from tidemill.server._state import ServerState

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "Caller",
    "ErrorBody",
    "ServerConfig",
    "ServerState",
    "Started",
    "create_app",
    "open_state",
    "serve",
]
