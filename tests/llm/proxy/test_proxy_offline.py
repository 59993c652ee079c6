"""The offline model behind the proxy (`tidemill proxy --model-alias NAME=fake`), via the SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from proxy_serve import sdk, serve
from starlette.types import ASGIApp

from tidemill.cli import main
from tidemill.llm.proxy import ModelRouter, UnknownModel

HELLO: list[Any] = [
    {"role": "system", "content": "Repeat after me."},
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": "first"},
    {"role": "user", "content": "tide tables"},
]


def proxy_app(monkeypatch: pytest.MonkeyPatch, *flags: str) -> ASGIApp:
    """The app `tidemill proxy FLAGS` would serve (uvicorn is not started)."""
    served: list[ASGIApp] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **options: served.append(app))
    assert main(["proxy", *flags]) == 0
    return served[0]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`tidemill proxy --model-alias test=fake --model listed-fake`'s base URL."""
    monkeypatch.delenv("TIDEMILL_PROXY_API_KEY", raising=False)
    app = proxy_app(monkeypatch, "--model-alias", "test=fake", "--model", "fake")
    with serve(app) as url:
        yield url


class TestAnAliasToTheOfflineModel:
    def test_it_answers_with_the_last_user_message(self, offline: str) -> None:
        completion = sdk(offline).chat.completions.create(model="test", messages=HELLO)
        assert completion.model == "test"
        assert completion.choices[0].message.content == "tide tables"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.usage is not None and completion.usage.completion_tokens > 0

    def test_it_streams_the_same_answer(self, offline: str) -> None:
        stream = sdk(offline).chat.completions.create(
            model="test",
            messages=HELLO,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "tide tables"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage is not None

    def test_structured_output_gets_a_value_of_the_schema(self, offline: str) -> None:
        schema = {
            "type": "object",
            "properties": {"label": {"enum": ["refund", "bug"]}, "score": {"type": "integer"}},
            "required": ["label", "score"],
            "additionalProperties": False,
        }
        completion = sdk(offline).chat.completions.create(
            model="test",
            messages=HELLO,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "ticket", "schema": schema, "strict": True},
            },
        )
        content = completion.choices[0].message.content
        assert content is not None and json.loads(content) == {"label": "refund", "score": 0}

    def test_it_is_listed_as_the_offline_model(self, offline: str) -> None:
        listed = [(m.id, m.owned_by) for m in sdk(offline).models.list()]
        assert listed == [("fake", "fake"), ("test", "fake")]

    def test_a_listed_fake_is_served_too(self, offline: str) -> None:
        completion = sdk(offline).chat.completions.create(model="fake", messages=HELLO)
        assert completion.choices[0].message.content == "tide tables"


class TestTheOfflineModelUnasked:
    def test_a_bare_fake_is_refused_even_after_an_alias_served_it(self) -> None:
        router = ModelRouter(aliases={"test": "fake"})
        router.resolve("test")
        with pytest.raises(UnknownModel) as caught:
            router.resolve("fake")
        assert "only under a name the proxy's operator chose" in caught.value.message
        assert "Did you mean" not in caught.value.message

    def test_through_the_sdk_it_is_a_404_that_suggests_no_refused_name(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("TIDEMILL_PROXY_API_KEY", raising=False)
        with serve(proxy_app(monkeypatch, "--model-alias", "test=fake")) as url:
            client = sdk(url)
            for name in ("fake", "scripted"):
                with pytest.raises(openai.NotFoundError) as caught:
                    client.chat.completions.create(model=name, messages=HELLO)
                assert caught.value.body["code"] == "model_not_found"  # type: ignore[index]
                assert "'fake'" not in caught.value.body["message"].partition(".")[2]  # type: ignore[index]

    @pytest.mark.parametrize("name", ["fak", "fakes", "scriptd"])
    def test_a_typo_of_an_offline_name_is_not_told_to_use_it(self, name: str) -> None:
        with pytest.raises(UnknownModel) as caught:
            ModelRouter().resolve(name)
        message = caught.value.message
        assert "'fake'" not in message and "'scripted'" not in message
        assert "'provider:model'" in message

    def test_a_typo_still_gets_the_real_providers_close_to_it(self) -> None:
        with pytest.raises(UnknownModel, match=r"Did you mean 'openai:gpt-4o'\?"):
            ModelRouter().resolve("opnai:gpt-4o")
        with pytest.raises(UnknownModel, match=r"Did you mean 'openai:<model id>'\?"):
            ModelRouter().resolve("opena")

    @pytest.mark.parametrize(
        ("aliases", "models", "name"),
        [
            ({"test": "fake"}, [], "test"),  # the item of the issue: 'test' suggested 'test'
            ({"azure": "azure"}, [], "azure"),  # an alias that cannot be served
            ({}, ["openai"], "openai"),  # a listed name that cannot be served
        ],
    )
    def test_no_error_suggests_the_name_asked_for(
        self, aliases: dict[str, str], models: list[str], name: str
    ) -> None:
        router = ModelRouter(aliases=aliases, models=models)
        if name == "test":  # served: the offline model behind an alias
            assert router.resolve(name).provider == "scripted"
            return
        with pytest.raises(UnknownModel) as caught:
            router.resolve(name)
        assert f"Did you mean {name!r}" not in caught.value.message

    def test_a_close_name_that_cannot_be_served_is_not_suggested(self) -> None:
        router = ModelRouter(models=["openai", "openai:gpt-4o"])
        with pytest.raises(UnknownModel) as caught:
            router.resolve("opena")
        assert "'openai'" not in caught.value.message.replace("'openai:gpt-4o'", "")


class TestEveryModel:
    def test_star_serves_every_name_offline_and_is_not_listed(self) -> None:
        router = ModelRouter(aliases={"*": "fake", "claude": "anthropic:claude-sonnet-4-5"})
        assert router.resolve("openai:gpt-4o").provider == "scripted"
        assert router.resolve("anything") is router.resolve("fake")  # one model, not one a name
        assert router.listed() == ["claude"]

    def test_star_on_the_command_line(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("TIDEMILL_PROXY_API_KEY", raising=False)
        with serve(proxy_app(monkeypatch, "--model-alias", "*=fake")) as url:
            completion = sdk(url).chat.completions.create(model="gpt-4o", messages=HELLO)
        assert completion.choices[0].message.content == "tide tables"


def test_an_alias_to_a_mistyped_spec_fails_at_startup(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("uvicorn.run", lambda app, **options: pytest.fail("served"))
    assert main(["proxy", "--model-alias", "test=fkae"]) == 2
    error = capsys.readouterr().err
    assert "The model alias 'test': Unknown model provider in 'fkae'." in error
    assert "Did you mean 'fake'?" in error  # here the operator writes the spec: 'fake' is right
