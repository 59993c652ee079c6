"""An AI step's error keeps its hint, in the flow's words (`api_key: env:NAME`), not Python's.

The provider layer tells a library user what to pass (`api_key=`); the agent
host records the same error for a flow with what its author can change: a
variable on the worker, or a key of the step's model settings.
"""

from __future__ import annotations

import re
import sys

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine.ai._action import step_error
from tidemill.engine.ai._hints import flow_hint
from tidemill.errors import (
    AuthenticationError,
    MissingCredentialsError,
    RunFailed,
    TidemillError,
)
from tidemill.flows import Flow
from tidemill.llm import resolve_model
from tidemill.llm.bedrock._aws import AWS_AUTH_HINT
from tidemill.llm.google._auth import VERTEX_AUTH_HINT

pytestmark = pytest.mark.timeout(60)

PYTHON_ARGUMENT = re.compile(r"\b[a-z_]+=|Credentials\(")
"""What the Python API's hints say and a flow's never should: `api_key=`, `credentials=...`."""

SPECS = [
    "openai:gpt-4o-mini", "openai-responses:gpt-4o", "anthropic:claude-sonnet-4-5",
    "gemini:gemini-2.0-flash", "mistral:mistral-small", "groq:llama", "deepseek:chat",
    "together:m", "openrouter:m", "azure:deployment", "openai-compatible:m",
    "vertex:gemini-2.0-flash", "anthropic-vertex:claude", "bedrock:anthropic.claude",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_cloud_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "GOOGLE_CLOUD_PROJECT",
                 "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "TOGETHER_API_KEY",
                 "OPENROUTER_API_KEY", "OPENAI_COMPATIBLE_BASE_URL", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    # botocore's chain is asked at the first call, not at build: without botocore, no AWS
    # credentials is a build-time error (and no metadata service is asked).
    monkeypatch.setitem(sys.modules, "botocore.session", None)


def raised(spec: str) -> TidemillError:
    with pytest.raises(TidemillError) as caught:
        resolve_model(spec)
    return caught.value


@pytest.mark.parametrize("spec", SPECS)
def test_every_setup_hint_speaks_the_flows_language(spec: str) -> None:
    error = raised(spec)
    assert error.hint and PYTHON_ARGUMENT.search(error.hint)  # the library's own hint
    hint = flow_hint(error)
    assert hint and not PYTHON_ARGUMENT.search(hint), hint
    env = error.context.get("env")
    if isinstance(env, str):
        assert env in hint
    assert step_error(error)["hint"] == hint


def test_a_missing_key_names_the_variable_and_the_steps_setting() -> None:
    error = raised("openai:gpt-4o-mini")
    assert isinstance(error, MissingCredentialsError)
    assert flow_hint(error) == (
        "Set OPENAI_API_KEY in the worker's environment, or read the key from another "
        "variable with `api_key: env:NAME` in the step's model settings."
    )


@pytest.mark.parametrize(
    "hint",
    [
        "Check the API key (the OPENAI_API_KEY variable or api_key=) and that it may use it.",
        "Check the API key (GEMINI_API_KEY, GOOGLE_API_KEY or api_key=).",
        VERTEX_AUTH_HINT,
        AWS_AUTH_HINT,
        "Raise the model's timeout=, or try again.",
        "Check base_url=.",
    ],
)
def test_refused_keys_and_timeouts_speak_the_flows_language(hint: str) -> None:
    error = AuthenticationError("refused", provider="openai", hint=hint)
    translated = flow_hint(error)
    assert translated and not PYTHON_ARGUMENT.search(translated), translated


def test_other_hints_are_kept() -> None:
    assert raised("opnai:gpt-4o").hint == "Did you mean 'openai'?"
    assert flow_hint(raised("opnai:gpt-4o")) == "Did you mean 'openai'?"
    assert flow_hint(TidemillError("no hint")) is None


async def test_a_failed_ai_step_records_the_flows_hint(engine: AsyncEngine) -> None:
    ask = Flow.model_validate(
        {"steps": [{"id": "ask", "ai_action": {"model": "openai:gpt-4o-mini", "prompt": "Hi"}}]}
    )
    async with engine.worker(poll=0.05):
        run_id = await engine.submit(ask)
        with pytest.raises(RunFailed):
            await engine.wait(run_id, timeout=30)
    error = (await engine.get(run_id)).error or {}
    assert error["type"] == "MissingCredentialsError"
    assert error["message"] == "No API key for the openai provider."
    assert "OPENAI_API_KEY" in error["hint"] and "`api_key: env:NAME`" in error["hint"]
    assert not PYTHON_ARGUMENT.search(error["hint"])
