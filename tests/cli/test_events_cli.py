"""`tidemill events send` and `tidemill events kept`, and `tidemill run --at`, in this process."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_support import cli

from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(60)

CHECKOUT = {
    "inputs": {"type": "object", "properties": {"order": {"type": "string"}}},
    "steps": [{"id": "paid", "wait_for_event": {"name": "order_paid", "key": "flow_input.order"}}],
}


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def shop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store with ada's folder `shop`, the flow `f/shop/checkout`, and bob, with no role."""
    db = f"sqlite:///{tmp_path}/t.db"
    flow = tmp_path / "checkout.json"
    flow.write_text(json.dumps(CHECKOUT))
    for argv in (
        ("folders", "add", "shop"),
        ("write", "f/shop/checkout", "--kind", "flow", "--file", str(flow)),
        ("users", "add", "bob"),
    ):
        code, _, err = cli(capsys, "ws", *argv, "--db", db)
        assert code == 0, err
    return db


def _submit(capsys: pytest.CaptureFixture[str], db: str, *more: str) -> str:
    code, out, err = cli(capsys, "run", "f/shop/checkout", "-i", "order=a42", *more, "--db", db)
    assert code == 0, err
    return out.strip()


def test_an_event_sent_from_the_cli_ends_the_waiting_run(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _submit(capsys, shop, "--detach")
    with Engine(shop) as engine, engine.worker(concurrency=1, poll=0.1):
        deadline = time.monotonic() + 30
        while not [w for w in engine.waits(run_id) if w.kind == "event"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        code, out, err = cli(
            capsys, "events", "send", "order_paid", "--key", "a42", "--data", '{"amount": 10}',
            "--path", "f/shop/checkout", "--db", shop,
        )  # fmt: skip
        assert code == 0, err
        assert out.splitlines() == ["delivered to 1 run:", f"  {run_id}"]
        run = engine.run(run_id)
        assert run.wait(timeout=30) == {"amount": 10}


def test_an_event_nobody_waits_for_is_kept_and_listed(
    shop: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"amount": 5}')
    argv = ("events", "send", "order_paid", "--key", "7", "--path", "f/shop/checkout")
    code, out, err = cli(capsys, *argv, "--data-file", str(payload), "--keep", "1d",
                         "--dedupe-id", "pay-7", "--json", "--db", shop)  # fmt: skip
    assert code == 0, err
    sent = json.loads(out)
    assert (sent["delivered_to"], sent["duplicate"]) == ([], False) and sent["kept_until"]
    code, out, err = cli(capsys, *argv, "--dedupe-id", "pay-7", "--db", shop)
    assert code == 0 and out.startswith("not sent again"), (out, err)
    code, out, err = cli(capsys, "events", "kept", "--name", "order_paid", "--json", "--db", shop)
    assert code == 0, err
    [kept] = json.loads(out)
    assert (kept["path"], kept["key"], kept["payload"], kept["sent_by"]) == (
        "f/shop/checkout", "7", {"amount": 5}, "ada"
    )  # fmt: skip
    code, out, _ = cli(capsys, "events", "kept", "--db", shop)
    assert code == 0 and "order_paid" in out and "f/shop/checkout" in out


def test_a_sender_who_may_not_run_the_flow_is_refused(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    send = ("events", "send", "order_paid", "--key", "1")
    code, _, err = cli(capsys, *send, "--path", "f/shop/checkout", "--as", "bob", "--db", shop)
    assert code == 2 and "No flow at f/shop/checkout that bob may run" in err
    code, _, err = cli(capsys, *send, "--as", "bob", "--db", shop)  # runs of no path: admins'
    assert code == 2 and "workspace admin" in err
    code, _, err = cli(capsys, *send, "--path", "f/shop/checkout", "--as", "ada", "--db", shop)
    assert code == 0, err
    code, _, err = cli(capsys, *send, "--data", "{oops", "--db", shop)
    assert code == 2 and "not JSON" in err
    with pytest.raises(SystemExit):
        cli(capsys, *send, "--keep", "soon", "--db", shop)
    code, _, err = cli(capsys, "events", "send", "has spaces", "--db", shop)
    assert code == 2 and "not an event name" in err


def test_a_run_submitted_with_at_starts_later(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "run", "f/shop/checkout", "-i", "order=a1", "--at", "+2h",
                         "--db", shop)  # fmt: skip
    assert code == 0 and "to start at" in err, err
    run_id = out.strip()
    with Engine(shop) as engine:
        [job] = engine.jobs(run_id)
        assert 7000 < job.run_at - time.time() <= 7200
        assert [w.kind for w in engine.waits(run_id)] == ["start"]
    with pytest.raises(SystemExit):
        cli(capsys, "run", "f/shop/checkout", "--at", "next tuesday", "--db", shop)
