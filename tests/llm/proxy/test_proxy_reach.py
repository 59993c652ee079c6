"""What a client reaches: local services, providers the operator did not set up, stored files."""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
from llm_replay import Recorder, json_reply
from test_proxy_app import answer, call

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.llm import ScriptedModel
from tidemill.llm.proxy import ModelRouter, UnknownModel, create_app, proxy_error

HELLO = [{"role": "user", "content": "Hello"}]
OPENAI_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "llama3.2",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def chat(model: str, **fields: Any) -> bytes:
    return json.dumps({"model": model, "messages": HELLO, **fields}).encode()


def error_of(sent: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    status, raw = answer(sent)
    return status, json.loads(raw)["error"]


class TestLocalServices:
    """`ollama:` and `vllm:` default to services on the proxy's own host."""

    @pytest.mark.parametrize("name", ["ollama:llama3.2", "vllm:meta-llama/Llama-3.1-8B"])
    async def test_an_unconfigured_local_vendor_is_not_served_and_not_called(
        self, name: str
    ) -> None:
        recorder = Recorder([json_reply(OPENAI_ANSWER)])
        app = create_app(ModelRouter(http_client=recorder.client()))
        status, error = error_of(await call(app, chat(name)))
        assert (status, error["code"], error["param"]) == (404, "model_not_found", "model")
        assert recorder.requests == []

    def test_the_operator_log_says_how_to_serve_it_once(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        router = ModelRouter()
        with caplog.at_level(logging.WARNING, logger="tidemill.llm.proxy"):
            for _ in range(3):
                with pytest.raises(UnknownModel):
                    router.resolve("ollama:llama3.2")
        notes = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(notes) == 1
        assert "OLLAMA_BASE_URL" in notes[0] and "--model-alias" in notes[0]

    @pytest.mark.parametrize(
        "router",
        [
            pytest.param(lambda: ModelRouter(aliases={"local": "ollama:llama3.2"}), id="alias"),
            pytest.param(lambda: ModelRouter(aliases={"*": "ollama:llama3.2"}), id="every"),
            pytest.param(lambda: ModelRouter(models=["ollama:llama3.2"]), id="listed"),
            pytest.param(
                lambda: ModelRouter(provider_options={"ollama": {"timeout": 30.0}}), id="options"
            ),
        ],
    )
    def test_the_operator_can_serve_it(self, router: Any) -> None:
        built = router()
        name = "local" if "local" in built.aliases else "ollama:llama3.2"
        assert built.resolve(name).provider == "ollama"

    def test_a_base_url_variable_serves_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:1/v1")
        model = ModelRouter().resolve("ollama:llama3.2")
        assert model.describe()["base_url"] == "http://127.0.0.1:1/v1"

    def test_its_alias_does_not_open_the_vendor_to_every_name(self) -> None:
        router = ModelRouter(aliases={"local": "ollama:llama3.2"})
        assert router.resolve("local").provider == "ollama"
        with pytest.raises(UnknownModel):
            router.resolve("ollama:llama3.2")  # built for the alias, not served by its spec
        with pytest.raises(UnknownModel):
            router.resolve("ollama:other")

    async def test_a_configured_local_vendor_is_served(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OLLAMA_BASE_URL", "http://ollama.test/v1")
        recorder = Recorder([json_reply(OPENAI_ANSWER)])
        app = create_app(ModelRouter(http_client=recorder.client()))
        status, raw = answer(await call(app, chat("ollama:llama3.2")))
        assert status == 200, raw
        assert [str(r.url) for r in recorder.requests] == ["http://ollama.test/v1/chat/completions"]


class TestUnconfiguredProviders:
    """A provider without its key or base URL: not served here, and the operator is told."""

    @pytest.mark.parametrize(
        ("name", "variable"),
        [
            ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY"),
            ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
            ("openai-compatible:llama", "OPENAI_COMPATIBLE_BASE_URL"),
            ("azure:my-deployment", "AZURE_OPENAI_ENDPOINT"),
        ],
    )
    async def test_it_is_a_404_and_one_log_line_naming_the_variable(
        self, name: str, variable: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        app = create_app(ModelRouter())
        with caplog.at_level(logging.INFO, logger="tidemill.llm.proxy"):
            first = error_of(await call(app, chat(name)))
            second = error_of(await call(app, chat(name)))
        for status, error in (first, second):
            assert (status, error["code"], error["type"]) == (
                404,
                "model_not_found",
                "invalid_request_error",
            )
            assert "not served by this proxy" in error["message"]
            assert variable not in error["message"] and "key" not in error["message"].lower()
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and variable in warnings[0]

    @pytest.mark.parametrize(
        "error",
        [
            MissingCredentialsError(
                "No AWS credentials for the bedrock provider.",
                context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID"},
            ),
            ConfigurationError(
                "Half an AWS key pair for the bedrock provider: AWS_SECRET_ACCESS_KEY is missing.",
                context={"provider": "bedrock", "env": "AWS_SECRET_ACCESS_KEY"},
            ),
        ],
    )
    def test_credentials_missing_when_the_call_is_made_are_a_404_too(
        self, error: ConfigurationError
    ) -> None:
        translated = proxy_error(error)
        assert (translated.status, translated.code) == (404, "model_not_found")
        assert "AWS" not in translated.message

    async def test_credentials_missing_in_a_stream_are_a_404_logged_once(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        class Unsigned(ScriptedModel):
            async def request(self, request: Any) -> Any:
                raise MissingCredentialsError(
                    "No AWS credentials for the bedrock provider.",
                    context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID"},
                )

            async def stream(self, request: Any) -> Any:
                await self.request(request)
                yield  # pragma: no cover

        app = create_app(ModelRouter(aliases={"b": Unsigned()}))
        with caplog.at_level(logging.INFO, logger="tidemill.llm.proxy"):
            for fields in ({}, {"stream": True}, {}):
                status, error = error_of(await call(app, chat("b", **fields)))
                assert (status, error["code"]) == (404, "model_not_found")
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "AWS_ACCESS_KEY_ID" in warnings[0]


class TestEncodedKeys:
    """An upstream that echoes the proxy's key in another encoding still leaks nothing."""

    SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"  # AWS's documented example secret

    @pytest.mark.parametrize(
        "echo",
        [
            quote(SECRET, safe=""),
            re.sub("%[0-9A-F]{2}", lambda escape: escape.group().lower(), quote(SECRET, safe="")),
            quote_plus(SECRET),
            quote(SECRET),
            json.dumps(SECRET)[1:-1].replace("/", "\\/"),
        ],
        ids=["url", "url-lowercase", "form", "path", "json"],
    )
    async def test_an_encoded_echo_is_redacted(
        self, echo: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        assert echo != self.SECRET
        reply = httpx.Response(
            400, headers={"content-type": "text/plain"}, content=f"bad key {echo}".encode()
        )
        recorder = Recorder([reply])
        router = ModelRouter(
            provider_options={"openai": {"api_key": self.SECRET, "base_url": "http://u.test/v1"}},
            http_client=recorder.client(),
        )
        with caplog.at_level(logging.INFO, logger="tidemill.llm.proxy"):
            status, error = error_of(await call(create_app(router), chat("openai:gpt-4o")))
        assert status == 400
        assert echo not in error["message"] and "[REDACTED]" in error["message"]
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert "[REDACTED]" in logged and echo not in logged


class TestFileURLs:
    """Images the upstream would read with the proxy's own cloud credentials."""

    @staticmethod
    def with_image(url: object, *, text_first: bool = True) -> bytes:
        part: dict[str, Any] = {"type": "image_url", "image_url": url}
        content: list[Any] = [{"type": "text", "text": "What is this?"}] if text_first else []
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [*content, part]},
        ]
        return json.dumps({"model": "echo", "messages": messages}).encode()

    @staticmethod
    def app(**options: Any) -> Any:
        echo = ScriptedModel(handler=lambda r: " ".join(i.url for i in r.messages[-1].images))
        return create_app(ModelRouter(aliases={"echo": echo}), **options)

    @pytest.mark.parametrize(
        "url",
        [
            "s3://team-a/private/scan.png",
            "S3://team-a/private/scan.png",
            "gs://team-a/scan.png",
            " gs://team-a/scan.png",
            "https://generativelanguage.googleapis.com/v1beta/files/abc123",
            "https://GenerativeLanguage.googleapis.com./upload/v1beta/files/abc123",
            "https://generativelanguage%2Egoogleapis.com/v1beta/files/abc123",
            "files/abc123",
            "file:///etc/passwd",
        ],
    )
    async def test_a_stored_file_is_refused_naming_the_field(self, url: str) -> None:
        status, error = error_of(await call(self.app(), self.with_image({"url": url})))
        assert status == 400
        assert error["param"] == "messages[1].content[1].image_url.url"
        assert error["type"] == "invalid_request_error"

    async def test_the_field_is_named_for_a_bare_string_too(self) -> None:
        body = self.with_image("gs://team-a/scan.png", text_first=False)
        status, error = error_of(await call(self.app(), body))
        assert (status, error["param"]) == (400, "messages[1].content[0].image_url")

    @pytest.mark.parametrize(
        "url", ["https://example.com/cat.png", "data:image/png;base64,iVBORw0KGgo="]
    )
    async def test_public_and_inline_images_pass(self, url: str) -> None:
        status, raw = answer(await call(self.app(), self.with_image({"url": url})))
        assert status == 200, raw
        assert json.loads(raw)["choices"][0]["message"]["content"] == url

    @pytest.mark.parametrize(
        ("url", "served"),
        [
            ("s3://photos/cat.png", True),
            ("s3://photos/2024/cat.png", True),
            ("s3://photos", True),
            ("s3://photos-private/cat.png", False),
            ("s3://photos/../private/cat.png", False),
            ("s3://photos/%2E%2E/private/cat.png", False),
            ("gs://shared/team/cat.png", True),
            ("gs://shared/other/cat.png", False),
            ("gs://shared/teammates/cat.png", False),
        ],
    )
    async def test_the_operator_allows_buckets_and_prefixes(self, url: str, served: bool) -> None:
        app = self.app(allow_file_prefixes=["s3://photos", "gs://shared/team/"])
        status, raw = answer(await call(app, self.with_image({"url": url})))
        assert (status == 200) is served, raw

    @pytest.mark.parametrize("prefix", ["", "s3://", "gs:///x", "ftp://host/", "photos"])
    def test_a_prefix_that_names_no_bucket_is_refused_at_start(self, prefix: str) -> None:
        with pytest.raises(ConfigurationError, match="prefix"):
            self.app(allow_file_prefixes=[prefix])
