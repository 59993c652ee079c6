r"""Provider text that UTF-8 cannot carry: a JSON `\ud83d` escape with no other half.

Decoded, such an escape is a lone surrogate; journaled as it is, it fails the
append (`SerializationError`) and leaves the thread mid-run. The provider
layer makes every decoded string valid Unicode, joining real pairs.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from llm_replay import Recorder, chat_model, fixture_bytes, fixture_json, json_reply, replay_stream

from tidemill import AgentRuntime
from tidemill.agents.checkpoint import SQLiteCheckpointer
from tidemill.llm import ModelRequest
from tidemill.llm._assembly import parse_arguments
from tidemill.llm._json import loads, loads_object
from tidemill.types import Message
from tidemill.types._text import valid_text

LONE = "\\ud83d"
"""A high surrogate's JSON escape, as JSON text (backslash, u, d83d)."""


def with_content(content_json: str) -> bytes:
    """The recorded OpenAI answer, its content replaced by raw JSON string text."""
    body = fixture_json("openai-chat/text.json")
    body["choices"][0]["message"]["content"] = "PLACEHOLDER"
    return json.dumps(body).replace('"PLACEHOLDER"', content_json).encode()


@given(st.text())
def test_valid_text_always_encodes_and_keeps_valid_text(text: str) -> None:
    cleaned = valid_text(text)
    cleaned.encode("utf-8")  # never raises
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        assert cleaned == text


def test_pairs_are_joined_and_halves_replaced() -> None:
    assert valid_text("\ud83d\ude00") == "\U0001f600"
    assert valid_text("a\ud83d") == "a\ufffd"
    assert valid_text("\ude00b") == "\ufffdb"
    assert valid_text("\ude00\ud83d") == "\ufffd\ufffd"  # the wrong order is no pair


def test_decoding_repairs_every_string_only_when_an_escape_is_there() -> None:
    decoded = loads('{"k\\ud800": ["x\\udfff", {"n": 1, "t": "\\ud83d\\ude00 ok"}]}')
    assert decoded == {"k\ufffd": ["x\ufffd", {"n": 1, "t": "\U0001f600 ok"}]}
    assert loads_object(b'{"t": "' + LONE.encode() + b'"}') == {"t": "\ufffd"}
    plain = '{"t": "caf\\u00e9 \\\\ud83d"}'  # an escaped backslash, then text: no surrogate
    assert loads(plain) == {"t": "caf\u00e9 \\ud83d"}
    assert parse_arguments('{"name": "x' + LONE + '"}') == ({"name": "x\ufffd"}, None)


async def test_a_whole_answer_with_a_lone_escape_parses_to_valid_text() -> None:
    recorder = Recorder([json_reply(with_content(f'"Tides {LONE} rise"'))])
    model = chat_model("openai", recorder)
    try:
        response = await model.request(ModelRequest([Message.user("Hi")]))
    finally:
        await model.aclose()
    assert response.message.content == "Tides \ufffd rise"


async def test_a_streamed_answer_with_a_lone_escape_parses_to_valid_text() -> None:
    recorded = fixture_bytes("openai-chat/text-stream.sse")
    assert b'"content":"420"' in recorded
    streamed = await replay_stream(
        "openai", [recorded.replace(b'"420"', b'"4' + LONE.encode() + b'"')]
    )
    assert streamed.response.message.content.startswith("4\ufffd")
    assert streamed.text == streamed.response.message.content
    streamed.text.encode("utf-8")


async def test_an_agent_run_on_such_an_answer_is_journaled(tmp_path: Path) -> None:
    """Before the repair, the turn's append raised and the thread was left running."""
    recorder = Recorder([json_reply(with_content(f'"Half an emoji: {LONE}"'))])
    model = chat_model("openai", recorder)
    checkpointer = SQLiteCheckpointer(tmp_path / "journal.db")
    try:
        agent = AgentRuntime(model=model, checkpointer=checkpointer)
        response = await agent.arun("Say something.", thread_id="t")
        assert response.output == "Half an emoji: \ufffd"
        state = await agent.astate("t")
        assert state is not None and state.status == "finished"
    finally:
        await checkpointer.aclose()
        await model.aclose()
