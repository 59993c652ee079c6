"""Aliases with a base URL and key of their own, and a setup checked when the proxy starts."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from llm_replay import Recorder, json_reply
from test_proxy_app import answer, call

from tidemill.errors import ConfigurationError
from tidemill.llm import ScriptedModel
from tidemill.llm.proxy import ModelRouter, create_app

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


def chat(model: str) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "Hi"}]}).encode()


class TestAliasOptions:
    async def test_each_alias_carries_its_own_base_url_and_key(self) -> None:
        recorder = Recorder([json_reply(ANSWER), json_reply(ANSWER), json_reply(ANSWER)])
        router = ModelRouter(
            aliases={"a": "openai-compatible:llama", "b": "openai-compatible:llama"},
            alias_options={
                "a": {"base_url": "http://10.0.0.5:8000/v1", "api_key": "key-for-a-0123"},
                "b": {"base_url": "http://10.0.0.6:8000/v1"},
            },
            http_client=recorder.client(),
        )
        app = create_app(router)
        for name in ("a", "b", "a"):
            status, raw = answer(await call(app, chat(name)))
            assert status == 200, raw
        seen = [(str(r.url), r.headers.get("authorization")) for r in recorder.requests]
        assert seen == [
            ("http://10.0.0.5:8000/v1/chat/completions", "Bearer key-for-a-0123"),
            ("http://10.0.0.6:8000/v1/chat/completions", None),
            ("http://10.0.0.5:8000/v1/chat/completions", "Bearer key-for-a-0123"),
        ]
        assert router.resolve("a") is not router.resolve("b")
        assert "key-for-a-0123" in router.secrets()

    def test_alias_options_win_over_provider_options(self) -> None:
        router = ModelRouter(
            aliases={"a": "openai:gpt-4o"},
            provider_options={"openai": {"api_key": "sk-shared-0123456789", "timeout": 5.0}},
            alias_options={"a": {"base_url": "http://gateway.test/v1"}},
        )
        a, plain = router.resolve("a"), router.resolve("openai:gpt-4o")
        assert a.describe()["base_url"] == "http://gateway.test/v1"
        assert plain.describe()["base_url"] == "https://api.openai.com/v1"

    @pytest.mark.parametrize(
        ("aliases", "options", "words"),
        [
            ({}, {"ghost": {"base_url": "http://x.test"}}, "'ghost', which is not an alias"),
            ({"m": ScriptedModel()}, {"m": {"base_url": "http://x.test"}}, "a Model object"),
            ({"a": "openai:gpt-4o"}, {"a": "http://x.test"}, "a mapping of options"),
        ],
    )
    def test_options_for_what_is_no_spec_alias_are_refused(
        self, aliases: dict[str, Any], options: dict[str, Any], words: str
    ) -> None:
        with pytest.raises(ConfigurationError, match=words):
            ModelRouter(aliases=aliases, alias_options=options)


class TestCheck:
    @pytest.mark.parametrize(
        ("router", "words"),
        [
            (
                lambda: ModelRouter(aliases={"local": "openai-compatible:llama"}),
                ["'local'", "OPENAI_COMPATIBLE_BASE_URL"],
            ),
            (
                lambda: ModelRouter(aliases={"az": "azure:my-deployment"}),
                ["'az'", "AZURE_OPENAI_ENDPOINT"],
            ),
            (lambda: ModelRouter(models=["openai-compatible:x"]), ["'openai-compatible:x'"]),
            (lambda: ModelRouter(aliases={"o": "openai"}), ["'o'", "no model"]),
            (
                lambda: ModelRouter(
                    aliases={"a": "openai:gpt-4o"}, alias_options={"a": {"base_ur": "http://x"}}
                ),
                ["'a'", "Did you mean 'base_url'?"],
            ),
        ],
    )
    def test_an_alias_that_would_fail_every_request_fails_at_start(
        self, router: Any, words: list[str]
    ) -> None:
        with pytest.raises(ConfigurationError) as caught:
            router().check()
        for word in words:
            assert word in str(caught.value)

    def test_a_missing_key_is_told_to_the_operator_not_refused(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        router = ModelRouter(aliases={"claude": "anthropic:claude-sonnet-4-5", "echo": "fake"})
        with caplog.at_level(logging.WARNING, logger="tidemill.llm.proxy"):
            router.check()
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1 and "ANTHROPIC_API_KEY" in warnings[0]

    def test_a_good_setup_passes(self) -> None:
        ModelRouter(
            aliases={"local": "openai-compatible:llama", "echo": "fake", "s": ScriptedModel()},
            alias_options={"local": {"base_url": "http://10.0.0.5:8000/v1"}},
            models=["fake"],
        ).check()
