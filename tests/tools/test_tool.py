from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from enum import Enum
from typing import Any, Literal

import pydantic
import pytest

from tidemill import ConfigurationError, ToolArgumentsError
from tidemill.tools import FunctionTool, Tool, ToolContext, ToolReturn, render_result, tool

CTX = ToolContext(thread_id="t", call_id="c", tool_name="x")


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    city: str
    zip: str | None = None


@tool
def describe_place(
    address: Address, colour: Colour, mode: Literal["fast", "slow"] = "fast", limit: int = 3
) -> str:
    """Describe a place.

    Args:
        address: Where it is.
        colour: Its colour.
        mode: How to describe it.
        limit: At most this many words.
    """
    return f"{address.city} {colour.value} {mode} {limit}"


def test_schema_comes_from_hints_and_docstring() -> None:
    schema = describe_place.parameters
    assert describe_place.description == "Describe a place."
    assert schema["required"] == ["address", "colour"]
    props: Any = schema["properties"]
    assert props["limit"] == {
        "default": 3,
        "description": "At most this many words.",
        "type": "integer",
    }
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert "$defs" in schema
    assert "Address" in schema["$defs"]
    assert "title" not in schema
    assert "title" not in props["limit"]


def test_validation_converts_nested_models_and_enums() -> None:
    args = describe_place.validate({"address": {"city": "Lyon"}, "colour": "red"})
    assert args == {
        "address": Address(city="Lyon"),
        "colour": Colour.RED,
        "mode": "fast",
        "limit": 3,
    }
    assert asyncio.run(describe_place.acall(args, CTX)) == "Lyon red fast 3"


def test_validation_errors_name_every_argument() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        describe_place.validate({"colour": "green", "limit": "many", "extra": 1})
    errors = info.value.errors
    assert any(e.startswith("address:") for e in errors)
    assert any(e.startswith("colour:") for e in errors)
    assert any(e.startswith("limit:") for e in errors)
    assert any(e.startswith("extra:") for e in errors)
    assert info.value.tool == "describe_place"


def test_decorated_function_is_still_callable() -> None:
    assert describe_place(Address(city="Oslo"), Colour.BLUE) == "Oslo blue fast 3"


def test_options_name_description_approval() -> None:
    @tool(name="renamed", description="Custom.", requires_approval=True)
    def original() -> None:
        """Ignored summary."""

    assert (original.name, original.description, original.requires_approval) == (
        "renamed",
        "Custom.",
        True,
    )
    assert original.definition.name == "renamed"


def test_context_parameter_is_injected_not_described() -> None:
    seen: list[ToolContext] = []

    @tool
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge."""
        seen.append(ctx)
        return ctx.idempotency_key

    assert list(charge.parameters["properties"]) == ["amount"]  # type: ignore[call-overload]
    assert asyncio.run(charge.acall(charge.validate({"amount": 1}), CTX)) == "t/c"
    assert seen == [CTX]


def test_a_context_holds_its_fields_and_defaults_and_stays_frozen() -> None:
    # ToolContext sets its fields in a hand-written __init__: it must agree with the fields.
    context = ToolContext("t", "c", "x")
    defaults = {f.name: f.default for f in dataclasses.fields(ToolContext)}
    assert {name: getattr(context, name) for name in ("attempt", "agent", "deps")} == {
        name: defaults[name] for name in ("attempt", "agent", "deps")
    }
    assert [f.name for f in dataclasses.fields(ToolContext)] == list(vars(context))
    full = ToolContext[int](
        thread_id="t", call_id="c", tool_name="x", attempt=2, agent="bot", deps=7
    )
    assert (full.attempt, full.agent, full.deps) == (2, "bot", 7)
    assert full == ToolContext("t", "c", "x", 2, "bot", 7)
    assert hash(full) == hash(ToolContext("t", "c", "x", 2, "bot", 7))
    assert "deps=7" in repr(full)
    with pytest.raises(dataclasses.FrozenInstanceError):
        full.attempt = 3  # type: ignore[misc]


def test_a_function_tool_call_is_the_functions_own_coroutine() -> None:
    @tool
    async def later(n: int) -> int:
        """Return n."""
        return n

    pending = later.acall({"n": 4}, CTX)
    assert inspect.iscoroutine(pending)
    assert asyncio.run(pending) == 4


def test_sync_tools_run_off_the_loop_thread_async_tools_on_it() -> None:
    threads: dict[str, int] = {}

    @tool
    def blocking() -> None:
        """Sync."""
        threads["sync"] = threading.get_ident()

    @tool
    async def nonblocking() -> None:
        """Async."""
        threads["async"] = threading.get_ident()

    async def main() -> int:
        await blocking.acall({}, CTX)
        await nonblocking.acall({}, CTX)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads["async"] == loop_thread
    assert threads["sync"] != loop_thread


def test_a_sync_tool_raising_stop_iteration_fails_instead_of_hanging() -> None:
    def first_match(items: list[str]) -> str:
        return next(item for item in items if item.startswith("x"))  # none does

    hand_built = Tool(first_match, name="first_match")
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            asyncio.run(hand_built.arun(items=["a", "b"]))
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the call never returned"
    (error,) = outcome
    assert isinstance(error, RuntimeError)
    assert str(error) == "first_match raised StopIteration"
    assert isinstance(error.__cause__, StopIteration)


def test_callable_object_with_async_call_is_awaited() -> None:
    class Lookup:
        async def __call__(self, key: str) -> str:
            return key.upper()

    wrapped = FunctionTool(Lookup(), name="lookup")
    assert asyncio.run(wrapped.acall({"key": "a"}, CTX)) == "A"


@pytest.mark.parametrize(
    "bad",
    [
        lambda *args: None,
        lambda **kwargs: None,
    ],
)
def test_signatures_a_model_cannot_fill_are_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="cannot fill"):
        FunctionTool(bad, name="bad")


def test_unresolvable_hints_are_a_configuration_error() -> None:
    def broken(x: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Broken."""

    with pytest.raises(ConfigurationError, match="signature"):
        tool(broken)


