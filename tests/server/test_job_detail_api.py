"""`GET /api/runs/{run_id}/jobs/{job_id}`: a job with its inputs and result, its secrets masked.

A step that reads a secret variable (and a resource holding it), prints it
and returns it: through the API its inputs, result and logs show `***`,
while the step after it still reads the real value (results are stored
unmasked). On both stores, for whoever may see the run.
"""

from __future__ import annotations

from tests.server.conftest import Live, settled

LEAK = (
    "def main(key: str, conf: dict, n: int):\n"
    "    print('the key is', key)\n"
    "    return {'key': key, 'region': conf['region'], 'n': n}\n"
)
COUNT = "def main(key: str):\n    return len(key)\n"
FLOW = {
    "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "steps": [
        {
            "id": "leak",
            "script": LEAK,
            "inputs": {
                "key": "$var:f/team/key",
                "conf": "$res:f/team/conf",
                "n": {"expr": "flow_input.n"},
            },
        },
        {"id": "count", "script": COUNT, "needs": ["leak"], "inputs": {"key": "not a secret"}},
        {
            "id": "last",
            "script": "def main(x):\n    return x\n",
            "needs": ["count"],
            "inputs": {"x": {"expr": "results.count"}},
        },
    ],
}
ONE = {"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}
CONF_TYPE = {
    "type": "object",
    "properties": {"token": {"type": "string", "writeOnly": True}, "region": {"type": "string"}},
}


def test_a_jobs_inputs_result_and_logs_show_its_secrets_masked(live: Live) -> None:
    secret = "sk-live-PLAINTEXT-42"
    live.ws.write("f/team/key", "variable", secret, secret=True)
    live.ws.write("f/team/conf_type", "resource_type", CONF_TYPE)
    live.ws.write("f/team/conf", "resource", {"token": "$var:f/team/key", "region": "eu"},
                  resource_type="f/team/conf_type")  # fmt: skip
    live.ws.write("f/team/leaky", "flow", FLOW)
    with live.client("olga") as client:
        answer = client.post("/api/runs", json={"path": "f/team/leaky", "inputs": {"n": 3}})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        assert settled(client, run_id)["status"] == "succeeded"
        jobs = {job["step_id"]: job for job in client.get(f"/api/runs/{run_id}/jobs").json()}
        leak = client.get(f"/api/runs/{run_id}/jobs/{jobs['leak']['id']}")
        assert leak.status_code == 200, leak.text
        shown = leak.json()
        logs = "".join(chunk["body"] for chunk in client.get(f"/api/runs/{run_id}/logs").json())
        count = client.get(f"/api/runs/{run_id}/jobs/{jobs['count']['id']}").json()
        last = client.get(f"/api/runs/{run_id}/jobs/{jobs['last']['id']}").json()
    # Every field of the job's row, and what its step was given and gave, masked.
    assert {k: v for k, v in shown.items() if k not in ("inputs", "result")} == jobs["leak"]
    assert shown["inputs"] == {"key": "***", "conf": {"token": "***", "region": "eu"}, "n": 3}
    assert shown["result"] == {"key": "***", "region": "eu", "n": 3}
    assert "the key is ***" in logs
    assert secret not in str(shown) + logs
    # Jobs that resolved no secret show what they had as it is.
    assert (count["inputs"], count["result"]) == ({"key": "not a secret"}, len("not a secret"))
    assert (last["inputs"], last["result"]) == ({"x": 12}, 12)


def test_a_later_step_reads_the_real_result_and_the_job_must_be_the_runs(live: Live) -> None:
    secret = "sk-real-value"
    live.ws.write("f/team/key", "variable", secret, secret=True)
    flow = {
        "steps": [
            {"id": "read", "script": "def main(key):\n    return key\n",
             "inputs": {"key": "$var:f/team/key"}},
            {"id": "size", "script": "def main(v):\n    return len(v)\n",
             "inputs": {"v": {"expr": "results.read"}}, "needs": ["read"]},
        ],
        "result": {"expr": "results.size"},
    }  # fmt: skip
    live.ws.write("f/team/sized", "flow", flow)
    live.ws.write("u/max/flow", "flow", ONE)
    with live.client("olga") as client:
        run_id = client.post("/api/runs", json={"path": "f/team/sized"}).json()["id"]
        assert settled(client, run_id)["result"] == len(secret)  # the real value, unmasked
        jobs = client.get(f"/api/runs/{run_id}/jobs").json()
        read = client.get(f"/api/runs/{run_id}/jobs/{jobs[0]['id']}").json()
        assert (read["inputs"], read["result"]) == ({"key": "***"}, "***")
        # A job of another run, or none, is not this run's.
        with live.client("max") as other:
            max_run = other.post("/api/runs", json={"path": "u/max/flow"}).json()["id"]
            assert settled(other, max_run)["status"] == "succeeded"
            max_job = other.get(f"/api/runs/{max_run}/jobs").json()[0]["id"]
            refused = other.get(f"/api/runs/{run_id}/jobs/{jobs[0]['id']}")
            assert refused.status_code == 404 and refused.json()["type"] == "RunNotFound"
        foreign = client.get(f"/api/runs/{run_id}/jobs/{max_job}")
        assert foreign.status_code == 404 and foreign.json()["type"] == "RunNotFound"
        missing = client.get(f"/api/runs/{run_id}/jobs/999999")
        assert missing.status_code == 404
        assert client.get(f"/api/runs/{run_id}/jobs/0").status_code == 422
    with live.client("vic") as client:  # a viewer of the flow sees the run, masked too
        assert client.get(f"/api/runs/{run_id}/jobs/{jobs[0]['id']}").json() == read


def test_a_one_step_run_records_its_masked_copy_as_it_ends(live: Live) -> None:
    """A run of one plain step ends in one statement (`end_run_and_claim`): its copy too."""
    live.ws.write("f/team/key", "variable", "sk-one-step", secret=True)
    flow = {"steps": [{"id": "only", "script": "def main(key):\n    return [key, 1]\n",
                       "inputs": {"key": "$var:f/team/key"}}]}  # fmt: skip
    live.ws.write("f/team/one", "flow", flow)
    with live.client("olga") as client:
        run_id = client.post("/api/runs", json={"path": "f/team/one"}).json()["id"]
        assert settled(client, run_id)["status"] == "succeeded"
        (job,) = client.get(f"/api/runs/{run_id}/jobs").json()
        shown = client.get(f"/api/runs/{run_id}/jobs/{job['id']}").json()
    assert (shown["inputs"], shown["result"]) == ({"key": "***"}, ["***", 1])
