"""`tidemill runs usage`: the model calls of a run, one a line, with totals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tidemill.cli import main
from tidemill.engine import Engine
from tidemill.engine._models import ModelChoice
from tidemill.errors import RateLimitError
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, Usage

pytestmark = pytest.mark.timeout(60)


def answer(text: str, cost: float | None, tokens: tuple[int, int]) -> ModelResponse:
    usage = Usage(
        requests=1,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost_usd=cost or 0.0,
        unpriced_requests=0 if cost is not None else 1,
    )
    return ModelResponse(message=Message.assistant(text), usage=usage)


class FlakyOnce(Model):
    """Rate limited on its first call, then answers (priced)."""

    provider = "acme"
    model_name = "acme-large"

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise RateLimitError("HTTP 429: too many requests", provider="acme")
        return answer("fine", 0.0015, (100, 20))


def ai(step_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "ai_action": {"model": "fake", "prompt": "go"}, **extra}


def run_flow(url: str, steps: list[dict[str, Any]], models: dict[str, Model]) -> str:
    """Run the steps to their end with a worker here; return the run's id."""

    def resolve(choice: ModelChoice) -> Model:
        return models[choice.step_id]

    with Engine(url, migrate=True) as engine, engine.worker(poll=0.1, models=resolve):
        run = engine.submit(Flow.model_validate({"name": "usage", "steps": steps}))
        run.wait(timeout=30)
        # The blocking facade reads the rows the command prints.
        rows = engine.usage(run.id)
        assert all(row["run_id"] and row["step_id"] for row in rows)
        USAGE[run.id] = rows
        return run.id


USAGE: dict[str, list[dict[str, Any]]] = {}


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/usage.db"


@pytest.fixture
def used_run(url: str) -> str:
    models: dict[str, Model] = {
        "first": ScriptedModel([answer("a", 0.0021, (120, 7))], model_name="gpt-test"),
        "flaky": FlakyOnce(),
        "free": ScriptedModel([answer("c", None, (30, 3))], model_name="local"),
    }
    steps = [
        ai(
            "first",
            ai_action={"model": "fake", "prompt": "go", "metadata": {"experiment_id": "e1"}},
        ),
        ai("flaky", retry={"attempts": 1, "backoff": 0.01}),
        ai("free"),
    ]
    run_id = run_flow(url, steps, models)
    assert [(row["step_id"], row["attempt"]) for row in USAGE[run_id]] == [
        ("first", 1), ("flaky", 1), ("flaky", 2), ("free", 1),
    ]  # fmt: skip
    return run_id


def test_usage_prints_a_line_per_call_and_the_totals(
    url: str, used_run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "usage", used_run, "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "STEP", "ATTEMPT", "MODEL", "PROVIDER", "IN", "OUT", "COST", "LATENCY", "ERROR",
    ]  # fmt: skip
    first, flaky_1, flaky_2, free = (line.split() for line in lines[1:5])
    assert first[:7] == ["first", "1", "gpt-test", "scripted", "120", "7", "$0.0021"]
    assert first[7].endswith("ms")
    assert flaky_1[:7] == ["flaky", "1", "acme-large", "acme", "0", "0", "-"]
    assert " ".join(flaky_1[8:]) == "RateLimitError: HTTP 429: too many requests"
    assert flaky_2[:7] == ["flaky", "2", "acme-large", "acme", "100", "20", "$0.0015"]
    assert len(flaky_2) == 8  # no error
    assert free[:7] == ["free", "1", "local", "scripted", "30", "3", "unpriced"]
    assert lines[5] == (
        "total  4 call(s) (1 failed), 250 in + 30 out tokens, $0.0036 + 1 unpriced call(s)"
    )
    assert len(lines) == 6


def test_usage_as_json(url: str, used_run: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "usage", used_run, "--db", url, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["run_id"] == used_run
    calls = document["calls"]
    assert [(c["path"], c["attempt"]) for c in calls] == [
        ("first", 1), ("flaky", 1), ("flaky", 2), ("free", 1),
    ]  # fmt: skip
    assert calls[0]["experiment_id"] == "e1"
    assert calls[1]["error"].startswith("RateLimitError")
    totals = document["totals"]
    assert totals["calls"] == 4
    assert totals["failed_calls"] == 1
    assert (totals["input_tokens"], totals["output_tokens"]) == (250, 30)
    assert totals["cost_usd"] == pytest.approx(0.0036)
    assert totals["unpriced_calls"] == 1


def test_an_all_unpriced_run_totals_as_unpriced(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    models: dict[str, Model] = {"only": ScriptedModel([answer("x", None, (10, 2))])}
    run_id = run_flow(url, [ai("only")], models)
    assert main(["runs", "usage", run_id, "--db", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "total  1 call(s), 10 in + 2 out tokens, unpriced"


def test_steps_inside_a_loop_are_named_by_their_path(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = {
        "id": "each",
        "for_each": {"items": [1, 2], "steps": [ai("inner")]},
    }
    models: dict[str, Model] = {"inner": ScriptedModel(["x"])}
    run_id = run_flow(url, [loop], models)
    assert main(["runs", "usage", run_id, "--db", url]) == 0
    steps = sorted(line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3])
    assert steps == ["each[0]/inner", "each[1]/inner"]


def test_a_run_without_model_calls(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = run_flow(url, [{"id": "a", "identity": {}}], {})
    assert main(["runs", "usage", run_id, "--db", url]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"run {run_id}: no model calls"


def test_an_unknown_run(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_flow(url, [{"id": "a", "identity": {}}], {})
    assert main(["runs", "usage", "nope", "--db", url]) == 2
    assert "No run nope" in capsys.readouterr().err