def test_hand_built_tool_validates_with_json_schema() -> None:
    def stock(sku: str) -> dict[str, int]:
        return {"units": len(sku)}

    built = Tool(
        stock,
        name="stock",
        description="Units in stock.",
        parameters={
            "type": "object",
            "properties": {"sku": {"type": "string"}},
            "required": ["sku"],
            "additionalProperties": False,
        },
    )
    assert asyncio.run(built.acall(built.validate({"sku": "abc"}), CTX)) == {"units": 3}
    with pytest.raises(ToolArgumentsError) as info:
        built.validate({"sku": 1, "other": True})
    assert len(info.value.errors) == 2


def test_tool_subclass_overrides_acall() -> None:
    class Echo(Tool):
        def __init__(self) -> None:
            super().__init__(name="echo")

        async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
            return {"thread": context.thread_id, **arguments}

    echo = Echo()
    assert asyncio.run(echo.acall({}, CTX)) == {"thread": "t"}


@pytest.mark.parametrize("name", ["", "has space", "semi;colon"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="not usable"):
        Tool(lambda: None, name=name)


def test_a_tool_needs_something_to_run() -> None:
    with pytest.raises(ConfigurationError, match="nothing to run"):
        Tool(name="empty")


def test_parameters_must_describe_an_object() -> None:
    with pytest.raises(ConfigurationError, match="type 'object'"):
        Tool(lambda: None, name="t", parameters={"type": "string"})


def test_render_result() -> None:
    assert render_result("plain") == "plain"
    assert render_result({"a": [1, 2]}) == '{"a":[1,2]}'
    assert render_result(Address(city="Rome")) == '{"city":"Rome","zip":null}'
    assert render_result(None) == "null"
    assert render_result({1, 2}) in ("[1,2]", "[2,1]")
    assert render_result(object()).startswith('"<object object')


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ConfigurationError, match="lambda has no name"):
        tool(lambda: 1)
    assert FunctionTool(lambda: 1, name="one").name == "one"


# -- calling a tool yourself -----------------------------------------------------------------


def test_run_validates_runs_and_renders_as_an_agent_would() -> None:
    @tool
    def stock(sku: str, ctx: ToolContext) -> dict[str, object]:
        """Units in stock.

        Args:
            sku: The product.
        """
        return {"sku": sku, "units": 3, "thread": ctx.thread_id}

    result = stock.run(sku="grinder")
    assert result.name == "stock" and not result.is_error
    assert result.content == '{"sku":"grinder","units":3,"thread":"direct"}'
    assert result.call_id.startswith("direct_")
    own = ToolContext(thread_id="t1", call_id="c9", tool_name="stock")
    assert stock.run(own, sku="kettle").call_id == "c9"
    with pytest.raises(ToolArgumentsError, match="sku"):
        stock.run(sku=42)


def test_run_unwraps_a_tool_return_and_lets_errors_raise() -> None:
    @tool
    def refuse() -> ToolReturn:
        """Always refuses."""
        return ToolReturn("not today", is_error=True)

    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    result = refuse.run()
    assert (result.content, result.is_error) == ("not today", True)
    with pytest.raises(RuntimeError, match="boom"):
        explode.run()


def test_blocking_run_inside_an_event_loop_says_to_await_arun() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    async def inside() -> str:
        with pytest.raises(ConfigurationError, match="inside an event loop") as info:
            echo.run(text="x")
        assert info.value.hint and "arun" in info.value.hint
        return (await echo.arun(text="y")).content

    assert asyncio.run(inside()) == "y"
