"""`ModelAliases`: the names the proxy and `--model-alias` workers look up first."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill import ConfigurationError
from tidemill.llm import EVERY_MODEL, Model, ModelAliases, ScriptedModel


def test_a_name_has_its_own_alias_else_the_star_one() -> None:
    echo = ScriptedModel()
    aliases = ModelAliases([("fast", "openai:gpt-4o-mini"), ("echo", echo), (EVERY_MODEL, "fake")])
    assert aliases.target("fast") == "openai:gpt-4o-mini"
    assert aliases.target("echo") is echo
    assert aliases.target("anything else") == "fake"
    assert aliases.names() == ["echo", "fast"]
    assert ModelAliases({"fast": "openai:gpt-4o-mini"}).target("slow") is None


def test_a_later_pair_wins_and_names_and_specs_are_trimmed() -> None:
    aliases = ModelAliases([(" a ", "fake"), ("a", " ollama:llama3 ")])
    assert dict(aliases) == {"a": "ollama:llama3"}


@pytest.mark.parametrize(
    ("pairs", "words"),
    [
        ([("", "fake")], "needs a name"),
        ([("  ", "fake")], "needs a name"),
        ([("a", "")], "names no model"),
        ([("a", None)], "names no model"),
        ([("a", 3)], "names no model"),
        ([(None, "fake")], "needs a name"),
    ],
)
def test_an_alias_without_a_name_or_a_model_is_refused(pairs: Any, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        ModelAliases(pairs)


def test_check_names_the_alias_whose_spec_is_mistyped() -> None:
    fine: dict[str, str | Model] = {"a": "fake", "b": ScriptedModel(), "*": "openai:gpt-4o"}
    ModelAliases(fine).check()
    with pytest.raises(ConfigurationError) as caught:
        ModelAliases({"claude": "antropic:claude-sonnet-4-5"}).check()
    assert caught.value.message.startswith("The model alias 'claude': Unknown model provider")
    assert caught.value.hint == "Did you mean 'anthropic' or 'anthropic-vertex'?"
    assert caught.value.context["alias"] == "claude"
