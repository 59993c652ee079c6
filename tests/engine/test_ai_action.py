"""`ai_action` steps end to end on SQLite and PostgreSQL, with scripted models (no network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._models import ModelChoice, ModelResolver, default_models
from tidemill.errors import AuthenticationError, FlowValidationError, RateLimitError, RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, Role, Usage

pytestmark = pytest.mark.timeout(90)

LABEL = {
    "type": "object",
    "properties": {"label": {"enum": ["refund", "bug", "question"]}},
    "required": ["label"],
    "additionalProperties": False,
}


def action(step_id: str = "ask", **settings: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {
        key: settings.pop(key) for key in ("inputs", "retry", "timeout") if key in settings
    }
    return {"id": step_id, "ai_action": {"model": "fake", **settings}, **extra}


def flow(*steps: dict[str, Any]) -> Flow:
    return Flow.model_validate({"steps": list(steps)})


def by_step(models: Mapping[str, Model]) -> ModelResolver:
    def resolve(choice: ModelChoice) -> Model:
        return models[choice.step_id]

    return resolve


async def run(
    engine: AsyncEngine, f: Flow, models: ModelResolver, inputs: dict[str, Any] | None = None
) -> tuple[str, Any]:
    """Run `f` to its end; return its id and its result (or the `RunFailed` it raised)."""
    async with engine.worker(concurrency=2, poll=0.1, models=models):
        run_id = await engine.submit(f, inputs)
        try:
            return run_id, await engine.wait(run_id, timeout=60)
        except RunFailed as failed:
            return run_id, failed


def texts(request: ModelRequest) -> list[tuple[str, str]]:
    return [(str(m.role.value), m.content) for m in request.messages]


async def test_a_text_answer_is_the_result(engine: AsyncEngine) -> None:
    model = ScriptedModel(["Hello, Ada!"], strict=True)
    f = flow(
        action(
            prompt="Greet {{ name }}.",
            system="You are polite.",
            temperature=0.3,
            max_tokens=50,
            inputs={"name": {"expr": "flow_input.name"}},
        )
    )
    run_id, result = await run(engine, f, by_step({"ask": model}), {"name": "Ada"})
    assert result == "Hello, Ada!"
    (request,) = model.requests
    assert texts(request) == [("system", "You are polite."), ("user", "Greet Ada.")]
    assert request.settings == {"temperature": 0.3, "max_tokens": 50}
    assert len(await engine.usage(run_id)) == 1


async def test_a_schema_answer_is_parsed_and_the_schema_is_sent(engine: AsyncEngine) -> None:
    model = ScriptedModel(['```json\n{"label": "bug"}\n```'], strict=True)
    f = flow(action(prompt="Classify: it crashes", output_schema=LABEL))
    _, result = await run(engine, f, by_step({"ask": model}))
    assert result == {"label": "bug"}
    system = model.requests[0].messages[0]
    assert system.role == Role.SYSTEM
    assert json.dumps(LABEL) in system.content
    assert "JSON" in system.content


async def test_a_mismatch_is_sent_back_and_corrected(engine: AsyncEngine) -> None:
    model = ScriptedModel(['{"label": "spam"}', '{"label": "refund"}'], strict=True)
    f = flow(action(prompt="Classify: money back", output_schema=LABEL, output_retries=1))
    run_id, result = await run(engine, f, by_step({"ask": model}))
    assert result == {"label": "refund"}
    assert len(model.requests) == 2
    second = model.requests[1].messages
    assert second[-2].role == Role.ASSISTANT
    assert second[-2].content == '{"label": "spam"}'
    assert second[-1].role == Role.USER
    assert "'spam' is not one of" in second[-1].content
    usage = await engine.usage(run_id)
    assert [row["error"] for row in usage] == [None, None]


async def test_too_many_mismatches_fail_the_step(engine: AsyncEngine) -> None:
    model = ScriptedModel(["not json at all", '{"label": 3}', '{"label": "nope"}'], strict=True)
    f = flow(action(prompt="Classify", output_schema=LABEL, output_retries=2))
    run_id, failed = await run(engine, f, by_step({"ask": model}))
    assert isinstance(failed, RunFailed)
    assert failed.step == "ask"
    assert failed.error["type"] == "OutputValidationError"
    assert '{"label": "nope"}' in failed.error["message"]
    assert "after 3 answer(s)" in failed.error["message"]
    assert len(model.requests) == 3
    usage = await engine.usage(run_id)
    assert len(usage) == 3
    assert {row["attempt"] for row in usage} == {1}


async def test_a_long_last_answer_is_truncated_in_the_error(engine: AsyncEngine) -> None:
    model = ScriptedModel(["x" * 5000], strict=True)
    f = flow(action(prompt="Classify", output_schema=LABEL, output_retries=0))
    _, failed = await run(engine, f, by_step({"ask": model}))
    assert isinstance(failed, RunFailed)
    message = failed.error["message"]
    assert "x" * 500 + "..." in message
    assert len(message) < 1500


async def test_placeholders_render_expressions_and_json(engine: AsyncEngine) -> None:
    model = ScriptedModel(["ok"], strict=True)
    prompt = (
        "lang={{ ticket.meta.lang }} upper={{ ticket.meta.lang.upper() }} "
        "ticket={{ ticket }} n={{ results.first.n + 1 }} x={{ flow_input.x }} "
        "prev={{ previous_result }} tags={{ ticket.tags[1] }} none={{ nothing }}"
    )
    f = flow(
        {"id": "first", "identity": {}, "inputs": {"n": 41}},
        action(
            prompt=prompt,
            system="Answer in {{ ticket.meta.lang }}.",
            inputs={
                "ticket": {"expr": "flow_input.ticket"},
                "previous_result": "overridden",
                "nothing": None,
            },
        ),
    )
    ticket = {"meta": {"lang": "fr"}, "tags": ["a", "b"]}
    _, result = await run(engine, f, by_step({"ask": model}), {"ticket": ticket, "x": 2})
    assert result == "ok"
    assert texts(model.requests[0]) == [
        ("system", "Answer in fr."),
        (
            "user",
            'lang=fr upper=FR ticket={"meta":{"lang":"fr"},"tags":["a","b"]} n=42 x=2 '
            "prev=overridden tags=b none=null",
        ),
    ]


async def test_a_missing_key_in_a_placeholder_fails_clearly(engine: AsyncEngine) -> None:
    model = ScriptedModel(["never"], strict=True)
    f = flow(
        action(
            prompt="Subject: {{ ticket.subject }}",
            inputs={"ticket": {"expr": "flow_input.ticket"}},
            retry={"attempts": 2, "backoff": 0.01},
        )
    )
    run_id, failed = await run(engine, f, by_step({"ask": model}), {"ticket": {"body": "hi"}})
    assert isinstance(failed, RunFailed)
    assert failed.error["type"] == "PlaceholderError"
    assert "prompt placeholder {{ ticket.subject }}" in failed.error["message"]
    assert "subject" in failed.error["message"]
    assert model.requests == []
    assert len(await engine.jobs(run_id)) == 1  # not retried: a retry cannot fix it
    assert await engine.usage(run_id) == []


async def test_a_missing_env_key_fails_before_any_model_call(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDEMILL_TEST_AI_KEY", raising=False)
    built: list[Model] = []

    def resolve(choice: ModelChoice) -> Model:
        model = default_models(choice)
        built.append(model)
        return model

    f = flow(
        action(
            model="openai:gpt-4o-mini",
            api_key="env:TIDEMILL_TEST_AI_KEY",
            prompt="hi",
            retry={"attempts": 2, "backoff": 0.01},
        )
    )
    run_id, failed = await run(engine, f, resolve)
    assert isinstance(failed, RunFailed)
    assert failed.error["type"] == "MissingCredentialsError"
    assert "$TIDEMILL_TEST_AI_KEY" in failed.error["message"]
    assert failed.error["hint"] == "Set TIDEMILL_TEST_AI_KEY in the worker's environment."
    assert built == []
    assert len(await engine.jobs(run_id)) == 1
    assert await engine.usage(run_id) == []


async def test_an_unknown_provider_is_refused_at_submit_with_a_hint(engine: AsyncEngine) -> None:
    f = flow(action(model="nosuchvendor:model-1", prompt="hi"))
    with pytest.raises(FlowValidationError) as caught:
        await run(engine, f, default_models)
    (problem,) = caught.value.problems
    assert (problem.step, problem.field) == ("ask", "ai_action.model")
    assert "nosuchvendor" in problem.message and "'provider:model'" in problem.message
    assert await engine.runs() == []


class Failing(Model):
    """A model whose every call raises the given provider error."""

    provider = "flaky"
    model_name = "flaky-1"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise self.error


async def test_a_rate_limit_fails_the_step_and_its_retry_policy_applies(
    engine: AsyncEngine,
) -> None:
    model = Failing(RateLimitError("HTTP 429: slow down", provider="flaky"))
    f = flow(action(prompt="hi", retry={"attempts": 1, "backoff": 0.01}))
    run_id, failed = await run(engine, f, by_step({"ask": model}))
    assert isinstance(failed, RunFailed)
    assert failed.error["type"] == "RateLimitError"
    assert model.calls == 2
    jobs = await engine.jobs(run_id)
    assert [(job.attempt, job.status) for job in jobs] == [(1, "failed"), (2, "failed")]
    usage = await engine.usage(run_id)
    assert [row["attempt"] for row in usage] == [1, 2]
    assert all(row["error"] == "RateLimitError: HTTP 429: slow down" for row in usage)
    assert all(row["model"] == "flaky-1" and row["provider"] == "flaky" for row in usage)
    assert all(row["input_tokens"] == 0 and row["cost_usd"] is None for row in usage)


async def test_an_authentication_error_is_not_retried(engine: AsyncEngine) -> None:
    model = Failing(AuthenticationError("HTTP 401: bad key", provider="flaky", status_code=401))
    f = flow(action(prompt="hi", retry={"attempts": 2, "backoff": 0.01}))
    run_id, failed = await run(engine, f, by_step({"ask": model}))
    assert isinstance(failed, RunFailed)
    assert failed.error["type"] == "AuthenticationError"
    assert model.calls == 1
    assert len(await engine.jobs(run_id)) == 1
    assert len(await engine.usage(run_id)) == 1


async def test_the_step_timeout_bounds_the_model_call(engine: AsyncEngine) -> None:
    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(10)
        return "late"

    model = ScriptedModel(handler=slow)
    f = flow(action(prompt="hi", timeout=0.2))
    run_id, failed = await run(engine, f, by_step({"ask": model}))
    assert isinstance(failed, RunFailed)
    assert failed.error["type"] == "Timeout"
    (row,) = await engine.usage(run_id)
    assert row["error"].startswith("TimeoutError")
    assert 150 <= row["latency_ms"] < 5000


def priced(text: str, cost: float | None) -> ModelResponse:
    usage = Usage(
        requests=1,
        input_tokens=120,
        output_tokens=7,
        cost_usd=cost or 0.0,
        unpriced_requests=0 if cost is not None else 1,
    )
    return ModelResponse(message=Message.assistant(text), usage=usage, model="m")


async def test_usage_rows_carry_the_call_and_its_metadata(engine: AsyncEngine) -> None:
    answers = iter([priced("first", 0.0021), priced("second", None)])

    async def answer(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.02)
        return next(answers)

    model = ScriptedModel(handler=answer, model_name="gpt-test")
    metadata = {"experiment_id": "exp-7", "exposure_id": "expo-9", "team": "support"}
    f = flow(
        action("one", prompt="a", metadata=metadata),
        action("two", prompt="b"),
    )
    run_id, result = await run(engine, f, lambda choice: model)
    assert result == "second"
    one, two = await engine.usage(run_id)
    assert one["run_id"] == run_id and one["step_id"] == "one" and one["attempt"] == 1
    assert (one["model"], one["provider"]) == ("gpt-test", "scripted")
    assert (one["input_tokens"], one["output_tokens"]) == (120, 7)
    assert one["cost_usd"] == pytest.approx(0.0021)
    assert one["latency_ms"] >= 15
    assert (one["experiment_id"], one["exposure_id"]) == ("exp-7", "expo-9")
    assert one["error"] is None
    assert two["step_id"] == "two" and two["cost_usd"] is None
    assert (two["experiment_id"], two["exposure_id"]) == (None, None)
    jobs = {job.step_id: job.id for job in await engine.jobs(run_id)}
    assert (one["job_id"], two["job_id"]) == (jobs["one"], jobs["two"])


async def test_usage_of_an_ai_step_inside_a_loop_belongs_to_the_run(engine: AsyncEngine) -> None:
    model = ScriptedModel(["x"])
    f = flow(
        {
            "id": "each",
            "for_each": {
                "items": ["a", "b"],
                "steps": [action("inner", prompt="item {{ iter.value }}")],
            },
        }
    )
    run_id, result = await run(engine, f, lambda choice: model)
    assert result == ["x", "x"]
    assert sorted(m.messages[-1].content for m in model.requests) == ["item a", "item b"]
    usage = await engine.usage(run_id)
    assert [row["step_id"] for row in usage] == ["inner", "inner"]
    assert all(row["run_id"] != run_id for row in usage)


async def test_a_placeholder_reads_any_earlier_result(engine: AsyncEngine) -> None:
    model = ScriptedModel(["ok"], strict=True)
    f = flow(
        {"id": "fetch", "identity": {}, "inputs": {"n": 7}},
        {"id": "other", "identity": {}, "inputs": {"m": 1}},
        action(prompt="n is {{ results.fetch.n }}"),  # needs only `other`
    )
    _run_id, result = await run(engine, f, by_step({"ask": model}))
    assert result == "ok"
    assert texts(model.requests[0]) == [("user", "n is 7")]
