"""Every provider's requests, sent over real HTTP to a server that checks the vendor's schema.

Each provider prefix of the model table is driven through `SchemaServer`
(`schema_server.py`, a real server on 127.0.0.1) with one representative
conversation: a system prompt, user text with an image (by URL where the
vendor takes one, as a base64 data URL where it takes only those, none for
DeepSeek, whose chat API takes text only), tool definitions, an assistant
turn with reasoning (and its signature where the provider has one) and a
tool call, the tool's result, and the settings temperature, top_p,
max_tokens, stop and seed; streamed and not. The server checks method,
path, query, the auth header's form, `anthropic-version`, `content-type`
and the JSON body, and answers with a recorded response (or a 400 naming
every problem). What each vendor's body is checked against is listed in
`schema_server`'s docstring.

A request the vendor's documentation refuses is marked `xfail(strict=True)`
with the exact problem, so the day the adapter is fixed the test says so.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from bedrock_replay import ACCESS_KEY, EVENT_STREAM, SECRET_KEY, isolate_aws
from llm_replay import API_KEY, NO_RETRY, Reply, fixture_bytes, stream_all
from replay_models import TOKEN
from schema_server import (
    SchemaServer,
    Wire,
    anthropic_vertex_wire,
    anthropic_wire,
    azure_wire,
    bedrock_wire,
    chat_wire,
    gemini_wire,
    responses_wire,
)

from tidemill.errors import ProviderError
from tidemill.llm import (
    ForcedTool,
    HttpModel,
    ModelRequest,
    ModelSettings,
    OutputFormat,
    resolve_model,
)
from tidemill.llm._spec import KNOWN_PROVIDERS
from tidemill.types import (
    ImageRef,
    Message,
    ModelResponse,
    Reasoning,
    ToolCall,
    ToolDefinition,
    ToolResult,
)

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 16).decode()
IMAGE_URL = "https://example.com/cat.png"
SIGNATURE = base64.b64encode(b"opaque thought signature").decode()

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
SETTINGS = ModelSettings(temperature=0.2, top_p=0.9, max_tokens=100, stop=["END"], seed=7)


def conversation(
    *, image: str | None, reasoning: Reasoning, call_signature: str | None = None
) -> ModelRequest:
    images = (ImageRef(url=image),) if image else ()
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user("What is in this picture, and the weather in Paris?", images=images),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(
                        id="call_1",
                        name="get_weather",
                        arguments={"city": "Paris"},
                        signature=call_signature,
                    ),
                ),
                reasoning=(reasoning,),
            ),
            Message.tool(ToolResult(call_id="call_1", name="get_weather", content="18C, sunny")),
            Message.user("Thanks!"),
        ],
        tools=[WEATHER],
        settings=SETTINGS,
    )


JSON = "application/json"
CHAT_REPLY = ("openai-chat/text-stream.sse", "openai-chat/text.json")


@dataclass(frozen=True)
class Case:
    """One provider prefix: how to build its model, what its server accepts, what it answers."""

    provider: str
    model: str
    wire: Callable[[], Wire]
    options: Callable[[str], dict[str, Any]]
    """Server URL → the options of `resolve_model`."""
    image: str | None = IMAGE_URL
    reasoning: Reasoning = field(
        default_factory=lambda: Reasoning(text="Paris.", signature="sig-1", provider=None)
    )
    call_signature: str | None = None
    replies: tuple[str, str] = CHAT_REPLY
    """(streamed, whole) response files: the vendor's own recordings where the fixtures have
    them, else hand-made ones (`handmade/`, see MANIFEST.md)."""
    stream_content_type: str = "text/event-stream"

    def request(self) -> ModelRequest:
        reasoning = self.reasoning
        if reasoning.provider is None:
            reasoning = reasoning.model_copy(update={"provider": self.provider})
        return conversation(
            image=self.image, reasoning=reasoning, call_signature=self.call_signature
        )

    def reply(self, stream: bool) -> Reply:
        streamed, whole = self.replies
        if stream:
            return Reply(fixture_bytes(streamed), content_type=self.stream_content_type)
        return Reply(fixture_bytes(whole), content_type=JSON)

    def build(self, url: str) -> HttpModel:
        model = resolve_model(f"{self.provider}:{self.model}", retry=NO_RETRY, **self.options(url))
        assert isinstance(model, HttpModel)
        return model


def keyed(prefix: str = "") -> Callable[[str], dict[str, Any]]:
    return lambda url: {"api_key": API_KEY, "base_url": url + prefix}


def google_cloud(location: str) -> Callable[[str], dict[str, Any]]:
    return lambda url: {
        "project": "acme",
        "location": location,
        "access_token": TOKEN,
        "base_url": url,
    }


def chat(provider: str, model: str, prefix: str, **extra: Any) -> Case:
    return Case(provider, model, lambda: chat_wire(provider, prefix), keyed(prefix), **extra)


CASES = [
    chat("openai", "gpt-4o-mini", "/v1"),
    Case(
        "openai-responses",
        "gpt-4.1-mini",
        responses_wire,
        keyed("/v1"),
        reasoning=Reasoning(
            id="rs_1", text="Paris.", redacted_data="gAAAAB-encrypted", provider="openai-responses"
        ),
        replies=("openai-responses/text-stream.sse", "openai-responses/text.json"),
    ),
    Case(
        "azure",
        "prod-gpt4o",
        lambda: azure_wire("prod-gpt4o"),
        keyed(),
        replies=("handmade/azure-chat-stream.sse", "handmade/azure-tool-call.json"),
    ),
    Case(
        "anthropic",
        "claude-sonnet-4-5",
        anthropic_wire,
        keyed(),
        replies=("anthropic/text-stream.sse", "anthropic/text.json"),
    ),
    Case(
        "anthropic-vertex",
        "claude-sonnet-4-5@20250929",
        anthropic_vertex_wire,
        google_cloud("us-east5"),
        # Claude on Vertex answers with Anthropic's own thinking blocks.
        reasoning=Reasoning(text="Paris.", signature="sig-1", provider="anthropic"),
        replies=("anthropic/text-stream.sse", "anthropic/text.json"),
    ),
    Case(
        "gemini",
        "gemini-2.5-flash",
        lambda: gemini_wire(vertex=False),
        lambda url: {
            "api_key": API_KEY,
            "base_url": url + "/v1beta",
            "thinking_budget": 1024,
            "include_thoughts": True,
        },
        reasoning=Reasoning(text="Paris.", signature=SIGNATURE, provider="gemini"),
        call_signature=SIGNATURE,
        replies=("gemini/text-stream.sse", "gemini/text.json"),
    ),
    Case(
        "vertex",
        "gemini-2.5-pro",
        lambda: gemini_wire(vertex=True),
        google_cloud("us-central1"),
        reasoning=Reasoning(text="Paris.", signature=SIGNATURE, provider="vertex"),
        call_signature=SIGNATURE,
        replies=("gemini/vertex-text-stream.sse", "gemini/text.json"),
    ),
    Case(
        "bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        bedrock_wire,
        lambda url: {
            "region": "us-east-1",
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "base_url": url,
        },
        image=PNG,  # Converse takes image bytes (or S3), never a URL
        replies=("bedrock-converse/text-stream.bin", "bedrock-converse/text.json"),
        stream_content_type=EVENT_STREAM,
    ),
    chat(
        "mistral",
        "mistral-large-latest",
        "/v1",
        replies=("mistral/thinking-stream.sse", "mistral/text.json"),
    ),
    # DeepSeek's chat API takes text only; its reasoning must come back as reasoning_content.
    chat(
        "deepseek",
        "deepseek-reasoner",
        "",
        image=None,
        replies=("deepseek/reasoning-stream.sse", "deepseek/reasoning-parallel-tool-calls.json"),
    ),
    chat(
        "groq",
        "meta-llama/llama-4-scout-17b-16e-instruct",
        "/openai/v1",
        replies=("groq/tool-call-stream.sse", "groq/structured-output.json"),
    ),
    chat(
        "together",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "/v1",
        replies=("handmade/together-chat-stream.sse", "together/text.json"),
    ),
    chat(
        "openrouter",
        "openai/gpt-4o",
        "/api/v1",
        replies=("openrouter/text-stream.sse", "openrouter/tool-call.json"),
    ),
    chat(
        "ollama",
        "llama3.2-vision",
        "/v1",
        image=PNG,  # Ollama takes data URLs only
        replies=("handmade/ollama-chat-stream.sse", "ollama/text.json"),
    ),
    chat(
        "vllm",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "/v1",
        replies=("handmade/vllm-chat-stream.sse", "handmade/vllm-tool-call.json"),
    ),
    chat("openai-compatible", "local-model", "/v1"),
]
BY_PROVIDER = {case.provider: case for case in CASES}

KNOWN_PROBLEMS: dict[str, str] = {}
"""Adapter requests the vendor's documented schema refuses, by provider: each case is
marked `xfail(strict=True)` with the problem. None today (Mistral's `seed` was one)."""


def params() -> list[Any]:
    out = []
    for case in CASES:
        marks = []
        if case.provider in KNOWN_PROBLEMS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_PROBLEMS[case.provider]))
        for stream in (False, True):
            out.append(
                pytest.param(
                    case,
                    stream,
                    marks=marks,
                    id=f"{case.provider}-{'stream' if stream else 'whole'}",
                )
            )
    return out


