"""Botocore's credential chain: asked off the event loop, once per model, failures remembered."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, isolate_aws
from llm_replay import HELLO, Recorder, json_reply

from tidemill.errors import MissingCredentialsError, ProviderError
from tidemill.llm import BedrockModel
from tidemill.llm.bedrock import _aws
from tidemill.llm.bedrock._aws import BotocoreKeys

pytest.importorskip("botocore")

ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 3, "outputTokens": 1},
}


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


class Frozen:
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY
    token = SESSION_TOKEN


class FakeCredentials:
    """What botocore's chain returns: keys that may need a refresh."""

    method = "sso"

    def __init__(self) -> None:
        self.frozen = 0
        self.expiring = False

    def refresh_needed(self) -> bool:
        return self.expiring

    def get_frozen_credentials(self) -> Frozen:
        self.frozen += 1
        self.expiring = False
        return Frozen()


class Chain:
    """Stands in for botocore's chain: counts lookups; `release` lets a slow one finish."""

    def __init__(self, *, slow: bool = False, fails: bool = False) -> None:
        self.lookups = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished: list[str] = []
        self.slow = slow
        self.fails = fails
        self.credentials = FakeCredentials()

    def __call__(self, session: Any, profile: str | None) -> FakeCredentials:
        self.lookups += 1
        self.started.set()
        if self.slow:
            self.release.wait(5)
        self.finished.append("lookup")
        if self.fails:
            raise MissingCredentialsError(
                "No AWS credentials for the bedrock provider, not even in botocore's chain.",
                context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID"},
            )
        return self.credentials


def model(
    chain: Chain, monkeypatch: pytest.MonkeyPatch, replies: int = 0
) -> tuple[BedrockModel, Recorder]:
    """A model with no keys of its own (so botocore's chain is asked) and what it sent."""
    monkeypatch.setattr(_aws, "_botocore_credentials", chain)
    recorder = Recorder([json_reply(ANSWER) for _ in range(replies)])
    client = recorder.client()
    return BedrockModel(
        "us.amazon.nova-micro-v1:0", region="us-east-1", http_client=client
    ), recorder


async def until(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, 5)


async def test_the_lookup_runs_off_the_loop_once_for_many_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = Chain(slow=True)
    bedrock, recorder = model(chain, monkeypatch, replies=5)
    calls = [asyncio.create_task(bedrock.request(HELLO)) for _ in range(5)]

    async def other_request() -> None:
        await until(chain.started)
        await asyncio.sleep(0)
        chain.finished.append("other")

    await other_request()  # the loop runs on while the lookup waits
    assert chain.finished == ["other"] and not any(call.done() for call in calls)
    chain.release.set()
    answers = await asyncio.gather(*calls)
    assert [answer.message.content for answer in answers] == ["hi"] * 5
    assert chain.lookups == 1 and chain.credentials.frozen == 1
    assert len(recorder.requests) == 5
    assert all(r.headers["x-amz-security-token"] == SESSION_TOKEN for r in recorder.requests)
    auth = bedrock.access.auth
    assert isinstance(auth, BotocoreKeys) and auth.method == "sso"


async def test_keys_are_refreshed_only_when_they_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = Chain()
    bedrock, _ = model(chain, monkeypatch, replies=4)
    for _ in range(3):
        await bedrock.request(HELLO)
    assert (chain.lookups, chain.credentials.frozen) == (1, 1)
    chain.credentials.expiring = True
    await bedrock.request(HELLO)
    assert (chain.lookups, chain.credentials.frozen) == (1, 2)


async def test_a_failed_lookup_is_remembered_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = Chain(fails=True)
    bedrock, recorder = model(chain, monkeypatch)
    auth = bedrock.access.auth
    assert isinstance(auth, BotocoreKeys)
    now = [100.0]
    auth.clock = lambda: now[0]
    errors = []
    for _ in range(4):
        with pytest.raises(MissingCredentialsError, match="No AWS credentials") as caught:
            await bedrock.request(HELLO)
        errors.append(caught.value)
    assert chain.lookups == 1
    assert len({id(error) for error in errors}) == 4  # each call raises its own error
    now[0] += auth.failure_ttl + 1
    with pytest.raises(MissingCredentialsError):
        await bedrock.request(HELLO)
    assert chain.lookups == 2
    assert recorder.requests == []


async def test_a_caller_that_gives_up_leaves_the_lookup_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = Chain(slow=True)
    bedrock, _ = model(chain, monkeypatch, replies=1)
    first = asyncio.create_task(bedrock.request(HELLO))
    second = asyncio.create_task(bedrock.request(HELLO))
    await until(chain.started)
    first.cancel()
    chain.release.set()
    assert (await second).message.content == "hi"
    assert first.cancelled() and chain.lookups == 1


async def test_keys_the_chain_found_are_scrubbed_from_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_aws, "_botocore_credentials", Chain())
    echo = {"message": f"bad token {SESSION_TOKEN}"}
    recorder = Recorder([json_reply(echo, status=400)])
    bedrock = BedrockModel("m", region="us-east-1", http_client=recorder.client())
    with pytest.raises(ProviderError) as caught:
        await bedrock.request(HELLO)
    assert SESSION_TOKEN not in str(caught.value) and SESSION_TOKEN not in (caught.value.body or "")
