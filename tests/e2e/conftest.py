"""The web UI in a real browser: Playwright driving Debian's Chromium against `tidemill server`.

`ui_server` is a `tidemill server` process on a temporary SQLite store,
serving the built bundle (`make ui`), started by `scripted_server.py`: the
server users run, with its worker's models scripted as a support agent (see
that file). Its seeded workspace:

- `ada`: its admin, password `PASSWORD`; `bob`: a plain member, the same password;
- `f/demo/greet`: a script, `main(name)` answering `"hello " + name`;
- `f/demo/hello`: a flow running it on `flow_input.name` (required);
- `f/demo/approve`: a flow of a script step (`prepare`), an approval step
  (`ok`, which ada, who may start it, may decide) and a script step
  greeting whoever approved (`finish`);
- `f/demo/assistant`: an agent (an `ai_agent` resource) with the tools
  `lookup_order` and `issue_refund` (which needs a person's approval);
- `f/demo/support`: a flow whose step `answer` links that agent, its
  `user_message` the flow's input `message`;
- `f/demo/region`: a variable; `f/demo/api_key`: a secret variable;
  `f/demo/llm`: a resource (`openai_compatible`) naming that secret;
- `f/private/notes`: a variable in the folder `private`, where bob has no grant.

`browser` is Chromium (headless, one per test module), `page` a new context and
page per test, with `base_url` the server's; `page_errors` lists what went
wrong in that page: console errors, uncaught exceptions, CSP violations.

Without Chromium or a built bundle these tests are skipped, saying why;
in CI (`CI` or `TIDEMILL_E2E_REQUIRED` set, as `.ci/run` does) they fail
instead, since CI must run them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tidemill.server._ui import UI_DIST
from tidemill.workspace import Workspace

PASSWORD = "correct horse battery"
GREET = "'''Greet someone.'''\ndef main(name: str):\n    return 'hello ' + name\n"
HELLO = {
    "summary": "Say hello",
    "inputs": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Whom to greet"}},
        "required": ["name"],
    },
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}
APPROVE = {
    "summary": "Prepare, approve, finish",
    "steps": [
        {"id": "prepare", "script": "def main():\n    return {'amount': 42}\n"},
        {
            "id": "ok",
            "approval": {"message": "Ship 42?", "approvers": ["ada"], "allow_self_approval": True},
        },
        {
            "id": "finish",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "results.ok.by"}},
        },
    ],
}
AGENT_SYSTEM = "You are the demo support agent.\nLook orders up before acting."
LOOKUP = (
    "def main(order_id: str) -> dict:\n"
    '    """Look an order up by its number, like A-1001."""\n'
    "    return {'order_id': order_id, 'paid': 129.0, 'status': 'arrived broken'}\n"
)
REFUND = (
    "def main(order_id: str, amount: float) -> str:\n"
    '    """Refund an order, in euros."""\n'
    "    return f'refunded {amount:.2f} EUR on {order_id}'\n"
)
ASSISTANT = {
    "model": "fake",
    "system": AGENT_SYSTEM,
    "max_iterations": 6,
    "tools": [
        {"name": "lookup_order", "script": LOOKUP},
        {"name": "issue_refund", "requires_approval": True, "script": REFUND},
    ],
}
SUPPORT = {
    "summary": "Answer a support ticket with the demo agent",
    "inputs": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The customer's message"}},
        "required": ["message"],
    },
    "steps": [
        {
            "id": "answer",
            "ai_agent": {"agent": "f/demo/assistant"},
            "inputs": {"user_message": {"expr": "flow_input.message"}},
        }
    ],
}
_READY = re.compile(r"Tidemill server at (http://\S+) ")
_HERE = Path(__file__).parent
ARTIFACTS = Path(os.environ.get("TIDEMILL_E2E_ARTIFACTS") or _HERE / "artifacts")
"""Where screenshots go: `$TIDEMILL_E2E_ARTIFACTS`, for CI to keep, or `tests/e2e/artifacts/`."""


def sign_in(page: Any, user: str = "ada") -> None:
    """Sign `user` in through the sign-in form (the password is `PASSWORD`)."""
    from playwright.sync_api import expect

    page.goto("/sign-in")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("current-user")).to_have_text(user)


def screenshot(page: Any, name: str, *, full_page: bool = True) -> None:
    """Save what `page` shows as `ARTIFACTS/<name>` (`name` may hold a folder: `a11y/runs.png`)."""
    target = ARTIFACTS / name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=full_page)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here spawns a server and a browser: `slow`."""
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.slow)


def need(ok: object, reason: str) -> None:
    """Skip (fail in CI) unless `ok`."""
    if ok:
        return
    if os.environ.get("CI") or os.environ.get("TIDEMILL_E2E_REQUIRED"):
        pytest.fail(f"{reason} (CI must run the browser tests)", pytrace=False)
    pytest.skip(reason)


