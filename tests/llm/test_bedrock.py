"""`BedrockModel`: the Converse request, credentials and signing, reasoning sent back verbatim."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from bedrock_replay import (
    ACCESS_KEY,
    BEARER,
    SECRET_KEY,
    SESSION_TOKEN,
    bedrock_model,
    delta,
    event_stream,
    finish,
    isolate_aws,
    replay_bedrock,
)
from llm_replay import HELLO, Recorder, fixture_bytes, fixture_json, json_reply, stream_all

from tidemill.errors import ConfigurationError, MissingDependencyError
from tidemill.llm import BedrockModel, Credentials, ModelRequest, ModelSettings, resolve_model
from tidemill.llm.bedrock._adapter import EMPTY_TOOL_RESULT, build_converse_request
from tidemill.llm.http._sigv4 import AwsKeys, sign_v4
from tidemill.types import ImageRef, Message, Reasoning, ToolCall, ToolDefinition, ToolResult

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolDefinition(name="get_time")


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def conversation() -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.system("Answer in English."),
            Message.user(
                "What is in this picture, and the weather and time there?",
                images=(ImageRef(url=f"data:image/png;base64,{PNG}"),),
            ),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(id="tooluse_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="tooluse_2", name="get_time", raw_arguments='{"zone": '),
                ),
                reasoning=(
                    Reasoning(text="Looks like Paris.", signature="sig-1", provider="bedrock"),
                    Reasoning(redacted_data="b3BhcXVl", provider="bedrock"),
                    Reasoning(text="Unsigned, so not sent back.", provider="bedrock"),
                    Reasoning(text="Claude's, elsewhere.", signature="s", provider="anthropic"),
                ),
            ),
            Message.tool(ToolResult(call_id="tooluse_1", name="get_weather", content="18C, sunny")),
            Message.tool(
                ToolResult(call_id="tooluse_2", name="get_time", content="", is_error=True)
            ),
            Message.user("Thanks!"),
            Message.assistant(""),  # an empty turn is dropped
            Message.user(
                "And this one?",
                images=(ImageRef(url="s3://bucket/photos/cat.jpg"),),
            ),
        ],
        tools=[WEATHER, CLOCK],
        settings=ModelSettings(temperature=0.2, max_tokens=300, top_p=0.9, stop=["END"], seed=7),
    )


async def sent(
    request: ModelRequest, *, stream: bool = True, **options: Any
) -> tuple[dict[str, Any], httpx.Request]:
    body = [delta(0, text="ok"), *finish()]
    reply = (
        event_stream(chunks=body)
        if stream
        else json_reply({"output": {"message": {"role": "assistant", "content": []}}, "usage": {}})
    )
    recorder = Recorder([reply])
    model = bedrock_model(recorder, **options)
    try:
        if stream:
            await stream_all(model, request)
        else:
            await model.request(request)
    finally:
        await model.aclose()
    (http_request,) = recorder.requests
    return json.loads(http_request.content), http_request


async def test_the_exact_converse_request() -> None:
    body, http_request = await sent(
        conversation(),
        thinking_budget=2048,
        additional_model_request_fields={"top_k": 40},
    )
    assert body == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"image": {"format": "png", "source": {"bytes": PNG}}},
                    {"text": "What is in this picture, and the weather and time there?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "Looks like Paris.", "signature": "sig-1"}
                        }
                    },
                    {"reasoningContent": {"redactedContent": "b3BhcXVl"}},
                    {"text": "Let me check."},
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        }
                    },
                    {"toolUse": {"toolUseId": "tooluse_2", "name": "get_time", "input": {}}},
                ],
            },
            {
                # Both tool results and the next user message: one user turn, as Bedrock requires.
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "tooluse_1",
                            "content": [{"text": "18C, sunny"}],
                            "status": "success",
                        }
                    },
                    {
                        "toolResult": {
                            "toolUseId": "tooluse_2",
                            "content": [{"text": EMPTY_TOOL_RESULT}],
                            "status": "error",
                        }
                    },
                    {"text": "Thanks!"},
                    {
                        "image": {
                            "format": "jpeg",
                            "source": {"s3Location": {"uri": "s3://bucket/photos/cat.jpg"}},
                        }
                    },
                    {"text": "And this one?"},
                ],
            },
        ],
        "system": [{"text": "You are terse."}, {"text": "Answer in English."}],
        "inferenceConfig": {
            "maxTokens": 300,
            "temperature": 0.2,
            "topP": 0.9,
            "stopSequences": ["END"],
        },
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "inputSchema": {"json": WEATHER.parameters},
                        "description": "Current weather.",
                    }
                },
                {
                    "toolSpec": {
                        "name": "get_time",
                        "inputSchema": {"json": {"type": "object", "properties": {}}},
                    }
                },
            ]
        },
        "additionalModelRequestFields": {
            "top_k": 40,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        },
    }
    assert http_request.url.raw_path == b"/model/us.amazon.nova-micro-v1%3A0/converse-stream"
    assert http_request.headers["accept"] == "application/vnd.amazon.eventstream"
    assert http_request.headers["content-type"] == "application/json"


def request_from_recording(recorded: dict[str, Any]) -> ModelRequest:
    """The `ModelRequest` that says what a recorded botocore request said."""
    messages: list[Message] = [Message.system(block["text"]) for block in recorded["system"]]
    for turn in recorded["messages"]:
        (block,) = turn["content"]
        messages.append(Message.user(block["text"]))
    tools = [
        ToolDefinition(
            name=tool["toolSpec"]["name"],
            description=tool["toolSpec"].get("description", ""),
            parameters=tool["toolSpec"]["inputSchema"]["json"],
        )
        for tool in recorded.get("toolConfig", {}).get("tools", [])
    ]
    settings = ModelSettings()
    if "topP" in recorded["inferenceConfig"]:
        settings["top_p"] = recorded["inferenceConfig"]["topP"]
    return ModelRequest(messages, tools=tools, settings=settings)


@pytest.mark.parametrize(
    "name",
    [
        "bedrock-converse/tool-use-stream.request.json",
        "bedrock-converse/thinking-tool-use.request.json",
        "bedrock-converse/thinking-stream.request.json",
        "bedrock-converse/redacted-thinking-stream.request.json",
    ],
)
def test_the_body_matches_what_botocore_sent(name: str) -> None:
    recorded = fixture_json(name)
    thinking = recorded.get("additionalModelRequestFields", {}).get("thinking", {})
    body = build_converse_request(
        request_from_recording(recorded), thinking_budget=thinking.get("budget_tokens")
    )
    # botocore sends empty `system` and `inferenceConfig`; Tidemill leaves them out.
    expected = {key: value for key, value in recorded.items() if value not in ([], {})}
    assert dict(body) == expected


async def test_reasoning_goes_back_exactly_as_it_came() -> None:
    signed = await bedrock_model(
        Recorder([json_reply(fixture_bytes("bedrock-converse/thinking-tool-use.json"))])
    ).request(HELLO)
    redacted = await replay_bedrock(
        [fixture_bytes("bedrock-converse/redacted-thinking-stream.bin")],
        model="us.anthropic.claude-3-7-sonnet-20250219-v1:0",
    )
    raw = fixture_json("bedrock-converse/thinking-tool-use.json")
    (recorded_reasoning, _, recorded_tool) = raw["output"]["message"]["content"]
    body = build_converse_request(
        ModelRequest(
            [Message.user("Q"), signed.message, Message.user("Q2"), redacted.response.message]
        )
    )
    assert body["messages"][1]["content"] == [
        recorded_reasoning,
        {"text": "I'll need to check what country you're from to answer that question."},
        recorded_tool,
    ]
    sent_back = [
        block["reasoningContent"]["redactedContent"] for block in body["messages"][3]["content"][:2]
    ]
    assert sent_back == [r.redacted_data for r in redacted.response.message.reasoning]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.com/cat.png", "cannot fetch the image"),
        ("data:image/bmp;base64,Qk0=", "does not take images of type 'image/bmp'"),
        ("s3://bucket/cat", "does not take images of type 'unknown'"),
    ],
)
def test_images_bedrock_cannot_take(url: str, message: str) -> None:
    request = ModelRequest([Message.user("Look", images=(ImageRef(url=url),))])
    with pytest.raises(ConfigurationError, match=message):
        build_converse_request(request)


def test_an_s3_image_with_a_media_type() -> None:
    image = ImageRef(url="s3://bucket/cat", media_type="image/webp")
    body = build_converse_request(ModelRequest([Message.user("", images=(image,))]))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"image": {"format": "webp", "source": {"s3Location": {"uri": "s3://bucket/cat"}}}}
            ],
        }
    ]


# -- signing, on the wire ---------------------------------------------------------------------


def signed_date(request: httpx.Request) -> datetime:
    return datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


@pytest.mark.parametrize("stream", [True, False])
async def test_the_signature_covers_the_bytes_actually_sent(stream: bool) -> None:
    _, request = await sent(conversation(), stream=stream, session_token=SESSION_TOKEN)
    assert request.headers["x-amz-security-token"] == SESSION_TOKEN
    again = sign_v4(
        "POST",
        str(request.url),
        body=request.content,
        keys=AwsKeys(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN),
        region="us-east-1",
        service="bedrock",
        now=signed_date(request),
    )
    assert request.headers["authorization"] == again["authorization"]
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token" in again["authorization"]


async def test_botocore_accepts_the_signature_of_the_request_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    auth_module: Any = pytest.importorskip("botocore.auth")
    credentials_module: Any = pytest.importorskip("botocore.credentials")
    awsrequest: Any = pytest.importorskip("botocore.awsrequest")
    _, request = await sent(conversation(), model="us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    monkeypatch.setattr(auth_module, "get_current_datetime", lambda *_, **__: signed_date(request))
    theirs = awsrequest.AWSRequest(method="POST", url=str(request.url), data=request.content)
    credentials = credentials_module.Credentials(ACCESS_KEY, SECRET_KEY)
    auth_module.SigV4Auth(credentials, "bedrock", "us-east-1").add_auth(theirs)
    assert request.headers["authorization"] == theirs.headers["Authorization"]
    assert b"%3A0/converse-stream" in request.url.raw_path


async def test_a_bedrock_api_key_is_a_bearer_token_and_nothing_is_signed() -> None:
    _, request = await sent(HELLO, api_key=BEARER)
    assert request.headers["authorization"] == f"Bearer {BEARER}"
    assert "x-amz-date" not in request.headers


async def test_an_arn_is_encoded_into_the_path() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v1:0"
    _, request = await sent(HELLO, model=arn)
    assert request.url.raw_path == (
        b"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
        b"%2Fus.anthropic.claude-v1%3A0/converse-stream"
    )


# -- credentials ---------------------------------------------------------------------------------


def test_keys_and_region_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    model = BedrockModel("amazon.nova-micro-v1:0")
    assert model.region == "ap-south-1"
    assert model.credentials.base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert BedrockModel("m").region == "eu-west-3"
    assert BedrockModel("m", region="us-west-2").region == "us-west-2"
    described = json.dumps(model.describe())
    assert SECRET_KEY not in described and SESSION_TOKEN not in described
    assert SECRET_KEY not in repr(model.credentials) and SESSION_TOKEN not in repr(
        model.credentials
    )
    assert set(model.credentials.secrets()) == {SECRET_KEY, SESSION_TOKEN}


async def test_a_bedrock_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)  # the API key wins over these
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    model = BedrockModel("m")
    assert not model.access.signs and model.describe()["auth"] == "bearer"
    assert BEARER in model.credentials.secrets()


def test_credentials_object_and_endpoint_override(monkeypatch: pytest.MonkeyPatch) -> None:
    creds = Credentials(
        region="ca-central-1", aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY
    )
    model = BedrockModel("m", credentials=creds)
    assert (model.region, model.access.signs) == ("ca-central-1", True)
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "https://vpce-123.bedrock.example/")
    assert BedrockModel("m", credentials=creds).credentials.base_url == (
        "https://vpce-123.bedrock.example"
    )


def test_without_a_region() -> None:
    with pytest.raises(ConfigurationError, match="No AWS region") as caught:
        BedrockModel("m", access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)
    assert "AWS_REGION" in str(caught.value)


@pytest.mark.parametrize("botocore", [True, False])
async def test_without_credentials(monkeypatch: pytest.MonkeyPatch, botocore: bool) -> None:
    # Without botocore nothing more can be found: the model is refused when built. With it,
    # its chain is asked on the first call (off the event loop), which fails.
    if not botocore:
        hide_botocore(monkeypatch)
        with pytest.raises(ConfigurationError, match="No AWS credentials") as caught:
            BedrockModel("m", region="us-east-1")
    else:
        recorder = Recorder([])
        model = BedrockModel("m", region="us-east-1", http_client=recorder.client())
        with pytest.raises(ConfigurationError, match="No AWS credentials") as caught:
            await model.request(HELLO)
        assert recorder.requests == []
    message = str(caught.value)
    assert "AWS_ACCESS_KEY_ID" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "AWS_BEARER_TOKEN_BEDROCK" in message
    assert ("tidemill[bedrock]" in message) == (not botocore)


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"AWS_ACCESS_KEY_ID": ACCESS_KEY}, "AWS_SECRET_ACCESS_KEY"),
        ({"AWS_SECRET_ACCESS_KEY": SECRET_KEY}, "AWS_ACCESS_KEY_ID"),
    ],
)
def test_half_a_key_pair(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], missing: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=f"{missing} is missing"):
        BedrockModel("m", region="us-east-1")
    with pytest.raises(ConfigurationError, match="AWS_SECRET_ACCESS_KEY is missing"):
        BedrockModel("m", region="us-east-1", access_key_id=ACCESS_KEY)


def write_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "credentials").write_text(
        f"[dev]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        f"aws_session_token = {SESSION_TOKEN}\n"
    )
    (tmp_path / "config").write_text("[profile dev]\nregion = eu-north-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))


@pytest.mark.parametrize("how", ["argument", "AWS_PROFILE"])
async def test_a_profile_of_the_shared_files_through_botocore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    pytest.importorskip("botocore")
    write_profile(tmp_path, monkeypatch)
    options: dict[str, Any] = {}
    if how == "argument":
        options["profile"] = "dev"
    else:
        monkeypatch.setenv("AWS_PROFILE", "dev")
    recorder = Recorder([event_stream(chunks=[delta(0, text="hi"), *finish()])])
    model = BedrockModel("m", http_client=recorder.client(), **options)
    assert model.region == "eu-north-1" and model.access.signs
    assert model.describe()["auth"] == "sigv4"
    await stream_all(model)
    (request,) = recorder.requests
    assert request.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert "/eu-north-1/bedrock/aws4_request" in request.headers["authorization"]
    assert request.headers["x-amz-security-token"] == SESSION_TOKEN


def test_an_unknown_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore")
    write_profile(tmp_path, monkeypatch)
    with pytest.raises(ConfigurationError, match="botocore could not load AWS credentials"):
        BedrockModel("m", region="us-east-1", profile="nope")


def hide_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def without_botocore(name: str, package: str | None = None) -> Any:
        if name.startswith("botocore"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without_botocore)


def test_a_profile_without_botocore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_botocore(monkeypatch)
    with pytest.raises(MissingDependencyError, match=r"tidemill\[bedrock\]") as caught:
        BedrockModel("m", region="us-east-1", profile="dev")
    assert caught.value.package == "botocore"


@pytest.mark.parametrize("model_id", ["", "  ", "\t"])
def test_a_model_without_an_id_is_refused_when_built(model_id: str) -> None:
    with pytest.raises(ConfigurationError, match="model id") as caught:
        BedrockModel(model_id, region="us-east-1", access_key_id=ACCESS_KEY,
                     secret_access_key=SECRET_KEY)  # fmt: skip
    assert caught.value.hint is not None and "bedrock:<model id>" in caught.value.hint


def test_resolve_model_builds_a_bedrock_model() -> None:
    model = resolve_model(
        "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        region="us-east-1",
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        temperature=0,
    )
    assert isinstance(model, BedrockModel)
    assert model.model_name == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert model.settings == {"temperature": 0}
    with pytest.raises(ConfigurationError, match="Did you mean 'region'"):
        resolve_model("bedrock:m", regoin="us-east-1")
