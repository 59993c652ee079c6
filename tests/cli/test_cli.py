"""The `tidemill` command line."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from tidemill.cli import main


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "proxy" in capsys.readouterr().out


def test_no_command_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage: tidemill" in capsys.readouterr().out


def test_proxy_help_shows_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for option in ("--host", "--port", "--model-alias", "--keepalive", "--api-key"):
        assert option in out
    assert "pip install 'tidemill[proxy]'" in out


def test_the_console_script_is_registered() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    assert [s.value for s in scripts if s.name == "tidemill"] == ["tidemill.cli:main"]
    done = subprocess.run(
        [sys.executable, "-m", "tidemill.cli", "proxy", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--model-alias NAME=SPEC" in done.stdout


def test_proxy_builds_the_app_from_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:
        served.update(options, app=app)

    monkeypatch.setattr("uvicorn.run", fake_run)
    monkeypatch.setenv("TIDEMILL_PROXY_API_KEY", "proxy-key")
    status = main(
        [
            "proxy",
            "--port",
            "4123",
            "--model-alias",
            "claude=anthropic:claude-sonnet-4-5",
            "--model-alias",
            "fast = openai:gpt-4o-mini",
            "--model",
            "mistral:mistral-small-latest",
            "--keepalive",
            "2.5",
        ]
    )
    assert status == 0
    assert (served["host"], served["port"], served["lifespan"]) == ("127.0.0.1", 4123, "on")
    with TestClient(served["app"]) as client:
        refused = client.get("/v1/models")
        listed = client.get("/v1/models", headers={"authorization": "Bearer proxy-key"})
    assert refused.status_code == 401
    assert [m["id"] for m in listed.json()["data"]] == [
        "mistral:mistral-small-latest",
        "claude",
        "fast",
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["proxy", "--model-alias", "claude"], "expected NAME=SPEC"),
        (["proxy", "--model-alias", "=openai:gpt-4o"], "expected NAME=SPEC"),
        (["proxy", "--keepalive", "0"], "positive number of seconds"),
        (["proxy", "--port", "many"], "invalid int value"),
    ],
)
def test_bad_options_are_refused_by_name(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_a_misspelt_provider_fails_at_start_with_did_you_mean(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("uvicorn.run", lambda app, **options: pytest.fail("must not serve"))
    assert main(["proxy", "--model-alias", "claude=antropic:claude-sonnet-4-5"]) == 2
    err = capsys.readouterr().err
    assert "Unknown model provider" in err and "'anthropic'" in err


@pytest.mark.parametrize("missing", ["uvicorn", "starlette"])
def test_a_missing_extra_names_the_install_command(
    missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m.startswith("tidemill.llm.proxy")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` fail
    assert main(["proxy"]) == 2
    err = capsys.readouterr().err
    assert f"needs the {missing!r} package" in err
    assert "pip install 'tidemill[proxy]'" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.slow
def test_tidemill_proxy_serves_until_interrupted() -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tidemill.cli", "proxy", "--port", str(port),
         "--model-alias", "fast=openai:gpt-4o-mini", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "fast", "messages": [{"role": "user", "content": "Hi"}]},
        )
        assert answer.status_code == 404  # not served here; what to set is for the operator
        assert "OPENAI_API_KEY" not in answer.json()["error"]["message"]
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0
    assert b"OPENAI_API_KEY" in err
