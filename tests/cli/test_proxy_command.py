"""`tidemill proxy`'s options: uvicorn's, the proxy's key, per-alias upstreams, CORS, files."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tidemill.cli import main

HELLO = [{"role": "user", "content": "Hi"}]
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "llama",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `uvicorn.run` was given, instead of serving."""
    seen: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:
        seen.update(options, app=app)

    monkeypatch.setattr("uvicorn.run", fake_run)
    for name in ("TIDEMILL_PROXY_API_KEY", "OPENAI_COMPATIBLE_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return seen


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible server on loopback; yields its base URL and what it saw."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"path": self.path, "auth": self.headers.get("authorization"), **body})
            data = json.dumps(ANSWER).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def chat(client: TestClient, model: str, key: str | None = None, **headers: str) -> Any:
    if key:
        headers["authorization"] = f"Bearer {key}"
    return client.post(
        "/v1/chat/completions", json={"model": model, "messages": HELLO}, headers=headers
    )


class TestLogging:
    @pytest.mark.parametrize(("flags", "logged"), [([], True), (["--no-access-log"], False)])
    def test_the_proxy_writes_the_access_log_not_uvicorn(
        self,
        served: dict[str, Any],
        flags: list[str],
        logged: bool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        assert main(["proxy", "--model-alias", "echo=fake", *flags]) == 0
        assert served["access_log"] is False  # uvicorn's own line would show query strings
        assert "loop" not in served  # uvloop when installed
        with (
            caplog.at_level("INFO", logger="tidemill.llm.proxy.access"),
            TestClient(served["app"]) as client,
        ):
            assert client.get("/v1/models?api_key=secret-0123").status_code == 200
        access = [r.getMessage() for r in caplog.records if r.name.endswith(".access")]
        assert bool(access) is logged
        assert not [line for line in access if "secret-0123" in line]

    def test_the_proxy_loggers_print_at_the_chosen_level(self, served: dict[str, Any]) -> None:
        assert main(["proxy", "--log-level", "warning"]) == 0
        loggers = served["log_config"]["loggers"]
        assert loggers["tidemill.llm.proxy"]["level"] == "WARNING"
        assert loggers["tidemill.llm.proxy"]["handlers"]


class TestApiKey:
    def test_it_is_read_from_a_file(self, served: dict[str, Any], tmp_path: Path) -> None:
        path = tmp_path / "key"
        path.write_text("from-a-file-0123\n")
        assert main(["proxy", "--model-alias", "echo=fake", "--api-key-file", str(path)]) == 0
        with TestClient(served["app"]) as client:
            assert chat(client, "echo").status_code == 401
            assert chat(client, "echo", "from-a-file-0123").status_code == 200

    def test_it_is_read_from_the_variable(
        self, served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("TIDEMILL_PROXY_API_KEY", "from-the-env-0123")
        assert main(["proxy", "--model-alias", "echo=fake"]) == 0
        with TestClient(served["app"]) as client:
            assert chat(client, "echo", "from-the-env-0123").status_code == 200

    @pytest.mark.parametrize("content", [None, "", "  \n"])
    def test_a_missing_or_empty_file_fails_at_start(
        self,
        served: dict[str, Any],
        tmp_path: Path,
        content: str | None,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        path = tmp_path / "key"
        if content is not None:
            path.write_text(content)
        assert main(["proxy", "--api-key-file", str(path)]) == 2
        assert "app" not in served
        assert "--api-key-file" in capsys.readouterr().err

    def test_a_key_and_a_key_file_are_one_too_many(
        self, served: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["proxy", "--api-key", "k", "--api-key-file", str(tmp_path / "key")])
        assert exited.value.code == 2
        assert "not allowed with" in capsys.readouterr().err


class TestAliasUpstreams:
    def test_each_alias_reaches_its_own_server_with_its_own_key(
        self,
        served: dict[str, Any],
        upstream: tuple[str, list[dict[str, Any]]],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        url, seen = upstream
        monkeypatch.setenv("LOCAL_LLM_KEY", "local-key-0123")
        status = main(
            [
                "proxy",
                "--model-alias",
                "a=openai-compatible:llama",
                "--alias-base-url",
                f"a={url}/v1",
                "--alias-key-env",
                "a=LOCAL_LLM_KEY",
                "--model-alias",
                "b=openai-compatible:qwen",
                "--alias-base-url",
                f"b={url}/other/v1",
            ]
        )
        assert status == 0
        with TestClient(served["app"]) as client:
            assert chat(client, "a").status_code == 200
            assert chat(client, "b").status_code == 200
        assert [(s["path"], s["auth"], s["model"]) for s in seen] == [
            ("/v1/chat/completions", "Bearer local-key-0123", "llama"),
            ("/other/v1/chat/completions", None, "qwen"),
        ]

    @pytest.mark.parametrize(
        ("argv", "words"),
        [
            (["--model-alias", "local=openai-compatible:llama"], ["'local'", "base URL"]),
            (["--model-alias", "az=azure:gpt4"], ["'az'", "AZURE_OPENAI_ENDPOINT"]),
            (["--alias-base-url", "ghost=http://10.0.0.5/v1"], ["'ghost'", "--model-alias"]),
            (
                ["--model-alias", "a=openai:gpt-4o", "--alias-key-env", "a=NO_SUCH_VARIABLE"],
                ["NO_SUCH_VARIABLE", "'a'"],
            ),
            (
                ["--model-alias", "a=openai:gpt-4o", "--alias-base-url", "a=10.0.0.5:8000"],
                ["'a'", "http"],
            ),
            (["--allow-file-prefix", "photos"], ["prefix"]),
            (["--cors-origin", "app.example"], ["origin"]),
        ],
    )
    def test_a_setup_that_would_fail_every_request_fails_at_start(
        self,
        served: dict[str, Any],
        argv: list[str],
        words: list[str],
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.delenv("NO_SUCH_VARIABLE", raising=False)
        monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
        assert main(["proxy", *argv]) == 2
        assert "app" not in served
        err = capsys.readouterr().err
        for word in words:
            assert word in err

    @pytest.mark.parametrize("flag", ["--alias-base-url", "--alias-key-env"])
    def test_their_form_is_checked_by_the_parser(
        self, served: dict[str, Any], flag: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["proxy", flag, "no-equals-sign"])
        assert exited.value.code == 2
        assert "expected NAME=" in capsys.readouterr().err


class TestRequestPolicy:
    def test_cors_origins_files_and_the_read_timeout_reach_the_app(
        self, served: dict[str, Any]
    ) -> None:
        argv = ["proxy", "--model-alias", "echo=fake", "--cors-origin", "https://app.example"]
        argv += ["--allow-file-prefix", "s3://photos", "--read-timeout", "12.5"]
        assert main(argv) == 0
        image = {"type": "image_url", "image_url": {"url": "s3://photos/cat.png"}}
        other = {"type": "image_url", "image_url": {"url": "s3://secret/cat.png"}}
        with TestClient(served["app"]) as client:
            allowed = chat(client, "echo", origin="https://app.example")
            served_image = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": [{"role": "user", "content": [image]}]},
            )
            refused = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": [{"role": "user", "content": [other]}]},
            )
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert served_image.status_code == 200
        assert refused.status_code == 400

    def test_an_unconfigured_local_vendor_is_not_served(self, served: dict[str, Any]) -> None:
        assert main(["proxy"]) == 0
        with TestClient(served["app"]) as client:
            reply = chat(client, "ollama:llama3.2")
        assert (reply.status_code, reply.json()["error"]["code"]) == (404, "model_not_found")
