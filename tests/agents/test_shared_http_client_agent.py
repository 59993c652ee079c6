"""An agent given a shared `httpx` client (`.llm(..., http_client=client)`) leaves it open."""

from __future__ import annotations

import httpx

from provider_answers import OPENAI_ANSWER
from tidemill import agent


def recording_client(seen: list[str]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=OPENAI_ANSWER)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_agents_send_through_a_shared_client_and_aclose_leaves_it_open() -> None:
    seen: list[str] = []
    client = recording_client(seen)
    try:
        bots = [
            agent().llm("openai:gpt-4o-mini", api_key="sk-test", http_client=client),
            agent().llm(["mistral:mistral-small-latest"], api_key="k", http_client=client),
        ]
        for bot in bots:
            assert (await bot.arun("Hello")).output == "A"
            await bot.aclose()
        assert seen == ["/v1/chat/completions", "/v1/chat/completions"]
        assert not client.is_closed
    finally:
        await client.aclose()


def test_a_blocking_agent_s_close_leaves_a_shared_client_open() -> None:
    seen: list[str] = []
    client = recording_client(seen)
    bot = agent().llm("openai:gpt-4o-mini", api_key="sk-test", http_client=client)
    try:
        assert bot.run("Hello").output == "A"
    finally:
        bot.close()
    assert seen == ["/v1/chat/completions"]
    assert not client.is_closed
