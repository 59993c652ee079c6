"""Real vendors, called for real: each test runs only when its API key is in the environment.

Run them with e.g. `OPENAI_API_KEY=... .venv/bin/python -m pytest -m live`.
Everywhere else (CI included) they are skipped, saying which key is missing.
"""

from __future__ import annotations

import pytest
from live_keys import LIVE_KEYS

from tidemill import AgentResponse, agent, tool
from tidemill.types import TextDelta

pytestmark = pytest.mark.live

PROVIDERS = [
    ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ("openai-responses:gpt-4.1-mini", "OPENAI_API_KEY"),
    ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY"),
    ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
    ("mistral:mistral-small-latest", "MISTRAL_API_KEY"),
    ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY"),
    ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
]


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def keyed(spec: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key = LIVE_KEYS.get(variable)
    if key is None:
        pytest.skip(f"{variable} is not set; live tests call {spec} only with a real key")
    monkeypatch.setenv(variable, key)


@pytest.mark.parametrize(("spec", "variable"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
async def test_a_tool_round_trip(spec: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keyed(spec, variable, monkeypatch)
    bot = agent().llm(spec, temperature=0).tool(multiply).max_iterations(4)
    response: AgentResponse = await bot.arun(
        "Use the multiply tool to compute 12 times 34, then answer with the number only."
    )
    assert any(step.tool_calls for step in response.steps)
    assert "408" in str(response.output)
    assert response.usage.input_tokens > 0
    await bot.aclose()


@pytest.mark.parametrize(("spec", "variable"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
async def test_a_streamed_answer(spec: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keyed(spec, variable, monkeypatch)
    bot = agent().llm(spec, max_tokens=50)
    events = [event async for event in bot.astream("Say the word 'tide' and nothing else.")]
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert "tide" in text.lower()
    assert events[-1].type == "done"
    await bot.aclose()
