"""A run's result through the API: a secret a step resolved and returned shows as `***`.

The secret is in a folder only olga (who runs the flow) may read; vic sees
the flow's runs (the viewer role on `f/team`) but not the secret. The run's
result, in the run and in the list of runs, and a webhook's `?wait=` answer
show it masked, whether the step that returned it is the last one, a loop's
body or a sub-flow's; a result computed from it (its length) and the steps
after it read the real value. On both stores.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.server.conftest import Live, settled

from tidemill.errors import ItemNotFound

SECRET = "sk-vault-PLAINTEXT-77"
READ = "def main(key: str, n: int = 0):\n    return {'key': key, 'n': n}\n"
DIRECT = {
    "steps": [{"id": "read", "script": READ, "inputs": {"key": "$var:f/vault/key"}}],
}
SHAPED = {
    "steps": [
        {"id": "read", "script": READ, "inputs": {"key": "$var:f/vault/key", "n": 2}},
        {"id": "size", "script": "def main(v):\n    return len(v['key'])\n",
         "needs": ["read"], "inputs": {"v": {"expr": "results.read"}}},
    ],
    "result": {"expr": "{'read': results.read, 'size': results.size, 'n': results.read.n}"},
}  # fmt: skip
LOOPED = {
    "steps": [
        {"id": "each", "for_each": {"items": {"expr": "[1, 2]"}, "steps": [
            {"id": "read", "script": READ,
             "inputs": {"key": "$var:f/vault/key", "n": {"expr": "iter.value"}}},
        ]}},
        {"id": "sub", "flow": {"flow": DIRECT}},
    ],
    "result": {"expr": "{'each': results.each, 'sub': results.sub}"},
}  # fmt: skip


def run(client: httpx.Client, path: str) -> dict[str, Any]:
    answer = client.post("/api/runs", json={"path": path})
    assert answer.status_code == 201, answer.text
    return settled(client, answer.json()["id"])


def setup(live: Live) -> None:
    live.ws.add_folder("vault")
    live.ws.grant("f/vault", "olga", "viewer")
    live.ws.write("f/vault/key", "variable", SECRET, secret=True)
    live.ws.write("f/team/direct", "flow", DIRECT)
    live.ws.write("f/team/shaped", "flow", SHAPED)
    live.ws.write("f/team/looped", "flow", LOOPED)


def test_a_returned_secret_shows_masked_in_the_run_and_the_list(live: Live) -> None:
    setup(live)
    with live.client("olga") as olga:
        direct = run(olga, "f/team/direct")
        shaped = run(olga, "f/team/shaped")
        looped = run(olga, "f/team/looped")
    masked = {"key": "***", "n": 0}
    assert direct["status"] == "succeeded" and direct["result"] == masked
    # The step after it read the real value: its length is the secret's.
    assert shaped["result"] == {"read": {"key": "***", "n": 2}, "size": len(SECRET), "n": 2}
    assert looped["result"] == {
        "each": [{"key": "***", "n": 1}, {"key": "***", "n": 2}],
        "sub": masked,
    }
    with pytest.raises(ItemNotFound):  # vic sees the runs, and may not read the secret
        live.ws.acting_as("vic").get("f/vault/key")
    with live.client("vic") as vic:
        for shown in (direct, shaped, looped):
            seen = vic.get(f"/api/runs/{shown['id']}")
            assert seen.status_code == 200, seen.text
            assert seen.json()["result"] == shown["result"]
        listed = vic.get("/api/runs", params={"path": "f/team/looped"}).json()["runs"]
        assert SECRET not in str(listed)
        everything = "".join(
            vic.get(f"/api/runs/{r['id']}{tail}").text
            for r in (direct, shaped, looped)
            for tail in ("", "/jobs", "/events", "/logs")
        )
        assert SECRET not in everything


def test_a_webhook_waiting_for_the_result_gets_it_masked(live: Live) -> None:
    setup(live)
    token = live.ws.acting_as("olga").create_hook_token("f/team/direct").text
    with httpx.Client(base_url=live.url, timeout=60) as client:
        answer = client.post(
            "/hooks/f/team/direct",
            params={"wait": "30s"},
            headers={"Authorization": f"Bearer {token}"},
            json={},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"key": "***", "n": 0}


def test_a_run_that_returns_no_secret_shows_its_result_as_it_is(live: Live) -> None:
    live.ws.write("f/team/plain", "flow", {
        "steps": [{"id": "one", "script": "def main():\n    return {'key': 'not a secret'}\n"}],
    })  # fmt: skip
    with live.client("olga") as olga:
        assert run(olga, "f/team/plain")["result"] == {"key": "not a secret"}


USE = (
    "def main(v: dict):\n"
    "    print('using', v['key'])\n"
    "    return {'echo': v['key'], 'size': len(v['key'])}\n"
)
CARRIED = {
    "steps": [
        {"id": "read", "script": READ, "inputs": {"key": "$var:f/vault/key"}},
        {"id": "use", "script": USE, "needs": ["read"], "inputs": {"v": {"expr": "results.read"}}},
    ],
}


def test_a_step_that_reads_a_returned_secret_masks_it_too(live: Live) -> None:
    """`use` resolved no secret itself: what it was given, printed and returned is masked."""
    setup(live)
    live.ws.write("f/team/carried", "flow", CARRIED)
    with live.client("olga") as olga:
        done = run(olga, "f/team/carried")
        assert done["result"] == {"echo": "***", "size": len(SECRET)}
        jobs = {job["step_id"]: job for job in olga.get(f"/api/runs/{done['id']}/jobs").json()}
        use = olga.get(f"/api/runs/{done['id']}/jobs/{jobs['use']['id']}").json()
        logs = "".join(c["body"] for c in olga.get(f"/api/runs/{done['id']}/logs").json())
    assert use["inputs"] == {"v": {"key": "***", "n": 0}}
    assert use["result"] == {"echo": "***", "size": len(SECRET)}
    assert "using ***" in logs and SECRET not in logs