def chromium() -> str | None:
    """Debian's Chromium (`make install` installs it), or one on PATH."""
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@dataclass
class UiServer:
    """A running `tidemill server`, and the seeded workspace (as ada, blocking)."""

    url: str
    db: str
    ws: Workspace
    output: list[str] = field(default_factory=list)
    """What the server printed."""

    def token(self, user: str = "ada", *scopes: str) -> str:
        """A new personal access token of `user` with `scopes` (none: `*`)."""
        return self.ws.acting_as(user).create_token("e2e", scopes=list(scopes) or ["*"]).text

    def client(self, user: str = "ada") -> httpx.Client:
        """An API client with a new token of `user`."""
        headers = {"Authorization": f"Bearer {self.token(user)}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def seed(ws: Workspace) -> None:
    """The workspace of the module docstring (ws acts as ada, its first user)."""
    ws.set_password("ada", PASSWORD)
    ws.add_user("bob")
    ws.set_password("bob", PASSWORD)
    ws.add_folder("demo")
    ws.write("f/demo/greet", "script", GREET)
    ws.write("f/demo/hello", "flow", HELLO)
    ws.write("f/demo/approve", "flow", APPROVE)
    ws.write(
        "f/demo/assistant",
        "resource",
        ASSISTANT,
        resource_type="ai_agent",
        summary="Answers a support ticket: looks the order up, refunds it with approval",
    )
    ws.write("f/demo/support", "flow", SUPPORT)
    ws.write("f/demo/region", "variable", "eu-west-1", summary="Where the demo runs")
    ws.write("f/demo/api_key", "variable", "sk-demo-not-a-real-key", secret=True)
    ws.write(
        "f/demo/llm",
        "resource",
        {"base_url": "http://127.0.0.1:9/v1", "api_key": "$var:f/demo/api_key"},
        resource_type="openai_compatible",
        summary="A model server (the demo's, unreachable)",
    )
    ws.add_folder("private")
    ws.write("f/private/notes", "variable", "only for ada")


def _start(
    db: str, env: dict[str, str], cwd: Path
) -> tuple[subprocess.Popen[str], threading.Thread, str, list[str]]:
    """Start `tidemill server` on a free port: the process, the thread reading it, its URL."""
    command = [sys.executable, str(_HERE / "scripted_server.py"), "--db", db, "--port", "0"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
    )
    assert process.stdout is not None
    output: list[str] = []
    ready = threading.Event()
    url: list[str] = []

    def drain() -> None:  # read all it prints, so that it never blocks on a full pipe
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if not url and (found := _READY.search(line)):
                url.append(found[1])
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    if not ready.wait(60) or not url:
        _stop(process, reader)
        raise RuntimeError("tidemill server did not start:\n" + "".join(output))
    return process, reader, url[0], output


def _stop(process: subprocess.Popen[str], reader: threading.Thread) -> None:
    """Stop the server (SIGTERM: gracefully), then let its reader see the end of its output."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - shown by the process's output
        process.kill()
        process.wait()
    reader.join(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiServer]:
    """`tidemill server` on a seeded SQLite store, serving the built UI."""
    need((UI_DIST / "index.html").is_file(), f"the web UI is not built ({UI_DIST}): run `make ui`")
    root = tmp_path_factory.mktemp("e2e")
    db = f"sqlite:///{root}/tidemill.db"
    env = {**os.environ, "TIDEMILL_USER": "ada"}
    ws = Workspace(db, user="ada", migrate=True)
    try:
        seed(ws)
        process, reader, url, output = _start(db, env, root)
        try:
            yield UiServer(url, db, ws, output)
        finally:
            _stop(process, reader)
    finally:
        ws.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, driven by Playwright.

    One per module, not per session: while Playwright's sync API runs, its
    event loop counts as running in this thread, which the asyncio tests
    that run after these (in the same process) could not start theirs in.
    """
    executable = chromium()
    need(executable, "no Chromium: `make install` installs Debian's (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the dev extra installs it
        need(False, "no playwright: `make install` installs the dev extra")
        raise
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


# Chromium logs a CSP violation to the console too; this names the directive, on every page.
_CSP_WATCH = """
document.addEventListener('securitypolicyviolation', (e) => {
  console.error('CSP violation: ' + e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""
_API_REFUSAL = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d")


@pytest.fixture
def page_errors() -> list[str]:
    """What went wrong in `page`: console errors, uncaught exceptions, CSP violations.

    An API answer of 4xx the UI asked for (`/api/...`: not signed in, a
    wrong password) is the API speaking, not an error of the page: not listed.
    """
    return []


@pytest.fixture
def page(browser: Any, ui_server: UiServer, page_errors: list[str]) -> Iterator[Any]:
    """A page of a new browser context (no cookies) at the server."""
    context = browser.new_context(base_url=ui_server.url)
    context.set_default_timeout(15_000)
    context.add_init_script(_CSP_WATCH)
    tab = context.new_page()

    def on_console(message: Any) -> None:
        if message.type != "error":
            return
        where = str((message.location or {}).get("url", ""))
        if _API_REFUSAL.match(message.text) and "/api/" in where:
            return
        page_errors.append(f"console: {message.text} ({where})")

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: page_errors.append(f"uncaught: {error}"))
    try:
        yield tab
    finally:
        context.close()
