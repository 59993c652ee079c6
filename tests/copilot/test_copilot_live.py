"""The golden tasks with a real model: run only when its API key is set (`pytest -m live`)."""

from __future__ import annotations

import pytest
from tests.copilot.conftest import Shop
from tests.live.live_keys import LIVE_KEYS

from tidemill.copilot import Copilot
from tidemill.errors import AgentInterrupt

pytestmark = pytest.mark.live

MODELS = [
    ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY"),
]


def _keyed(spec: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key = LIVE_KEYS.get(variable)
    if key is None:
        pytest.skip(f"{variable} is not set; live tests call {spec} only with a real key")
    monkeypatch.setenv(variable, key)


def _steps(value: object) -> list[dict[str, object]]:
    assert isinstance(value, dict)
    steps = value["steps"]
    assert isinstance(steps, list)
    return steps


@pytest.mark.parametrize(("spec", "variable"), MODELS, ids=[m[0] for m in MODELS])
async def test_live_notification_after_an_invoice_reuses_both(
    spec: str, variable: str, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keyed(spec, variable, monkeypatch)
    path = "f/billing/invoice_then_notify"
    bot = Copilot(shop.bob, model=spec, engine=shop.engine, flow=path)
    try:
        await bot.ask(
            "Build a flow that sends a notification to the billing channel after "
            "processing an invoice. Do not test-run it.",
            thread_id="n",
        )
    except AgentInterrupt:
        await bot.decide("n", approved=False, feedback="Do not run it.")
    draft = await shop.bob.draft(path)
    steps = _steps(draft.value)
    assert any(s.get("flow") == "f/billing/process_invoice" for s in steps)
    assert any(s.get("script") == {"path": "f/notify/send_notification"} for s in steps)
    assert await shop.bob.lint_flow(path, draft.value) == []
    await bot.aclose()


@pytest.mark.parametrize(("spec", "variable"), MODELS, ids=[m[0] for m in MODELS])
async def test_live_an_approval_before_the_refund(
    spec: str, variable: str, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keyed(spec, variable, monkeypatch)
    bot = Copilot(shop.bob, model=spec, engine=shop.engine, flow="f/billing/refund")
    try:
        await bot.ask("Add an approval before the refund. Do not test-run it.", thread_id="r")
    except AgentInterrupt:
        await bot.decide("r", approved=False, feedback="Do not run it.")
    steps = _steps((await shop.bob.draft("f/billing/refund")).value)
    ids = [s.get("id") for s in steps]
    kinds = ["approval" if "approval" in s else "other" for s in steps]
    assert kinds.index("approval") < ids.index("refund")
    await bot.aclose()
