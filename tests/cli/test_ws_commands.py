"""`tidemill ws ...` and `tidemill run f/...`, called in this process."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import cli

from tidemill.workspace import MasterKey, Workspace

pytestmark = pytest.mark.timeout(60)

TRIAGE = {
    "name": "triage",
    "summary": "Triage a ticket",
    "steps": [{"id": "greet", "identity": {}, "inputs": {"who": "$var:f/support/who"}}],
}


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/t.db"


class WS:
    """Runs `tidemill ws ...` (and `tidemill run ...`) against one store."""

    def __init__(self, capsys: pytest.CaptureFixture[str], db: str, monkeypatch: Any) -> None:
        self.capsys, self.db, self.monkeypatch = capsys, db, monkeypatch

    def __call__(self, *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            self.monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        return cli(self.capsys, "ws", *argv, "--db", self.db)

    def ok(self, *argv: str, stdin: str | None = None) -> str:
        code, out, err = self(*argv, stdin=stdin)
        assert code == 0, err
        return out

    def run(self, *argv: str) -> tuple[int, str, str]:
        return cli(self.capsys, "run", *argv, "--db", self.db)


@pytest.fixture
def ws(capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch) -> WS:
    return WS(capsys, db, monkeypatch)


@pytest.fixture
def support(ws: WS, tmp_path: Path) -> WS:
    """A folder `support` with the flow `triage`, the variable `who`, and users bob and carol."""
    ws.ok("folders", "add", "support", "--summary", "Customer support")
    flow = tmp_path / "triage.yaml"
    flow.write_text(yaml.safe_dump(TRIAGE, sort_keys=False))
    ws.ok("write", "f/support/triage", "--kind", "flow", "--file", str(flow), "-m", "first")
    ws.ok("variables", "set", "f/support/who", stdin="the team\n")
    ws.ok("users", "add", "bob")
    ws.ok("users", "add", "carol")
    ws.ok("grant", "f/support", "bob", "viewer")
    return ws


# --- items --------------------------------------------------------------------------------------


def test_the_first_user_is_the_admin(ws: WS) -> None:
    assert ws.ok("whoami").strip() == "ada (admin)"
    me = json.loads(ws.ok("whoami", "--json"))
    assert me["name"] == "ada" and me["is_admin"] is True and me["groups"] == []


def test_write_list_show_history_diff_restore_clear_delete(support: WS) -> None:
    ws = support
    table = ws.ok("list")
    assert table.splitlines()[0].split()[:4] == ["PATH", "KIND", "VERSION", "SUMMARY"]
    assert "f/support/triage  flow" in table and "Triage a ticket" in table
    assert yaml.safe_load(ws.ok("show", "f/support/triage")) == TRIAGE
    changed = {**TRIAGE, "summary": "Triage tickets"}
    out = ws.ok(
        "write", "f/support/triage", "--kind", "flow", "-", "-m", "second",
        stdin=json.dumps(changed),
    )  # fmt: skip
    assert out.strip() == "wrote f/support/triage (flow, version 2)"
    assert yaml.safe_load(ws.ok("show", "f/support/triage", "--version", "1")) == TRIAGE
    history = ws.ok("history", "f/support/triage").splitlines()
    assert [line.split()[0] for line in history] == ["VERSION", "2", "1"]
    assert "second" in history[1] and "first" in history[2]
    assert json.loads(ws.ok("history", "f/support/triage", "--json"))[0]["message"] == "second"
    diff = ws.ok("diff", "f/support/triage", "1")
    assert "-summary: Triage a ticket" in diff and "+summary: Triage tickets" in diff
    assert ws.ok("diff", "f/support/triage", "1", "2") == diff
    assert "as version 3" in ws.ok("restore", "f/support/triage", "1", "-m", "undo")
    assert yaml.safe_load(ws.ok("show", "f/support/triage")) == TRIAGE
    assert ws.ok("clear-history", "f/support/triage").startswith("dropped 2 past version")
    assert ws.ok("delete", "f/support/triage").strip() == "deleted f/support/triage"
    code, _, err = ws("show", "f/support/triage")
    assert code == 2 and "No item at f/support/triage" in err


def test_list_by_kind_after_limit_and_json(support: WS) -> None:
    ws = support
    ws.ok("write", "f/support/hello", "--kind", "script", "-",
          stdin="'''Say hello.'''\ndef main():\n    return 'hi'\n")  # fmt: skip
    code, out, err = ws("list", "f/support/", "--limit", "2")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == [
        "f/support/hello", "f/support/triage"
    ]  # fmt: skip
    assert "--after f/support/triage" in err
    out = ws.ok("list", "f/support/", "--after", "f/support/triage", "--json")
    assert [item["path"] for item in json.loads(out)] == ["f/support/who"]
    assert json.loads(out)[0]["value"] is None  # listing leaves values out
    scripts = json.loads(ws.ok("list", "--kind", "script", "--json"))
    assert [(s["path"], s["summary"]) for s in scripts] == [("f/support/hello", "Say hello.")]
    assert ws.ok("show", "f/support/hello").startswith("'''Say hello.'''\ndef main():")
    variables = ws.ok("variables", "list")
    assert "f/support/who" in variables and "triage" not in variables


def test_a_resource_with_a_type_and_a_resource_type(ws: WS) -> None:
    ws.ok("folders", "add", "ai")
    ws.ok("variables", "set", "f/ai/key", "--secret", stdin="sk-live-123")
    body = "api_key: $var:f/ai/key\nbase_url: https://example.test/v1\n"
    ws.ok("write", "f/ai/openai", "--kind", "resource", "--type", "openai", "-", stdin=body)
    assert yaml.safe_load(ws.ok("show", "f/ai/openai")) == yaml.safe_load(body)
    shown = json.loads(ws.ok("show", "f/ai/openai", "--json"))
    assert shown["resource_type"] == "openai" and shown["version"] == 1
    schema = {"type": "object", "properties": {"host": {"type": "string"}}}
    ws.ok("write", "f/ai/smtp", "--kind", "resource_type", "-", stdin=json.dumps(schema))
    ws.ok("write", "f/ai/mail", "--kind", "resource", "--type", "f/ai/smtp", "-",
          stdin='{"host": "mx.test"}')  # fmt: skip
    code, _, err = ws("write", "f/ai/mail2", "--kind", "resource", "--type", "f/ai/smtp", "-",
                      stdin='{"host": 3}')  # fmt: skip
    assert code == 2 and "error:" in err and "Traceback" not in err


def test_a_bad_value_is_a_typed_error_that_quotes_no_text(ws: WS) -> None:
    ws.ok("folders", "add", "ai")
    code, out, err = ws("write", "f/ai/res", "--kind", "resource", "-",
                        stdin="key: [sk-secret-text\n")  # fmt: skip
    assert code == 2 and out == ""
    assert "standard input is not YAML or JSON (line" in err and "sk-secret-text" not in err
    code, _, err = ws("write", "f/ai/res", "--kind", "flow", "--file", "/no/such/file")
    assert code == 2 and "Cannot read /no/such/file" in err
    code, _, err = ws("write", "f/ai/res", "--kind", "flow")
    assert code == 2 and "--file FILE, or -" in err
    code, _, err = ws("show", "Not/A/Path")
    assert code == 2 and "is not a workspace path" in err and "Traceback" not in err


# --- secrets ------------------------------------------------------------------------------------


def test_a_secret_from_stdin_is_never_echoed_and_shows_as_secret(support: WS) -> None:
    ws = support
    code, out, err = ws("variables", "set", "f/support/token", "--secret", "--summary", "API",
                        stdin="sk-very-secret\n")  # fmt: skip
    assert code == 0 and out.strip() == "set secret variable f/support/token"
    assert "sk-very-secret" not in out + err
    code, out, err = ws("show", "f/support/token")
    assert code == 0 and out.strip() == "<secret>" and "sk-very-secret" not in out + err
    for argv in (["list"], ["variables", "list", "--json"], ["show", "f/support/token", "--json"],
                 ["audit"], ["history", "f/support/token"]):  # fmt: skip
        code, out, err = ws(*argv)
        assert "sk-very-secret" not in out + err, argv
    assert "variable (secret)" in ws.ok("variables", "list")
    assert (
        ws.ok("show", "f/support/token", "--reveal") == "sk-very-secret\n"
    )  # one newline stripped
    assert "secret.decrypt" in ws.ok("audit", "--action", "secret.decrypt")
    assert ws.ok("show", "f/support/who").strip() == "the team"


def test_on_a_terminal_the_value_is_asked_for_without_echo(
    support: WS, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    prompts: list[str] = []

    def getpass(prompt: str = "") -> str:
        prompts.append(prompt)
        return "typed-secret"

    monkeypatch.setattr("sys.stdin", Terminal("never read"))
    monkeypatch.setattr("getpass.getpass", getpass)
    code, out, err = support("variables", "set", "f/support/pw", "--secret")
    assert code == 0 and "typed-secret" not in out + err
    assert prompts and "f/support/pw" in prompts[0]
    assert support.ok("show", "f/support/pw", "--reveal").strip() == "typed-secret"


def test_an_empty_value_is_refused(support: WS) -> None:
    code, _, err = support("variables", "set", "f/support/token", "--secret", stdin="")
    assert code == 2 and "No value for f/support/token on standard input" in err


def test_keys_new_and_rotate_with_the_key_file(ws: WS, db: str) -> None:
    code, out, err = cli(ws.capsys, "ws", "keys", "new")
    assert code == 0 and MasterKey.parse(out.strip()) and "TIDEMILL_MASTER_KEY" in err
    ws.ok("folders", "add", "ai")
    ws.ok("variables", "set", "f/ai/key", "--secret", stdin="sk-rotate-me")
    key_file = Path(db.removeprefix("sqlite:///") + ".key")
    old = key_file.read_text().strip()
    new = MasterKey.generate().encoded()
    code, out, err = ws("keys", "rotate", "--write-key-file", stdin=new + "\n")
    assert code == 0, err
    assert new not in out + err and old not in out + err and "rotated" in out
    assert key_file.read_text().strip() == new
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert ws.ok("show", "f/ai/key", "--reveal").strip() == "sk-rotate-me"


def test_rotate_without_the_key_file_says_to_set_the_key(
    ws: WS, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    ws.ok("folders", "add", "ai")
    ws.ok("variables", "set", "f/ai/key", "--secret", stdin="sk-1")
    new = MasterKey.generate().encoded()
    code, out, err = ws("keys", "rotate", stdin=new)
    assert code == 0 and "set TIDEMILL_MASTER_KEY" in err and new not in out + err
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", new)
    assert ws.ok("show", "f/ai/key", "--reveal").strip() == "sk-1"
    code, _, err = ws("keys", "rotate", stdin="not a key")
    assert code == 2 and "The new master key on standard input" in err and "not a key" not in err


# --- drafts -------------------------------------------------------------------------------------


def test_drafts_save_show_list_discard_and_deploy(support: WS, tmp_path: Path) -> None:
    ws = support
    draft = {**TRIAGE, "summary": "Draft triage"}
    path = tmp_path / "draft.yaml"
    path.write_text(yaml.safe_dump(draft))
    assert "deploy it" in ws.ok("drafts", "save", "f/support/triage", "--kind", "flow",
                                "--file", str(path))  # fmt: skip
    assert "f/support/triage  flow" in ws.ok("drafts", "list")
    assert yaml.safe_load(ws.ok("drafts", "show", "f/support/triage")) == draft
    assert yaml.safe_load(ws.ok("show", "f/support/triage")) == TRIAGE  # nothing deployed yet
    assert json.loads(ws.ok("drafts", "list", "--json"))[0]["owner"] == "ada"
    ws.ok("drafts", "discard", "f/support/triage")
    code, _, err = ws("drafts", "show", "f/support/triage")
    assert code == 2 and "draft" in err
    ws.ok("drafts", "save", "f/support/triage", "--kind", "flow", "-", stdin=json.dumps(draft))
    assert ws.ok("deploy", "f/support/triage", "-m", "ship").strip() == (
        "deployed f/support/triage as version 2"
    )
    assert yaml.safe_load(ws.ok("show", "f/support/triage")) == draft
    assert ws("drafts", "list")[2].strip() == "no drafts"


# --- people -------------------------------------------------------------------------------------


def test_users_groups_folders_grants(support: WS) -> None:
    ws = support
    assert "added user dave (admin)" in ws.ok("users", "add", "dave", "--admin")
    ws.ok("users", "set", "dave", "--no-admin", "--disable")
    users = {u["name"]: u for u in json.loads(ws.ok("users", "list", "--json"))}
    assert users["dave"]["is_admin"] is False and users["dave"]["disabled"] is True
    assert users["ada"]["is_admin"] is True
    ws.ok("users", "set", "dave", "--enable")
    assert "dave" in ws.ok("users", "list")
    code, _, err = ws("users", "set", "dave")
    assert code == 2 and "Nothing to change" in err
    code, _, err = ws("users", "set", "ada", "--no-admin")
    assert code == 2 and "last active admin" in err
    ws.ok("groups", "add", "ops", "--summary", "On call")
    ws.ok("groups", "add-member", "ops", "carol")
    groups = json.loads(ws.ok("groups", "list", "--json"))
    assert groups == [{"name": "ops", "summary": "On call", "members": ["carol"]}]
    ws.ok("grant", "f/support", "g/ops", "writer")
    shown = ws.ok("folders", "show", "support")
    assert "g/ops  writer" in shown and "bob  viewer" in shown and "Customer support" in shown
    assert json.loads(ws.ok("folders", "show", "support", "--json"))["roles"]["bob"] == "viewer"
    assert "support" in ws.ok("folders", "list")
    ws.ok("write", "f/support/note", "--kind", "script", "-", "--as", "carol",
          stdin="def main():\n    return 1\n")  # fmt: skip
    ws.ok("groups", "remove-member", "ops", "carol")
    code, _, err = ws("write", "f/support/note", "--kind", "script", "-", "--as", "carol",
                      stdin="def main():\n    return 2\n")  # fmt: skip
    assert code == 2 and "carol may not write f/support/note" in err
    ws.ok("revoke", "f/support", "bob")
    assert "bob" not in ws.ok("folders", "show", "support")
    ws.ok("groups", "delete", "ops")
    assert json.loads(ws.ok("groups", "list", "--json")) == []
    code, _, err = ws("folders", "show", "nope")
    assert code == 2 and "no folder 'nope'" in err
    code, _, err = ws("grant", "f/support", "nobody", "viewer")
    assert code == 2 and "no user 'nobody'" in err


def test_an_admin_acts_as_another_user(support: WS) -> None:
    ws = support
    assert ws.ok("whoami", "--as", "bob").strip() == "bob"
    assert yaml.safe_load(ws.ok("show", "f/support/triage", "--as", "bob")) == TRIAGE
    code, _, err = ws("show", "f/support/triage", "--as", "carol")  # no role: looks absent
    assert code == 2 and "No item at f/support/triage that carol may read" in err


def test_a_non_admin_may_not_act_as_another(support: WS, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "bob")
    assert support.ok("whoami").strip() == "bob"
    code, out, err = support("whoami", "--as", "ada")
    assert code == 2 and out == ""
    assert "bob may not act as ada" in err and "Traceback" not in err
    code, _, err = support("users", "add", "eve")
    assert code == 2 and "bob may not add users" in err
    code, _, err = support("audit")
    assert code == 2 and "audit" in err
    monkeypatch.setenv("TIDEMILL_USER", "stranger")
    code, _, err = support("whoami")
    assert code == 2 and "stranger is not a user of workspace 'default'" in err


def test_a_viewer_may_not_write(support: WS) -> None:
    code, out, err = support("write", "f/support/triage", "--kind", "flow", "-", "--as", "bob",
                             stdin=json.dumps(TRIAGE))  # fmt: skip
    assert code == 2 and out == ""
    assert "tidemill ws: error: bob may not write f/support/triage" in err
    assert "Traceback" not in err
    code, _, err = support("variables", "set", "f/support/who", "--as", "bob", stdin="x")
    assert code == 2 and "bob may not write f/support/who" in err


def test_audit_filters(support: WS) -> None:
    ws = support
    rows = json.loads(ws.ok("audit", "--json"))
    assert rows[0]["action"] == "workspace.create"
    writes = json.loads(ws.ok("audit", "--action", "item.write", "--json"))
    assert {row["path"] for row in writes} == {"f/support/triage", "f/support/who"}
    assert json.loads(ws.ok("audit", "--path", "f/support/who", "--json"))[0]["actor"] == "ada"
    assert json.loads(ws.ok("audit", "--actor", "bob", "--json")) == []
    after = json.loads(ws.ok("audit", "--after", str(rows[0]["id"]), "--limit", "1", "--json"))
    assert [row["id"] for row in after] == [rows[1]["id"]]
    assert "ACTION" in ws.ok("audit", "--limit", "2")


def test_search_and_types(support: WS) -> None:
    ws = support
    out = ws.ok("search", "triage tiket")
    assert out.splitlines()[1].split()[1] == "f/support/triage"
    hits = json.loads(ws.ok("search", "triage", "--kind", "variable", "--json"))
    assert all(hit["kind"] == "variable" for hit in hits)
    types = cli(ws.capsys, "ws", "types")[1]
    assert types.splitlines()[0].split() == ["NAME", "SUMMARY"]
    assert any(line.startswith("openai ") for line in types.splitlines())
    listed = json.loads(cli(ws.capsys, "ws", "types", "--json")[1])
    assert "api_key" in next(t for t in listed if t["name"] == "openai")["schema"]["properties"]


def test_every_ws_command_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli(capsys, "ws", "--help")
    out = capsys.readouterr().out
    for command in ("list", "show", "write", "drafts", "deploy", "variables", "audit", "keys"):
        assert command in out


# --- tidemill run f/... -------------------------------------------------------------------------


def test_run_a_deployed_flow_by_its_path(support: WS, db: str) -> None:
    code, out, err = support.run("f/support/triage")
    assert code == 0, err
    assert json.loads(out) == {"who": "the team"}
    assert "of flow f/support/triage started" in err
    audit = json.loads(support.ok("audit", "--action", "run.start", "--json"))
    assert audit[0]["path"] == "f/support/triage" and audit[0]["details"]["version"] == 1


def test_run_your_draft_and_as_another_user(support: WS, db: str) -> None:
    ws = support
    draft = {**TRIAGE, "steps": [{"id": "greet", "identity": {}, "inputs": {"draft": True}}]}
    ws.ok("drafts", "save", "f/support/triage", "--kind", "flow", "-", stdin=json.dumps(draft))
    code, out, err = ws.run("f/support/triage", "--draft")
    assert code == 0, err
    assert json.loads(out) == {"draft": True} and "(your draft)" in err
    code, out, err = ws.run("f/support/triage", "--as", "bob")
    assert code == 0, err
    assert json.loads(out) == {"who": "the team"}
    # Bob has no draft of it: his preview runs the deployed flow (with his drafts, none).
    code, out, err = ws.run("f/support/triage", "--as", "bob", "--draft")
    assert code == 0, err
    assert json.loads(out) == {"who": "the team"}
    code, _, err = ws.run("f/support/triage", "--as", "carol")
    assert code == 2 and "carol may run" in err
    code, _, err = ws.run("f/support/nothing")
    assert code == 2 and "No flow at f/support/nothing" in err


def test_run_detached_by_path(support: WS, db: str) -> None:
    code, out, err = support.run("f/support/triage", "--detach")
    assert code == 0, err
    run_id = out.strip()
    with Workspace(db, user="ada") as ws:
        assert ws.audit(action="run.start")[0].details["run_id"] == run_id


def test_run_a_file_as_the_local_user(support: WS, tmp_path: Path) -> None:
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(TRIAGE))
    code, out, err = support.run(str(path))
    assert code == 0, err
    assert json.loads(out) == {"who": "the team"}  # $var: resolved as ada
    code, _, err = support.run(str(path), "--draft")
    assert code == 2 and "--draft runs a draft of a workspace flow" in err
    code, _, err = support.run(str(path), "--as", "bob")
    assert code == 0, err


# --- PostgreSQL ---------------------------------------------------------------------------------


def test_ws_and_run_on_each_store(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if store_url.startswith("postgresql"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
        assert cli(capsys, "db", "upgrade", "--db", store_url)[0] == 0
    ws = WS(capsys, store_url, monkeypatch)
    ws.ok("folders", "add", "support")
    ws.ok("write", "f/support/triage", "--kind", "flow", "-", stdin=json.dumps(TRIAGE))
    ws.ok("variables", "set", "f/support/who", "--secret", stdin="the secret team")
    assert ws.ok("show", "f/support/who").strip() == "<secret>"
    code, out, err = ws.run("f/support/triage")
    assert code == 0, err
    assert json.loads(out) == {"who": "***"}  # a secret is masked in what a run keeps
    assert "the secret team" not in out + err
    assert os.environ.get("TIDEMILL_USER") == "ada"
