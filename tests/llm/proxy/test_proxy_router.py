"""`ModelRouter` and the mapping of failures to HTTP statuses."""

from __future__ import annotations

import difflib

import pytest
from llm_replay import API_KEY

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    MalformedToolCall,
    MissingCredentialsError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ScriptExhausted,
)
from tidemill.llm import (
    AnthropicModel,
    OpenAIChatModel,
    ScriptedModel,
)
from tidemill.llm.proxy import (
    MAX_MODEL_NAME,
    InvalidRequest,
    ModelRouter,
    ProxyError,
    UnknownModel,
    create_app,
    proxy_error,
)


class TestRouter:
    def test_a_spec_string_is_built_once_and_reused(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}})
        model = router.resolve("openai:gpt-4o-mini")
        assert isinstance(model, OpenAIChatModel)
        assert router.resolve("openai:gpt-4o-mini") is model
        assert router.resolve("gpt-4o-mini") is not model  # another spec string, another model
        assert API_KEY in router.secrets()

    def test_aliases_name_specs_or_models(self) -> None:
        echo = ScriptedModel(["hi"])
        router = ModelRouter(
            aliases={"claude": "anthropic:claude-sonnet-4-5", "echo": echo},
            provider_options={"anthropic": {"api_key": API_KEY, "max_tokens": 100}},
        )
        claude = router.resolve("claude")
        assert isinstance(claude, AnthropicModel)
        assert (claude.model_name, claude.settings) == ("claude-sonnet-4-5", {"max_tokens": 100})
        assert router.resolve("anthropic:claude-sonnet-4-5") is claude
        assert router.resolve("echo") is echo

    def test_only_listed_names_are_served_when_asked(self) -> None:
        router = ModelRouter(
            aliases={"fast": "openai:gpt-4o-mini"},
            models=["openai:gpt-4o"],
            allow_unlisted=False,
            provider_options={"openai": {"api_key": API_KEY}},
        )
        assert router.listed() == ["openai:gpt-4o", "fast"]
        assert router.resolve("openai:gpt-4o").model_name == "gpt-4o"
        with pytest.raises(UnknownModel, match=r"not served by this proxy\. Did you mean"):
            router.resolve("openai:gpt-4o-mini")

    @pytest.mark.parametrize(
        ("name", "words"),
        [
            ("gpt4o-mini", "Did you mean 'openai:gpt-4o-mini'?"),
            ("fats", "Did you mean 'fast'?"),
            ("antropic:claude", "Did you mean 'anthropic:claude'"),
            ("fake", "offline model 'fake' is served only under a name the proxy's operator"),
            ("openai:", "names no model"),
            ("openai", "names a provider but no model"),
        ],
    )
    def test_an_unknown_name_says_what_is_close(self, name: str, words: str) -> None:
        router = ModelRouter(aliases={"fast": "openai:gpt-4o-mini"}, models=["openai:gpt-4o-mini"])
        with pytest.raises(UnknownModel) as caught:
            router.resolve(name)
        assert caught.value.status == 404
        assert words in caught.value.message

    def test_a_provider_without_an_adapter_is_a_404(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Every known provider has an adapter today; take one away to reach the refusal.
        from tidemill.llm import _spec

        monkeypatch.delitem(_spec._ADAPTERS, "bedrock")
        router = ModelRouter()
        with pytest.raises(UnknownModel, match="cannot be served"):
            router.resolve("bedrock:some-model")

    def test_a_bad_provider_option_is_the_proxys_own_500(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": "k", "base_ur": "http://x"}})
        with pytest.raises(ProxyError) as caught:
            router.resolve("openai:gpt-4o")
        assert (caught.value.status, caught.value.code) == (500, "proxy_misconfigured")
        assert "Did you mean 'base_url'?" in caught.value.message

    def test_a_missing_upstream_key_is_a_404_that_blames_no_key(self) -> None:
        with pytest.raises(UnknownModel) as caught:
            ModelRouter().resolve("anthropic:claude-sonnet-4-5")
        assert (caught.value.status, caught.value.code) == (404, "model_not_found")
        assert "not served by this proxy" in caught.value.message
        assert "ANTHROPIC_API_KEY" not in caught.value.message

    async def test_aclose_closes_what_it_built_and_leaves_the_rest(self) -> None:
        class Tracked(ScriptedModel):
            closed = False

            async def aclose(self) -> None:
                self.closed = True

        mine = Tracked()
        router = ModelRouter(aliases={"mine": mine}, provider_options={"openai": {"api_key": "k"}})
        built = router.resolve("openai:gpt-4o")
        shared = router._client
        await router.aclose()
        assert shared is not None and shared.is_closed
        assert not mine.closed
        assert router.resolve("openai:gpt-4o") is not built
        await router.aclose()

    def test_a_bad_keep_alive_interval_is_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="keep-alive"):
            create_app(keepalive=0)


@pytest.mark.parametrize(
    ("error", "status", "code", "headers"),
    [
        (RateLimitError("slow", provider="p", retry_after=2.2), 429, "rate_limit_exceeded",
         {"retry-after": "3", "retry-after-ms": "2200"}),
        (RateLimitError("quota", provider="p", code="insufficient_quota"), 429,
         "insufficient_quota", {}),
        (AuthenticationError("no", provider="p", status_code=401), 401,
         "upstream_authentication_failed", {}),
        (AuthenticationError("no", provider="p", status_code=403), 403,
         "upstream_authentication_failed", {}),
        (ContextWindowExceeded("long", provider="p", status_code=400), 400,
         "context_length_exceeded", {}),
        (ProviderTimeout("slow", provider="p"), 504, "upstream_timeout", {}),
        (ProviderError("bad", provider="p", status_code=400, code="invalid_value"), 400,
         "invalid_value", {}),
        (ProviderError("gone", provider="p", status_code=404, code="model_not_found"), 404,
         "model_not_found", {}),
        (ProviderError("boom", provider="p", status_code=500), 502, "upstream_error", {}),
        (ProviderError("overloaded", provider="p", status_code=529, code="overloaded_error"),
         502, "overloaded_error", {}),
        (ProviderError("cut", provider="p"), 502, "upstream_error", {}),
        (MalformedToolCall("no name"), 502, "upstream_malformed_tool_call", {}),
        (ConfigurationError("DeepSeek takes text only."), 400, "unsupported_for_model", {}),
        (MissingCredentialsError("No OPENAI_API_KEY."), 404, "model_not_found", {}),
        (ScriptExhausted(1), 500, "internal_error", {}),
        (RuntimeError("secret internals"), 500, "internal_error", {}),
    ],
)  # fmt: skip
def test_failures_map_to_statuses(
    error: Exception, status: int, code: str, headers: dict[str, str]
) -> None:
    translated = proxy_error(error)
    assert (translated.status, translated.code, translated.headers) == (status, code, headers)
    assert "secret internals" not in translated.message


def test_error_bodies_are_scrubbed_of_keys() -> None:
    error = ProxyError(f"key {API_KEY} and sk-abcdefghijklmnopqrstuvwx", status=400)
    assert error.body([API_KEY]) == {
        "error": {
            "message": "key [REDACTED] and [REDACTED]",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


class TestBounds:
    """What a client's model names may cost: the suggestions, the cache, the secrets."""

    @pytest.mark.parametrize("name", ["x" * (MAX_MODEL_NAME + 1), "openai:" + "x" * (1 << 20)])
    def test_an_over_long_name_is_a_400_before_any_suggestion(
        self, name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def no_suggestions(*args: object, **kwargs: object) -> list[str]:
            raise AssertionError("an over-long name was compared")

        monkeypatch.setattr(difflib, "get_close_matches", no_suggestions)
        router = ModelRouter(aliases={"fast": "openai:gpt-4o-mini"}, allow_unlisted=False)
        with pytest.raises(InvalidRequest) as caught:
            router.resolve(name)
        assert (caught.value.status, caught.value.param) == (400, "model")
        assert str(MAX_MODEL_NAME) in caught.value.message
        assert name not in caught.value.message

    def test_a_name_at_the_limit_is_still_read(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}})
        name = "openai:" + "m" * (MAX_MODEL_NAME - len("openai:"))
        assert router.resolve(name).model_name == name.partition(":")[2]

    def test_models_built_for_clients_names_are_bounded(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}}, max_models=3)
        first = router.resolve("openai:m0")
        assert router.resolve("openai:m0") is first
        for i in range(1, 10):
            router.resolve(f"openai:m{i}")
        assert router.resolve("openai:m9") is router.resolve("openai:m9")
        assert router.resolve("openai:m0") is not first  # dropped, built again

    def test_the_least_recently_used_model_is_dropped_first(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}}, max_models=2)
        kept = router.resolve("openai:a")
        router.resolve("openai:b")
        assert router.resolve("openai:a") is kept  # used again: now the most recent
        router.resolve("openai:c")  # drops b
        assert router.resolve("openai:a") is kept

    def test_aliases_and_listed_models_stay_built(self) -> None:
        router = ModelRouter(
            aliases={"fast": "openai:gpt-4o-mini"},
            provider_options={"openai": {"api_key": API_KEY}},
            max_models=1,
        )
        fast = router.resolve("fast")
        for i in range(5):
            router.resolve(f"openai:m{i}")
        assert router.resolve("fast") is fast

    def test_the_secrets_do_not_grow_with_the_models(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}})
        router.resolve("openai:m0")
        before = router.secrets()
        for i in range(1, 50):
            router.resolve(f"openai:m{i}")
        assert router.secrets() == before
        assert API_KEY in before

    def test_a_relay_follows_its_model_out_of_the_cache(self) -> None:
        router = ModelRouter(provider_options={"openai": {"api_key": API_KEY}}, max_models=2)
        models = [router.resolve(f"openai:m{i}") for i in range(6)]
        assert len(router._relays) <= 2
        assert all(router.relay(m) is None for m in models[:4])

    def test_the_secrets_of_a_model_passed_in_are_scrubbed_too(self) -> None:
        mine = OpenAIChatModel("gpt-4o", api_key="sk-mine-0123456789", base_url="http://u.test")
        assert "sk-mine-0123456789" in ModelRouter(aliases={"mine": mine}).secrets()

    def test_the_bound_must_be_positive(self) -> None:
        with pytest.raises(ConfigurationError, match="max_models"):
            ModelRouter(max_models=0)