@pytest.fixture(autouse=True)
def _no_aws_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


async def exchange(
    case: Case, stream: bool, server: SchemaServer, request: ModelRequest | None = None
) -> ModelResponse | None:
    """One call of `case`'s model to `server`: the parsed answer, or `None` when the server
    refused the request (its problems say why)."""
    request = request or case.request()
    server.replies.append(case.reply(stream))
    model = case.build(server.url)
    try:
        if stream:
            return (await stream_all(model, request)).response
        return await model.request(request)
    except ProviderError:
        if not server.problems:
            raise  # not the schema check: a real failure of the adapter or the fixture
        return None
    finally:
        await model.aclose()


@pytest.fixture
def schema_server() -> Iterator[Callable[[Wire], SchemaServer]]:
    """Start `SchemaServer`s for a test; all are stopped after it."""
    servers: list[SchemaServer] = []

    def start(wire: Wire) -> SchemaServer:
        servers.append(SchemaServer(wire).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_every_provider_of_the_table_is_covered() -> None:
    assert set(BY_PROVIDER) == set(KNOWN_PROVIDERS)


@pytest.mark.parametrize(("case", "stream"), params())
async def test_requests_fit_the_vendor_schema(
    case: Case, stream: bool, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    server = schema_server(case.wire())
    response = await exchange(case, stream, server)
    server.assert_valid()
    # ... and the vendor's answer (its recording, or a hand-made one) was read.
    assert response is not None and (response.message.content or response.message.tool_calls)
    assert response.provider == case.provider
    (seen,) = server.seen
    assert server.wire.asked_for_a_stream(seen) is stream, (
        f"[{case.provider}] a {'streamed' if stream else 'whole'} call was sent as the other kind"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_mistral_gets_its_seed_as_random_seed(
    stream: bool, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Mistral names the seed `random_seed` and refuses `seed`; every other vendor takes `seed`."""
    server = schema_server(BY_PROVIDER["mistral"].wire())
    await exchange(BY_PROVIDER["mistral"], stream, server)
    server.assert_valid()
    (seen,) = server.seen
    assert seen.body["random_seed"] == SETTINGS["seed"]
    assert "seed" not in seen.body
    server = schema_server(BY_PROVIDER["openai"].wire())
    await exchange(BY_PROVIDER["openai"], stream, server)
    (seen,) = server.seen
    assert seen.body["seed"] == SETTINGS["seed"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("provider", "model"),
    [("anthropic", "claude-sonnet-5-5"), ("anthropic-vertex", "claude-opus-4-7@20260101")],
)
async def test_newer_claude_models_get_no_sampling_settings(
    provider: str, model: str, stream: bool, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Opus 4.7 and the 5 family refuse temperature and top_p; the adapter leaves them out."""
    case = dataclasses.replace(BY_PROVIDER[provider], model=model)
    server = schema_server(case.wire())
    assert await exchange(case, stream, server) is not None
    server.assert_valid()
    assert not {"temperature", "top_p"} & set(server.seen[0].body)


CITY = OutputFormat(
    "city",
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"],
    },
    strict=True,
    description="The city asked about.",
)


@pytest.mark.parametrize("output", [CITY, OutputFormat.json_object()], ids=["schema", "json"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.provider)
async def test_structured_output_requests_fit_the_vendor_schema(
    case: Case,
    stream: bool,
    output: OutputFormat,
    schema_server: Callable[[Wire], SchemaServer],
) -> None:
    """`response_format`, `responseSchema`, `text.format` or a forced tool, as each vendor
    documents it (the reply is plain text: only the request is under test here)."""
    server = schema_server(case.wire())
    settings = dict(SETTINGS)
    # No tools here: with tools, Gemini leaves the schema out (it cannot have both).
    images = (ImageRef(url=case.image),) if case.image else ()
    request = ModelRequest(
        [Message.system("Answer in JSON."), Message.user("Which city is this?", images=images)],
        settings=ModelSettings(**settings),
        output_format=output,
    )
    await exchange(case, stream, server, request)
    server.assert_valid()
    # The format reached the vendor, in whichever form it takes (DeepSeek: JSON mode only).
    sent = json.dumps(server.seen[0].body)
    if output.schema is not None and case.provider != "deepseek":
        assert '"population"' in sent, sent
    else:
        markers = ('"json_object"', '"application/json"', f'"{output.name}"')  # or a forced tool
        assert any(marker in sent for marker in markers), sent


# -- request options and a forced tool choice ----------------------------------------------------

OPENAI_OPTIONS: dict[str, Any] = {
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "user": "ann-42",
    "safety_identifier": "ann-42-hash",
    "parallel_tool_calls": False,
    "reasoning_effort": "low",
    "logit_bias": {"50256": -100},
    "metadata": {"run": "7"},
    "store": False,
    "service_tier": "flex",
    "prompt_cache_key": "tenant-1",
    "verbosity": "low",
    "n": 1,
}
"""Chat Completions fields an OpenAI-format adapter sends as they are."""

OPTIONS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "mistral": (  # the fields Mistral's own request has (`MISTRAL_FIELDS`)
        {
            "presence_penalty": 0.5,
            "frequency_penalty": 0.25,
            "parallel_tool_calls": False,
            "metadata": {"run": "7"},
            "n": 1,
            "safe_prompt": True,
        },
        ["presence_penalty", "frequency_penalty", "parallel_tool_calls", "metadata", "safe_prompt"],
    ),
    "anthropic": (
        {
            "user": "ann-42",
            "service_tier": "default",
            "reasoning_effort": "high",
            "parallel_tool_calls": False,
            "store": False,
            "n": 1,
        },
        [
            "metadata.user_id",
            "service_tier",
            "output_config.effort",
            "tool_choice.disable_parallel_tool_use",
        ],
    ),
    "gemini": (
        {"presence_penalty": 0.5, "frequency_penalty": 0.25, "reasoning_effort": "medium"},
        [
            "generationConfig.presencePenalty",
            "generationConfig.frequencyPenalty",
            "generationConfig.thinkingConfig.thinkingBudget",
        ],
    ),
    "bedrock": (
        {"metadata": {"tenant": "acme"}, "service_tier": "flex", "reasoning_effort": "low"},
        ["requestMetadata.tenant", "serviceTier.type", "outputConfig.effort"],
    ),
    "openai-responses": (
        {
            "user": "ann",
            "safety_identifier": "ann-hash",
            "metadata": {"run": "7"},
            "parallel_tool_calls": False,
            "service_tier": "flex",
            "reasoning_effort": "low",
            "verbosity": "low",
            "prompt_cache_key": "tenant-1",
            "store": False,
        },
        [
            "user",
            "safety_identifier",
            "metadata",
            "parallel_tool_calls",
            "service_tier",
            "reasoning.effort",
            "text.verbosity",
            "prompt_cache_key",
        ],
    ),
}
OPTIONS["anthropic-vertex"] = OPTIONS["anthropic"]
OPTIONS["vertex"] = OPTIONS["gemini"]


def options_of(provider: str) -> tuple[dict[str, Any], list[str]]:
    """The options sent to `provider`'s adapter, and the body paths they must reach."""
    if provider in OPTIONS:
        return OPTIONS[provider]
    return OPENAI_OPTIONS, list(OPENAI_OPTIONS)


def _at(body: Any, path: str) -> Any:
    for part in path.split("."):
        assert isinstance(body, dict) and part in body, f"{path}: missing"
        body = body[part]
    return body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.provider)
async def test_options_and_a_forced_tool_fit_the_vendor_schema(
    case: Case, stream: bool, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Every field a Chat Completions client may send beyond the typed ones, as each
    adapter sends it (as it is, or in its vendor's form), and a named tool forced."""
    server = schema_server(case.wire())
    options, paths = options_of(case.provider)
    request = dataclasses.replace(
        case.request(), tool_choice=ForcedTool("get_weather"), options=options
    )
    await exchange(case, stream, server, request)
    server.assert_valid()
    sent = server.seen[0].body
    for path in paths:
        _at(sent, path)
    choice = json.dumps(sent.get("tool_choice") or sent.get("toolConfig"))
    assert "get_weather" in choice, choice


LOGPROBS: dict[str, Any] = {"logprobs": True, "top_logprobs": 3}
"""Log probabilities with three alternatives a token, as a Chat Completions client asks."""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_log_probabilities_fit_the_responses_schema(
    stream: bool, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Chat Completions' `logprobs` as an `include` entry, `top_logprobs` as it is."""
    case = BY_PROVIDER["openai-responses"]
    server = schema_server(case.wire())
    await exchange(case, stream, server, dataclasses.replace(case.request(), options=LOGPROBS))
    server.assert_valid()
    sent = server.seen[0].body
    assert (sent["top_logprobs"], "logprobs" in sent) == (3, False)
    assert sent["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]


@pytest.mark.parametrize("choice", ["required", ForcedTool("get_weather")], ids=["any", "named"])
@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
async def test_a_forced_tool_beside_the_output_tool_fits_the_vendor_schema(
    provider: str, choice: Any, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Structured output is a forced tool there: the request's own choice takes its place."""
    case = BY_PROVIDER[provider]
    server = schema_server(case.wire())
    request = dataclasses.replace(case.request(), tool_choice=choice, output_format=CITY)
    await exchange(case, False, server, request)
    server.assert_valid()
    sent = server.seen[0].body
    names = json.dumps(sent.get("tools") or sent["toolConfig"]["tools"])
    assert '"city"' in names and '"get_weather"' in names


# -- the checks can fail -------------------------------------------------------------------------


async def _post(server: SchemaServer, path: str, headers: dict[str, str], body: Any) -> Any:
    async with httpx.AsyncClient() as client:
        return await client.post(server.url + path, headers=headers, content=json.dumps(body))


async def test_a_malformed_openai_body_is_refused_field_by_field(
    schema_server: Callable[[Wire], SchemaServer],
) -> None:
    server = schema_server(chat_wire("openai", "/v1"))
    server.replies.append(Reply(fixture_bytes("openai-chat/text.json"), content_type=JSON))
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": 5},
            {"role": "tool", "content": "18C"},
        ],
        "temprature": 0.2,
        "stream": False,
    }
    answer = await _post(
        server, "/v1/chat/completions", {"content-type": JSON, "authorization": "Bearer k"}, body
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
    problems = "\n".join(server.problems)
    assert "[openai] body.messages[1].content: 5 is not of type 'string'" in problems
    assert "[openai] body.messages[2]: 'tool_call_id' is a required property" in problems
    assert "'temprature' was unexpected" in problems
    with pytest.raises(AssertionError, match=r"refuses the request:\n  \[openai\] body"):
        server.assert_valid()


async def test_a_wrong_path_or_header_is_refused(
    schema_server: Callable[[Wire], SchemaServer],
) -> None:
    server = schema_server(anthropic_wire())
    server.replies += [Reply(b"{}", content_type=JSON), Reply(b"{}", content_type=JSON)]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []}
    wrong_path = await _post(server, "/v1/message", {"content-type": JSON}, body)
    bad_headers = {"content-type": JSON, "x-api-key": "k", "anthropic-version": "2024-01-01"}
    wrong_version = await _post(server, "/v1/messages", bad_headers, body)
    assert (wrong_path.status_code, wrong_version.status_code) == (400, 400)
    assert server.problems == [
        "[anthropic] path: '/v1/message' does not match '/v1/messages'",
        "[anthropic] header anthropic-version: '2024-01-01' does not match '2023-06-01'",
    ]


AUTH_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")


def _first_item(body: dict[str, Any]) -> dict[str, Any]:
    for key in ("messages", "contents", "input"):
        if isinstance(body.get(key), list) and isinstance(body[key][0], dict):
            item: dict[str, Any] = body[key][0]
            return item
    raise AssertionError(f"no message list in {sorted(body)}")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.provider)
async def test_every_vendor_check_can_fail(
    case: Case, schema_server: Callable[[Wire], SchemaServer]
) -> None:
    """Replay a real request of each adapter with an unknown field at the top and one in a
    message, and without its auth header: each is named in the server's refusal."""
    server = schema_server(case.wire())
    await exchange(case, False, server)
    (seen,) = server.seen
    server.problems.clear()
    body = json.loads(json.dumps(seen.body))
    body["tidemill_top_level_bogus"] = 1
    _first_item(body)["tidemill_nested_bogus"] = 1
    auth = next(h for h in AUTH_HEADERS if h in seen.headers)
    headers = {k: v for k, v in seen.headers.items() if k not in (auth, "content-length", "host")}
    server.replies.append(case.reply(False))
    answer = await _post(server, seen.path, headers, body)
    assert answer.status_code == 400
    problems = "\n".join(server.problems)
    assert "tidemill_top_level_bogus" in problems, problems
    assert "tidemill_nested_bogus" in problems, problems
    assert f"header {auth}: missing" in problems, problems
    assert all(line.startswith(f"[{case.provider}] ") for line in server.problems)


def _mistral_openai_ids(body: dict[str, Any]) -> None:
    body["messages"][2]["tool_calls"][0]["id"] = "call_1"
    body["messages"][3]["tool_call_id"] = "call_1"


def _deepseek_no_reasoning(body: dict[str, Any]) -> None:
    del body["messages"][2]["reasoning_content"]


def _ollama_image_url(body: dict[str, Any]) -> None:
    body["messages"][1]["content"][1]["image_url"]["url"] = IMAGE_URL


def _vertex_model_in_body(body: dict[str, Any]) -> None:
    body["model"] = "claude-sonnet-4-5@20250929"
    body["stream"] = True  # while the URL says :rawPredict


def _gemini_json_schema_types(body: dict[str, Any]) -> None:
    body["tools"][0]["functionDeclarations"][0]["parameters"]["type"] = "object"
    body["generationConfig"]["max_output_tokens"] = 100


def _bedrock_wrong_types(body: dict[str, Any]) -> None:
    body["inferenceConfig"]["maxTokens"] = "100"
    body["messages"][0]["content"][0]["image"]["format"] = "tiff"


def _anthropic_sampling_for_a_newer_model(body: dict[str, Any]) -> None:
    body["model"] = "claude-sonnet-5-5"


VENDOR_RULES = [
    (
        "mistral",
        _mistral_openai_ids,
        [
            "tool_calls[0].id: 'call_1' is not 9 letters or digits",
            "messages[3].tool_call_id: 'call_1' is not 9",
        ],
    ),
    (
        "anthropic",
        _anthropic_sampling_for_a_newer_model,
        ["body.temperature: claude-sonnet-5-5 takes no sampling", "body.top_p: claude-sonnet-5-5"],
    ),
    ("deepseek", _deepseek_no_reasoning, ["messages[2].reasoning_content: missing"]),
    ("ollama", _ollama_image_url, ["Ollama takes only base64 data URLs"]),
    (
        "anthropic-vertex",
        _vertex_model_in_body,
        ["'model' was unexpected", "body.stream: True but the URL calls :rawPredict"],
    ),
    (
        "gemini",
        _gemini_json_schema_types,
        [
            "body.tools[0].functionDeclarations[0].parameters.type: 'object' is not one of",
            "'max_output_tokens' was unexpected",
        ],
    ),
    (
        "bedrock",
        _bedrock_wrong_types,
        [
            "Invalid type for parameter inferenceConfig.maxTokens",
            "messages[0].content[0].image.format",
        ],
    ),
]


@pytest.mark.parametrize(
    ("provider", "mutate", "expected"), VENDOR_RULES, ids=[rule[0] for rule in VENDOR_RULES]
)
async def test_each_vendor_specific_rule_can_fail(
    provider: str,
    mutate: Callable[[dict[str, Any]], None],
    expected: list[str],
    schema_server: Callable[[Wire], SchemaServer],
) -> None:
    """Break, in a real request, one thing each vendor documents differently."""
    case = BY_PROVIDER[provider]
    server = schema_server(case.wire())
    request = case.request()
    server.replies.append(case.reply(False))
    model = case.build(server.url)
    try:
        await model.request(request)
    finally:
        await model.aclose()
    server.assert_valid()  # the request as the adapter sent it passes ...
    (seen,) = server.seen
    body = json.loads(json.dumps(seen.body))
    mutate(body)
    headers = {k: v for k, v in seen.headers.items() if k not in ("content-length", "host")}
    server.replies.append(case.reply(False))
    answer = await _post(server, seen.path, headers, body)
    assert answer.status_code == 400
    problems = "\n".join(server.problems)  # ... and the broken one does not
    for fragment in expected:
        assert fragment in problems, problems
