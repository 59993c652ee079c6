"""The engine's model wrappers (metering, budgets) keep what the wrapped model says about itself."""

from __future__ import annotations

from tidemill.agents import UsageLimits
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.engine.ai._budget import BudgetModel
from tidemill.engine.ai._usage import MeteredModel
from tidemill.llm import Model, ModelRequest, ModelSettings, ScriptedModel
from tidemill.types import Message, Usage


class Thinking(ScriptedModel):
    """A model with a reasoning budget and a default max_tokens, as Anthropic's has."""

    thinking_budget = 1024
    settings = ModelSettings(max_tokens=2000)


def wrappers(model: Model) -> list[Model]:
    metered = MeteredModel(model, {})
    budgeted = BudgetModel(model, MemoryCheckpointer(), "t", {})
    return [metered, budgeted, BudgetModel(metered, MemoryCheckpointer(), "t", {})]


def test_a_wrapped_model_still_takes_output_formats_when_it_does() -> None:
    prompt_only = ScriptedModel()
    prompt_only.supports_output_format = False
    assert all(w.supports_output_format for w in wrappers(ScriptedModel()))
    assert not any(w.supports_output_format for w in wrappers(prompt_only))


def test_token_limits_see_the_wrapped_models_thinking_budget_and_default() -> None:
    request = ModelRequest([Message.user("go")])
    used = Usage(output_tokens=30)
    for wrapped in wrappers(Thinking()):
        # 1,024 output tokens left: at the thinking budget, which the provider would refuse.
        fitted = UsageLimits(output_tokens=1054).fit_model(request, used, wrapped)
        assert "max_tokens" not in fitted.settings
        # 1,500 left: below the model's own 2,000, so it is lowered.
        fitted = UsageLimits(output_tokens=1530).fit_model(request, used, wrapped)
        assert fitted.settings["max_tokens"] == 1500
        # 2,470 left: above the model's own default, which is never raised.
        fitted = UsageLimits(output_tokens=2500).fit_model(request, used, wrapped)
        assert "max_tokens" not in fitted.settings
