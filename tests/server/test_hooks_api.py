"""Webhooks over HTTP: `POST /hooks/<path>` with a token for that path, `?wait=`, replays.

Each test writes its own flow in `f/team` (olga administers it, vic views it,
max may not see it) and calls it as a webhook sender would: a bearer token,
a JSON body, maybe an `Idempotency-Key`.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from tests.server.conftest import Live
from tests.server.conftest import settled as run_once_ended

from tidemill.cli import main
from tidemill.errors import ItemNotFound
from tidemill.server.routes._hooks import MAX_BODY, REPLAYED_HEADER

GREET = {
    "inputs": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "times": {"type": "integer"}},
        "required": ["name"],
    },
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/team/script"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}
FAILING = {"steps": [{"id": "boom", "script": "def main():\n    raise ValueError('no')\n"}]}
PARKED = {"steps": [{"id": "ask", "approval": {"message": "Go on?"}}]}


def hook(live: Live, token: str, path: str, **kwargs: Any) -> httpx.Response:
    """`POST /hooks/<path>` with `token`."""
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    with httpx.Client(base_url=live.url, timeout=60) as client:
        return client.post(f"/hooks/{path}", headers=headers, **kwargs)


def runs_of(live: Live, path: str) -> list[dict[str, Any]]:
    """Every run of `path`, as ada (the admin) sees them."""
    with live.client("ada") as client:
        page = client.get("/api/runs", params={"path": path, "limit": 200})
    assert page.status_code == 200, page.text
    runs: list[dict[str, Any]] = page.json()["runs"]
    return runs


def settled(live: Live, run_id: str) -> dict[str, Any]:
    """The run once it ended, as ada sees it."""
    with live.client("ada") as client:
        return run_once_ended(client, run_id)


def hook_token(live: Live, user: str, path: str) -> str:
    return live.ws.acting_as(user).create_hook_token(path).text


def test_a_hook_token_starts_its_flow_with_the_body_as_inputs(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    made = live.ws.acting_as("vic").create_hook_token("f/team/greet", name="crm")
    assert made.token.scopes == ("hooks:write:f/team/greet",) and made.token.name == "crm"
    answer = hook(live, made.text, "f/team/greet", json={"name": "ann", "times": 2})
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert set(body) >= {"run_id", "status"} and body["status"] in ("queued", "running")
    assert REPLAYED_HEADER.lower() not in answer.headers
    done = settled(live, body["run_id"])
    assert (done["status"], done["result"], done["run_as"]) == ("succeeded", "hello ann", "vic")
    with live.client("ada") as client:
        shown = client.get(f"/api/runs/{body['run_id']}").json()
    assert shown["inputs"] == {"name": "ann", "times": 2} and shown["path"] == "f/team/greet"
    # The token does nothing else: not even read the run it started.
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {made.text}"}) as c:
        assert c.get(f"/api/runs/{body['run_id']}").status_code == 403
        assert c.post("/api/runs", json={"path": "f/team/greet"}).status_code == 403
        assert c.get("/api/items/f/team/greet").status_code == 403


def test_wait_answers_the_result_or_the_error_when_the_run_ends_in_time(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    live.ws.write("f/team/failing", "flow", FAILING)
    token = hook_token(live, "olga", "f/team/greet")
    answer = hook(live, token, "f/team/greet", params={"wait": "30s"}, json={"name": "bo"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "run_id": answer.json()["run_id"],
        "status": "succeeded",
        "result": "hello bo",
        "error": None,
    }
    failing = hook_token(live, "olga", "f/team/failing")
    answer = hook(live, failing, "f/team/failing", params={"wait": "30"})
    assert answer.status_code == 200, answer.text
    failed = answer.json()
    assert (failed["status"], failed["result"]) == ("failed", None)
    assert failed["error"]["step"] == "boom" and "no" in failed["error"]["message"]


def test_a_wait_that_runs_out_answers_202_with_the_run_going_on(live: Live) -> None:
    live.ws.write("f/team/parked", "flow", PARKED)
    token = hook_token(live, "olga", "f/team/parked")
    answer = hook(live, token, "f/team/parked", params={"wait": "300ms"})
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] in ("queued", "running", "waiting")
    assert [run["id"] for run in runs_of(live, "f/team/parked")] == [answer.json()["run_id"]]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{nope", "not JSON"),
        (b"[1, 2]", "not list"),
        (b'"ann"', "not str"),
        (b"null", "not null"),
        (b"\xff\xfe", "not JSON"),
        (b'{"name": 5}', "name"),
        (b'{"times": 1}', "name"),
    ],
)
def test_a_bad_body_is_a_422_listing_its_problems_and_starts_nothing(
    live: Live, content: bytes, problem: str
) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    token = hook_token(live, "olga", "f/team/greet")
    answer = hook(
        live, token, "f/team/greet", content=content, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["problems"] and any(problem in p for p in error["problems"]), error
    assert error["hint"]
    assert runs_of(live, "f/team/greet") == []


def test_a_body_too_large_is_a_413_and_a_key_too_long_a_422(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    token = hook_token(live, "olga", "f/team/greet")
    big = json.dumps({"name": "x" * (MAX_BODY + 1)}).encode()
    answer = hook(live, token, "f/team/greet", content=big)
    assert (answer.status_code, answer.json()["type"]) == (413, "RequestTooLarge")
    long_key = {"Idempotency-Key": "k" * 256}
    answer = hook(live, token, "f/team/greet", json={"name": "x"}, headers=long_key)
    assert answer.status_code == 422 and "Idempotency-Key" in str(answer.json()["problems"])
    assert runs_of(live, "f/team/greet") == []


def test_a_bad_wait_is_a_422_and_a_long_one_is_capped(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    token = hook_token(live, "olga", "f/team/greet")
    for wait in ("soon", "0", "-1s", "5 fortnights"):
        answer = hook(live, token, "f/team/greet", params={"wait": wait}, json={"name": "x"})
        assert answer.status_code == 422, (wait, answer.text)
        assert any("wait" in p for p in answer.json()["problems"])
    assert runs_of(live, "f/team/greet") == []
    answer = hook(live, token, "f/team/greet", params={"wait": "3d"}, json={"name": "x"})
    assert answer.status_code == 200 and answer.json()["result"] == "hello x"


def test_who_may_call_a_hook(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    live.ws.write("f/team/other", "flow", GREET)
    body = {"name": "z"}
    greet = hook_token(live, "olga", "f/team/greet")
    # No token, a malformed one, an unknown one: 401.
    with live.anonymous() as client:
        assert client.post("/hooks/f/team/greet", json=body).status_code == 401
    for wrong in ("nope", "tm_pat_000000000000_secret", greet + "x"):
        answer = hook(live, wrong, "f/team/greet", json=body)
        assert (answer.status_code, answer.json()["type"]) == (401, "SignInFailed"), wrong
    # A token for another path, a runs:write token, an items token: 403.
    other = hook_token(live, "olga", "f/team/other")
    runs_write = live.token("olga", "runs:write")
    for token in (other, runs_write, live.token("olga", "items:write:f/team/*")):
        answer = hook(live, token, "f/team/greet", json=body)
        assert (answer.status_code, answer.json()["type"]) == (403, "PermissionDenied")
    # A hook token for a path that is a prefix of another's is for that path only.
    answer = hook(live, greet, "f/team/greet/more", json=body)
    assert answer.status_code == 403
    assert runs_of(live, "f/team/greet") == []
    # A `*` token of a user who may run the flow works; of one who may not: 404.
    assert hook(live, live.tokens["vic"], "f/team/greet", json=body).status_code == 202
    answer = hook(live, live.tokens["max"], "f/team/greet", json=body)
    assert (answer.status_code, answer.json()["type"]) == (404, "ItemNotFound")
    # A path with nothing there: 404, even for the admin.
    answer = hook(live, live.tokens["ada"], "f/team/nothing", json=body)
    assert (answer.status_code, answer.json()["type"]) == (404, "ItemNotFound")
    # Revoked: 401 at once.
    assert hook(live, greet, "f/team/greet", json=body).status_code == 202
    live.ws.acting_as("olga").revoke_token(greet.split("_")[2])
    answer = hook(live, greet, "f/team/greet", json=body)
    assert (answer.status_code, answer.json()["type"]) == (401, "SignInFailed")
    # A hook token whose user lost the right to run the flow: 404 (its scope is no grant).
    vic = hook_token(live, "vic", "f/team/greet")
    live.ws.set_member("readers", "vic", member=False)
    assert hook(live, vic, "f/team/greet", json=body).status_code == 404
    assert len(runs_of(live, "f/team/greet")) == 2


def test_a_hook_token_is_made_only_for_a_flow_its_user_may_run(live: Live) -> None:
    for user, path in [("max", "f/team/flow"), ("ada", "f/team/script"), ("ada", "f/team/x")]:
        with pytest.raises(ItemNotFound) as refused:
            live.ws.acting_as(user).create_hook_token(path)
        assert refused.value.hint and "tidemill ws list" in refused.value.hint
    assert [t.name for t in live.ws.acting_as("max").tokens()] == ["test"]  # made none


def test_a_replayed_idempotency_key_answers_the_first_run(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    live.ws.write("f/team/other", "flow", GREET)
    token = hook_token(live, "olga", "f/team/greet")
    key = {"Idempotency-Key": "order-1234"}
    first = hook(live, token, "f/team/greet", json={"name": "a"}, headers=key)
    again = hook(live, token, "f/team/greet", json={"name": "a"}, headers=key)
    assert (first.status_code, again.status_code) == (202, 202), again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    assert REPLAYED_HEADER.lower() not in first.headers
    assert again.headers[REPLAYED_HEADER] == "true"
    # With ?wait=, a replay waits for the first run and answers its result.
    waited = hook(live, token, "f/team/greet", params={"wait": "30s"}, json={"name": "a"},
                  headers=key)  # fmt: skip
    assert waited.status_code == 200 and waited.json()["run_id"] == first.json()["run_id"]
    assert waited.json()["result"] == "hello a" and waited.headers[REPLAYED_HEADER] == "true"
    assert [run["id"] for run in runs_of(live, "f/team/greet")] == [first.json()["run_id"]]
    # Another key, or no key, starts another run; the same key at another path too.
    assert (
        hook(live, token, "f/team/greet", json={"name": "a"}).json()["run_id"]
        != (first.json()["run_id"])
    )
    other = hook(live, hook_token(live, "olga", "f/team/other"), "f/team/other",
                 json={"name": "a"}, headers=key)  # fmt: skip
    assert other.status_code == 202 and REPLAYED_HEADER.lower() not in other.headers
    assert other.json()["run_id"] != first.json()["run_id"]
    assert len(runs_of(live, "f/team/greet")) == 2 and len(runs_of(live, "f/team/other")) == 1


def test_concurrent_replays_start_one_run(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    token = hook_token(live, "olga", "f/team/greet")
    key = {"Idempotency-Key": "burst"}
    with ThreadPoolExecutor(6) as pool:
        answers = list(
            pool.map(
                lambda _: hook(live, token, "f/team/greet", json={"name": "r"}, headers=key),
                range(6),
            )
        )
    assert [a.status_code for a in answers] == [202] * 6, [a.text for a in answers]
    assert len({a.json()["run_id"] for a in answers}) == 1
    assert [run["id"] for run in runs_of(live, "f/team/greet")] == [answers[0].json()["run_id"]]
    # Only the call that started the run answers without the header, however they raced.
    assert sorted(REPLAYED_HEADER.lower() in a.headers for a in answers) == [False] + [True] * 5


def test_the_cli_makes_a_hook_token_and_prints_how_to_call_it(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    argv = ["ws", "tokens", "create-hook", "f/team/greet", "--db", live.db]
    argv += ["--workspace", live.workspace, "--as", "olga", "--url", live.url, "--json"]
    assert main(argv) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["url"] == f"{live.url}/hooks/f/team/greet" and made["token"] in made["curl"]
    answer = hook(live, made["token"], "f/team/greet", json={"name": "cli"})
    assert answer.status_code == 202, answer.text
    assert main([*argv[:-1]]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tm_pat_") and "curl -X POST" in out and "/hooks/f/team/greet" in out
    assert main(["ws", "tokens", "create-hook", "f/team/script", "--db", live.db,
                 "--workspace", live.workspace]) == 2  # fmt: skip
    assert "Hint:" in capsys.readouterr().err
