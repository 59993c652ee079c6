from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidemill import ConfigurationError, ScriptExhausted
from tidemill.llm import ModelRequest, ScriptedModel, resolve_model
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta, ToolCall, ToolCallDelta


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest([Message.user(text)])


async def test_plays_the_script_and_records_requests() -> None:
    call = ToolCall(name="lookup", arguments={"id": 7})
    model = ScriptedModel(["", "Found it."], tool_calls=[[call], []])
    first = await model.request(ask("find 7"))
    second = await model.request(ask("and?"))
    assert first.message.tool_calls == (call,)
    assert first.finish_reason == "tool_calls"
    assert second.message.content == "Found it."
    assert second.finish_reason == "stop"
    assert [r.messages[0].content for r in model.requests] == ["find 7", "and?"]
    assert model.turns == 2


async def test_strict_script_fails_loudly_when_it_runs_out() -> None:
    model = ScriptedModel(["once"], strict=True)
    await model.request(ask())
    with pytest.raises(ScriptExhausted, match="called 2 time"):
        await model.request(ask())


async def test_lenient_script_repeats_its_last_text_without_tool_calls() -> None:
    model = ScriptedModel(["a", "b"], tool_calls=[[], [ToolCall(name="t")]])
    for _ in range(2):
        await model.request(ask())
    again = await model.request(ask())
    assert (again.message.content, again.message.tool_calls) == ("b", ())


async def test_with_no_script_it_echoes_the_last_user_message() -> None:
    model = ScriptedModel()
    assert (await model.request(ask("tide tables"))).message.content == "tide tables"
    assert (await model.request(ask("again"))).message.content == "again"


async def test_handler_answers_sync_or_async_with_text_message_or_response() -> None:
    def by_text(request: ModelRequest) -> str:
        return request.messages[-1].content.upper()

    async def by_message(request: ModelRequest) -> Message:
        return Message.assistant("m")

    whole = ModelResponse(message=Message.assistant("r"), model="x", finish_reason="length")
    assert (await ScriptedModel(handler=by_text).request(ask("yo"))).message.content == "YO"
    assert (await ScriptedModel(handler=by_message).request(ask())).message.content == "m"
    assert await ScriptedModel(handler=lambda _: whole).request(ask()) == whole


def test_script_and_handler_together_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        ScriptedModel(["a"], handler=lambda _: "b")


async def test_usage_estimates_grow_with_the_conversation() -> None:
    model = ScriptedModel(handler=lambda _: "ok")
    history = [Message.user("x" * 400)]
    first = await model.request(ModelRequest(history))
    history += [first.message, Message.user("y" * 40)]
    second = await model.request(ModelRequest(list(history)))
    assert first.usage.input_tokens == 100
    assert second.usage.input_tokens == 100 + 1 + 10
    assert second.usage.requests == 1
    assert second.usage.output_tokens == 1
    # A conversation that is not an extension of the last one is counted afresh.
    third = await model.request(ask("z" * 8))
    assert third.usage.input_tokens == 2


async def test_stream_yields_words_tool_call_deltas_then_the_response() -> None:
    call = ToolCall(name="t", arguments={"a": 1})
    model = ScriptedModel(["hello big world"], tool_calls=[[call]])
    events = [event async for event in model.stream(ask())]
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["hello", " big", " world"]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.call_id, d.name, d.arguments_delta) for d in deltas] == [(call.id, "t", '{"a": 1}')]
    assert isinstance(events[-1], ResponseDone)
    assert events[-1].response.message.content == "hello big world"


def test_resolve_model_builds_the_scripted_model_from_fake() -> None:
    model = resolve_model("fake", responses=["x"], strict=True)
    assert isinstance(model, ScriptedModel)
    assert model.strict
    assert resolve_model("scripted").provider == "scripted"
    with pytest.raises(ConfigurationError, match="Bad option"):
        resolve_model("fake", temperature=0)


# -- where a script picks up: the conversation it is sent ---------------------------------


def conversation(*turns: str) -> ModelRequest:
    """A conversation of alternating user and assistant messages, ending on a user one."""
    messages = [
        Message.user(text) if index % 2 == 0 else Message.assistant(text)
        for index, text in enumerate(turns)
    ]
    return ModelRequest(messages)


async def test_a_new_model_continues_a_conversation_at_its_own_turn() -> None:
    # A second process builds a new model: it must not start the script over.
    model = ScriptedModel(["first", "second", "third"])
    answer = await model.request(conversation("hi", "first", "and then?"))
    assert answer.message.content == "second"
    after = await model.request(conversation("hi", "first", "and then?", "second", "more"))
    assert after.message.content == "third"


async def test_one_model_keeps_its_own_count_across_new_conversations() -> None:
    # Several threads (or steps) answered by one model take the script in turn, as before.
    model = ScriptedModel(["a", "b", "c"])
    assert [(await model.request(ask())).message.content for _ in range(3)] == ["a", "b", "c"]


async def test_the_further_count_wins_and_the_next_turn_follows_it() -> None:
    model = ScriptedModel(["a", "b", "c", "d"])
    await model.request(ask())  # "a": its own count is now 1
    jumped = await model.request(conversation("u", "x", "u", "y", "u"))  # two assistant turns
    assert jumped.message.content == "c"
    assert (await model.request(ask())).message.content == "d"


async def test_strict_counts_the_conversations_turns_too() -> None:
    model = ScriptedModel(["only"], strict=True)
    with pytest.raises(ScriptExhausted):
        await model.request(conversation("hi", "only", "again"))


async def test_a_handler_is_not_affected_by_the_turn_count() -> None:
    model = ScriptedModel(handler=lambda request: str(len(request.messages)))
    answer = await model.request(conversation("hi", "x", "again"))
    assert answer.message.content == "3"


async def test_counting_turns_stays_right_when_a_conversation_is_cut_or_replaced() -> None:
    model = ScriptedModel(["a", "b", "c", "d", "e"])
    history = conversation("u", "x", "u", "y", "u")
    assert (await model.request(history)).message.content == "c"
    # The same conversation grown by one exchange, then a shorter one with more turns.
    grown = ModelRequest([*history.messages, Message.assistant("c"), Message.user("u")])
    assert (await model.request(grown)).message.content == "d"
    other = ModelRequest([Message.assistant(str(n)) for n in range(4)] + [Message.user("u")])
    assert (await model.request(other)).message.content == "e"


AGENT = '''
import sys
import tidemill
from tidemill import ToolCall, tool

SIDE = sys.argv[2]


def note(line):
    with open(SIDE, "a", encoding="utf-8") as file:
        file.write(line + "\\n")


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    note("lookup " + order_id)
    return order_id + ": paid 30 EUR"


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    note("refund " + order_id)
    return "refunded " + order_id


agent = (
    tidemill.agent()
    .llm("fake", responses=["", "", "Refunded A1."], tool_calls=[
        [ToolCall(name="lookup", arguments={"order_id": "A1"})],
        [ToolCall(name="refund", arguments={"order_id": "A1"})],
        [],
    ], strict=True)
    .tool(lookup, refund)
    .checkpoint("sqlite", path=sys.argv[1])
)
if sys.argv[3] == "run":
    try:
        agent.run("Refund A1", thread_id="ticket")
    except tidemill.AgentInterrupt as pause:
        print("paused", [c.name for c in pause.pending])
else:
    print(agent.resume("ticket", approved=True).output)
'''


@pytest.mark.slow
def test_a_run_paused_in_one_process_resumes_in_another_where_it_stopped(
    tmp_path: Path,
) -> None:
    script, side = tmp_path / "agent.py", tmp_path / "side.txt"
    script.write_text(AGENT, encoding="utf-8")

    def child(command: str) -> str:
        argv = [sys.executable, str(script), str(tmp_path / "agent.db"), str(side), command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert child("run") == "paused ['refund']"
    # The new process's model has answered nothing yet: it must not start its script over
    # (look the order up again, then ask for a second approval).
    assert child("resume") == "Refunded A1."
    assert side.read_text(encoding="utf-8").splitlines() == ["lookup A1", "refund A1"]
