"""A local HTTP server that checks each request against the vendor's documented request schema.

`SchemaServer` is the `ReplayServer` of `llm_replay` (a real threaded
HTTP/1.1 server on 127.0.0.1) with a checkpoint: before it answers a
request it checks the method, the path and query, the headers that matter
(the form of the auth header, `anthropic-version`, `content-type`) and the
JSON body against the `Wire` of the vendor under test. A request that
fails gets a 400 in the vendor's error shape, as the vendor would answer,
and every problem is kept in `SchemaServer.problems`, one readable line
each (`[mistral] body.messages[2].tool_calls[0].id: ...`).

Where each body schema comes from:

- OpenAI Chat Completions, Azure OpenAI and the OpenAI-compatible vendors:
  JSON Schema derived (with pydantic) from the `openai` SDK's
  `CompletionCreateParams{Streaming,NonStreaming}` TypedDicts, closed
  (`additionalProperties: false` on every object with declared
  properties), plus each vendor's documented differences (`VENDOR_NOTES`);
- OpenAI Responses: the same, from `ResponseCreateParams*`;
- Anthropic: from the `anthropic` SDK's `MessageCreateParams*`, plus the
  sampling settings that API version 2023-06-01 (the one Tidemill sends)
  still documents; Claude on Vertex AI: the same body without `model` and
  with `anthropic_version: "vertex-2023-10-16"`;
- Gemini API and Vertex AI Gemini: `schemas/gemini_generate_content.json`,
  written by hand from Google's REST reference (no SDK type is available
  offline);
- Bedrock Converse/ConverseStream: botocore's `bedrock-runtime` service
  model, checked with botocore's own `ParamValidator`.

The checkpoint hooks `ReplayServer`'s reply queue: the handler records the
request in `seen` and then takes `replies.pop(0)`; our queue's `pop` checks
`seen[-1]` first. `test_request_schemas.py` has negative tests that fail if
that hook ever stops running.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import pydantic
from llm_replay import ReplayServer, Reply, Seen

SCHEMAS = Path(__file__).resolve().parent / "schemas"

Json = Any
Rule = Callable[[Json, bool], Iterable[str]]
"""A vendor rule: (body, streamed) → problems, each `"<where>: <what>"`."""


# -- JSON Schemas derived from the SDKs' TypedDicts ----------------------------------------------


def closed(schema: Json) -> Json:
    """`schema` with `additionalProperties: false` on every object that declares properties.

    pydantic leaves TypedDicts open; the vendors refuse (or silently drop)
    unknown fields, and a silently dropped field is a bug too.
    """
    if isinstance(schema, dict):
        out = {key: closed(value) for key, value in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    return schema


@cache
def typed_dict_schema(module: str, name: str) -> Json:
    """The closed JSON Schema of an SDK TypedDict, e.g. `("openai.types.chat....", "...")`."""
    import importlib

    params = getattr(importlib.import_module(module), name)
    return closed(pydantic.TypeAdapter(params).json_schema())


def chat_schema(stream: bool) -> Json:
    return typed_dict_schema(
        "openai.types.chat.completion_create_params",
        "CompletionCreateParamsStreaming" if stream else "CompletionCreateParamsNonStreaming",
    )


def responses_schema(stream: bool) -> Json:
    return typed_dict_schema(
        "openai.types.responses.response_create_params",
        "ResponseCreateParamsStreaming" if stream else "ResponseCreateParamsNonStreaming",
    )


ANTHROPIC_2023_06_01_SAMPLING = {
    "temperature": {"type": "number", "minimum": 0, "maximum": 1},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
    "top_k": {"type": "integer", "minimum": 0},
}
"""Documented for `anthropic-version: 2023-06-01` (the SDK's types follow a newer version)."""

NO_SAMPLING_CLAUDE = re.compile(r"claude-(opus-4-[7-9]|(opus|sonnet|haiku)-([5-9]|[1-9][0-9]))")
"""Claude generations that refuse sampling settings even under 2023-06-01 (Opus 4.7, the 5s)."""


def anthropic_sampling_rule(model: str, body: Json) -> list[str]:
    if not NO_SAMPLING_CLAUDE.search(model):
        return []
    return [
        f'body.{key}: {model} takes no sampling settings ("{key} is deprecated for this model")'
        for key in ANTHROPIC_2023_06_01_SAMPLING
        if key in body
    ]


@cache
def anthropic_schema(stream: bool, vertex: bool = False) -> Json:
    schema = copy.deepcopy(
        typed_dict_schema(
            "anthropic.types.message_create_params",
            "MessageCreateParamsStreaming" if stream else "MessageCreateParamsNonStreaming",
        )
    )
    schema["properties"].update(ANTHROPIC_2023_06_01_SAMPLING)
    if vertex:
        # https://docs.anthropic.com/en/api/claude-on-vertex-ai: the model is named in
        # the URL, and the body carries the Vertex API version instead.
        del schema["properties"]["model"]
        schema["required"] = [name for name in schema["required"] if name != "model"]
        schema["properties"]["anthropic_version"] = {"const": "vertex-2023-10-16"}
        schema["required"].append("anthropic_version")
    return schema


@cache
def gemini_schema(vertex: bool) -> Json:
    schema = json.loads((SCHEMAS / "gemini_generate_content.json").read_text("utf-8"))
    if vertex:
        schema["$ref"] = "#/$defs/VertexGenerateContentRequest"
    return schema


# -- readable jsonschema errors ------------------------------------------------------------------


def where(path: Iterable[Any], root: str = "body") -> str:
    text = root
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _discriminated(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The most telling sub-error of an `anyOf`/`oneOf` failure.

    Branches whose discriminator (`role`, `type`, a `const`/`enum` one level
    down) does not match are not what the sender meant; of the rest, the
    branch with the fewest errors is, and its deepest error is reported.
    """
    while error.context:
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)

        def mismatched(errors: list[jsonschema.ValidationError]) -> bool:
            return any(
                e.validator in ("const", "enum", "type") and len(e.relative_path) <= 1
                for e in errors
            )

        plausible = [errors for errors in branches.values() if not mismatched(errors)]
        candidates = plausible or list(branches.values())
        chosen = min(candidates, key=len)
        error = jsonschema.exceptions.best_match(chosen) or chosen[0]
    return error


def schema_problems(schema: Json, instance: Json) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        deepest = _discriminated(error)
        message = deepest.message
        if len(message) > 300:
            message = message[:300] + "..."
        problems.append(f"{where(deepest.absolute_path)}: {message}")
    return problems


# -- Bedrock: botocore's service model -----------------------------------------------------------


@cache
def _bedrock_service() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def _wire_to_params(value: Json, shape: Any, path: str, problems: list[str]) -> Json:
    """The wire's JSON as the service model's input: base64 blob text as bytes.

    botocore's `ParamValidator` checks types, required and unknown members
    but not enums; those are checked here (into `problems`).
    """
    kind = shape.type_name
    if kind == "blob" and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            problems.append(f"{path}: not valid base64")
            return value
    if kind == "string" and isinstance(value, str) and shape.enum and value not in shape.enum:
        problems.append(f"{path}: {value!r} is not one of {shape.enum}")
    if kind == "structure" and isinstance(value, dict):
        return {
            key: _wire_to_params(item, shape.members[key], f"{path}.{key}", problems)
            if key in shape.members
            else item
            for key, item in value.items()
        }
    if kind == "list" and isinstance(value, list):
        return [
            _wire_to_params(item, shape.member, f"{path}[{i}]", problems)
            for i, item in enumerate(value)
        ]
    if kind == "map" and isinstance(value, dict):
        return {
            key: _wire_to_params(item, shape.value, f"{path}.{key}", problems)
            for key, item in value.items()
        }
    return value


def bedrock_problems(body: Json, model_id: str, stream: bool) -> list[str]:
    from botocore.validate import ParamValidator

    operation = "ConverseStream" if stream else "Converse"
    shape = _bedrock_service().operation_model(operation).input_shape
    if "modelId" in body:
        return ["body.modelId: the model id belongs in the URL, not the body"]
    problems: list[str] = []
    params = _wire_to_params({"modelId": model_id, **body}, shape, "body", problems)
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        lines = [line.strip() for line in report.generate_report().splitlines()]
        problems += [f"body ({operation} input): {line}" for line in lines if line]
    return problems


# -- what each vendor documents ------------------------------------------------------------------


def _messages(body: Json) -> list[tuple[int, Json]]:
    messages = body.get("messages") if isinstance(body, dict) else None
    return list(enumerate(messages)) if isinstance(messages, list) else []


MISTRAL_FIELDS = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "stream",
        "stop",
        "random_seed",
        "response_format",
        "tools",
        "tool_choice",
        "presence_penalty",
        "frequency_penalty",
        "n",
        "safe_prompt",
        "parallel_tool_calls",
        "prediction",
        "prompt_mode",
        "metadata",
    }
)
"""The top-level fields of Mistral's `ChatCompletionRequest`.

From the `mistralai` SDK, which is generated from Mistral's OpenAPI spec
(https://docs.mistral.ai/api/#tag/chat): the seed is `random_seed`, there is
no `seed`, `stream_options`, `max_completion_tokens` or `user`.
"""
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


def mistral_rules(body: Json, stream: bool) -> Iterator[str]:
    for key in sorted(set(body) - MISTRAL_FIELDS):
        yield f"body.{key}: not a field of Mistral's chat request ({sorted(MISTRAL_FIELDS)})"
    for i, message in _messages(body):
        for j, call in enumerate(message.get("tool_calls") or []):
            if not MISTRAL_ID.fullmatch(str(call.get("id", ""))):
                yield (
                    f"body.messages[{i}].tool_calls[{j}].id: {call.get('id')!r} is not "
                    "9 letters or digits, as Mistral requires"
                )
        if message.get("role") == "tool" and not MISTRAL_ID.fullmatch(
            str(message.get("tool_call_id", ""))
        ):
            yield (
                f"body.messages[{i}].tool_call_id: {message.get('tool_call_id')!r} is not "
                "9 letters or digits, as Mistral requires"
            )


def deepseek_rules(body: Json, stream: bool) -> Iterator[str]:
    """https://api-docs.deepseek.com/guides/thinking_mode: in thinking mode, an assistant
    turn that called tools must be sent back with its `reasoning_content`."""
    if "reasoner" not in str(body.get("model", "")):
        return
    for i, message in _messages(body):
        calls = message.get("role") == "assistant" and message.get("tool_calls")
        if calls and not isinstance(message.get("reasoning_content"), str):
            yield (
                f"body.messages[{i}].reasoning_content: missing on an assistant turn "
                "with tool calls (DeepSeek thinking mode needs it back)"
            )


OLLAMA_IMAGE = re.compile(r"data:(image/(jpeg|jpg|png|webp))?;base64,[A-Za-z0-9+/=]+")


def ollama_rules(body: Json, stream: bool) -> Iterator[str]:
    """https://github.com/ollama/ollama/blob/main/docs/openai.md: images only as base64
    data URLs (png, jpeg, webp); an image URL is refused ("invalid image input")."""
    for i, message in _messages(body):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if not OLLAMA_IMAGE.fullmatch(str(url)):
                    yield (
                        f"body.messages[{i}].content[{j}].image_url.url: Ollama takes only "
                        f"base64 data URLs of png/jpeg/webp images, not {str(url)[:40]!r}"
                    )


def _deepseek_schema(schema: Json) -> Json:
    """https://api-docs.deepseek.com/api/create-chat-completion: a user message's content is
    a string (no image parts); an assistant message may carry `reasoning_content`."""
    schema = copy.deepcopy(schema)
    defs = schema["$defs"]
    defs["ChatCompletionUserMessageParam"]["properties"]["content"] = {"type": "string"}
    defs["ChatCompletionAssistantMessageParam"]["properties"]["reasoning_content"] = {
        "type": ["string", "null"]
    }
    return schema


def _mistral_schema(schema: Json) -> Json:
    """Mistral's seed is `random_seed` (an integer); `seed` is not a field (`mistral_rules`).

    Mistral's own `safe_prompt` (a boolean: prepend its safety prompt) is a field too.
    """
    schema = copy.deepcopy(schema)
    schema["properties"]["random_seed"] = {"type": "integer"}
    schema["properties"]["safe_prompt"] = {"type": "boolean"}
    return schema


@dataclass(frozen=True)
class VendorNote:
    """How one OpenAI-compatible vendor's documented request differs from OpenAI's."""

    schema: Callable[[Json], Json] = lambda schema: schema
    rules: tuple[Rule, ...] = ()


VENDOR_NOTES: dict[str, VendorNote] = {
    "deepseek": VendorNote(_deepseek_schema, (deepseek_rules,)),
    "mistral": VendorNote(_mistral_schema, (mistral_rules,)),
    "ollama": VendorNote(rules=(ollama_rules,)),
}


# -- one vendor's wire ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """What one vendor's endpoint accepts: path, query, headers and body."""

    provider: str
    path: str
    """A regex for the path (without the query); named group `method` for Google's verbs."""
    headers: dict[str, str]
    """Header name → regex its value must match in full."""
    body: Callable[[Json, bool, re.Match[str]], list[str]]
    """(body, streamed, path match) → problems."""
    streamed: Callable[[Seen, re.Match[str]], bool]
    """Whether this request asked for a stream."""
    query: Callable[[dict[str, list[str]], bool], list[str]] = lambda query, stream: (
        [f"query: unexpected {sorted(query)}"] if query else []
    )
    forbidden_headers: tuple[str, ...] = ()
    error_shape: str = "openai"

    def asked_for_a_stream(self, seen: Seen) -> bool:
        """Whether `seen` (a request this wire accepts) asked for a streamed answer."""
        match = re.fullmatch(self.path, urlsplit(seen.path).path)
        assert match is not None, f"[{self.provider}] path {seen.path!r}"
        return self.streamed(seen, match)

    def check(self, seen: Seen) -> list[str]:
        problems: list[str] = []
        if seen.method != "POST":
            problems.append(f"method: {seen.method}, expected POST")
        url = urlsplit(seen.path)
        match = re.fullmatch(self.path, url.path)
        if match is None:
            return [*problems, f"path: {url.path!r} does not match {self.path!r}"]
        stream = self.streamed(seen, match)
        problems += self.query(parse_qs(url.query, keep_blank_values=True), stream)
        for name, pattern in self.headers.items():
            value = seen.headers.get(name)
            if value is None:
                problems.append(f"header {name}: missing (expected {pattern!r})")
            elif not re.fullmatch(pattern, value):
                problems.append(f"header {name}: {_redact(value)!r} does not match {pattern!r}")
        for name in self.forbidden_headers:
            if name in seen.headers:
                problems.append(f"header {name}: must not be sent to this endpoint")
        if not isinstance(seen.body, dict):
            return [*problems, f"body: expected a JSON object, got {type(seen.body).__name__}"]
        return problems + self.body(seen.body, stream, match)


def _redact(value: str) -> str:
    return value if len(value) < 24 else value[:16] + "..."


JSON_CONTENT = r"application/json(; ?charset=utf-8)?"


def _body_stream_flag(seen: Seen, match: re.Match[str]) -> bool:
    return isinstance(seen.body, dict) and seen.body.get("stream") is True


def chat_wire(provider: str, prefix: str, *, auth: dict[str, str] | None = None) -> Wire:
    note = VENDOR_NOTES.get(provider, VendorNote())

    def body(payload: Json, stream: bool, match: re.Match[str]) -> list[str]:
        problems = schema_problems(note.schema(chat_schema(stream)), payload)
        for rule in note.rules:
            problems += list(rule(payload, stream))
        return problems

    return Wire(
        provider=provider,
        path=re.escape(prefix) + "/chat/completions",
        headers={"content-type": JSON_CONTENT, **(auth or {"authorization": r"Bearer \S+"})},
        body=body,
        streamed=_body_stream_flag,
    )


def azure_wire(deployment: str) -> Wire:
    def query(params: dict[str, list[str]], stream: bool) -> list[str]:
        version = params.get("api-version", [""])
        if len(version) != 1 or not re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", version[0]):
            return [f"query api-version: {version!r}, expected one YYYY-MM-DD[-preview]"]
        extra = sorted(set(params) - {"api-version"})
        return [f"query: unexpected {extra}"] if extra else []

    base = chat_wire("azure", f"/openai/deployments/{deployment}", auth={"api-key": r"\S+"})
    return Wire(
        provider="azure",
        path=base.path,
        headers=base.headers,
        body=base.body,
        streamed=base.streamed,
        query=query,
        forbidden_headers=("authorization",),
    )


def responses_wire() -> Wire:
    return Wire(
        provider="openai-responses",
        path=r"/v1/responses",
        headers={"content-type": JSON_CONTENT, "authorization": r"Bearer \S+"},
        body=lambda payload, stream, match: schema_problems(responses_schema(stream), payload),
        streamed=_body_stream_flag,
    )


def anthropic_wire() -> Wire:
    return Wire(
        provider="anthropic",
        path=r"/v1/messages",
        headers={
            "content-type": JSON_CONTENT,
            "x-api-key": r"\S+",
            "anthropic-version": r"2023-06-01",
        },
        body=lambda payload, stream, match: (
            schema_problems(anthropic_schema(stream), payload)
            + anthropic_sampling_rule(str(payload.get("model", "")), payload)
        ),
        streamed=_body_stream_flag,
        forbidden_headers=("authorization",),
        error_shape="anthropic",
    )


def anthropic_vertex_wire() -> Wire:
    """https://docs.anthropic.com/en/api/claude-on-vertex-ai and Vertex AI's
    `projects.locations.publishers.models.rawPredict` / `streamRawPredict`."""

    def body(payload: Json, stream: bool, match: re.Match[str]) -> list[str]:
        problems = schema_problems(anthropic_schema(stream, vertex=True), payload)
        problems += anthropic_sampling_rule(match["model"], payload)
        if payload.get("stream", False) is not stream:
            problems.append(
                f"body.stream: {payload.get('stream')!r} but the URL calls :{match['method']}"
            )
        return problems

    return Wire(
        provider="anthropic-vertex",
        path=(
            r"/v1/projects/[a-z][a-z0-9-]*/locations/[a-z0-9-]+/publishers/anthropic/models/"
            r"(?P<model>claude-[a-z0-9.-]+(@\d{8})?):(?P<method>rawPredict|streamRawPredict)"
        ),
        headers={"content-type": JSON_CONTENT, "authorization": r"Bearer \S+"},
        body=body,
        streamed=lambda seen, match: match["method"] == "streamRawPredict",
        forbidden_headers=("x-api-key", "anthropic-version"),
        error_shape="google",
    )


def _google_query(params: dict[str, list[str]], stream: bool) -> list[str]:
    expected = {"alt": ["sse"]} if stream else {}
    if params != expected:
        return [
            f"query: {params} but {'streamGenerateContent' if stream else 'generateContent'}"
            f" takes {expected or 'none'} here"
        ]
    return []


def gemini_wire(*, vertex: bool) -> Wire:
    if vertex:
        path = (
            r"/v1/projects/[a-z][a-z0-9-]*/locations/[a-z0-9-]+/publishers/google/models/"
            r"[a-z0-9.-]+:(?P<method>generateContent|streamGenerateContent)"
        )
        auth = {"authorization": r"Bearer \S+"}
        forbidden: tuple[str, ...] = ("x-goog-api-key",)
    else:
        path = r"/v1beta/models/[a-z0-9.-]+:(?P<method>generateContent|streamGenerateContent)"
        auth = {"x-goog-api-key": r"\S+"}
        forbidden = ("authorization",)
    return Wire(
        provider="vertex" if vertex else "gemini",
        path=path,
        headers={"content-type": JSON_CONTENT, **auth},
        body=lambda payload, stream, match: schema_problems(gemini_schema(vertex), payload),
        streamed=lambda seen, match: match["method"] == "streamGenerateContent",
        query=_google_query,
        forbidden_headers=forbidden,
        error_shape="google",
    )


SIGV4 = (
    r"AWS4-HMAC-SHA256 Credential=[A-Z0-9]{16,128}/\d{8}/[a-z0-9-]+/bedrock/aws4_request, "
    r"SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}"
)


def bedrock_wire() -> Wire:
    """botocore's `bedrock-runtime` model: `POST /model/{modelId}/converse[-stream]`, SigV4."""

    def body(payload: Json, stream: bool, match: re.Match[str]) -> list[str]:
        from urllib.parse import unquote

        return bedrock_problems(payload, unquote(match["model"]), stream)

    return Wire(
        provider="bedrock",
        path=r"/model/(?P<model>[A-Za-z0-9.%_-]+)/(?P<method>converse|converse-stream)",
        headers={
            "content-type": JSON_CONTENT,
            "authorization": SIGV4,
            "x-amz-date": r"\d{8}T\d{6}Z",
        },
        body=body,
        streamed=lambda seen, match: match["method"] == "converse-stream",
        error_shape="bedrock",
    )


# -- the server ----------------------------------------------------------------------------------


def _error_reply(shape: str, problems: list[str]) -> Reply:
    message = "Request failed schema validation: " + "; ".join(problems)
    error: Json
    if shape == "anthropic":
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    elif shape == "google":
        error = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    elif shape == "bedrock":
        error = {"message": message}
    else:
        error = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    headers = {"x-amzn-errortype": "ValidationException"} if shape == "bedrock" else {}
    return Reply(
        json.dumps(error).encode(), status=400, content_type="application/json", headers=headers
    )


class _CheckedReplies(list[Reply]):
    """`ReplayServer.replies`, checking the request just recorded before it is answered."""

    def __init__(self, owner: SchemaServer) -> None:
        super().__init__()
        self.owner = owner

    def pop(self, index: Any = -1) -> Reply:
        reply = super().pop(index)
        seen = self.owner.replay.seen[-1]
        try:
            problems = self.owner.wire.check(seen)
        except Exception as exc:  # a crash here would only show as a dropped connection
            problems = [f"the schema check itself failed: {type(exc).__name__}: {exc}"]
        self.owner.checked.append(seen)
        if problems:
            self.owner.problems += [f"[{self.owner.wire.provider}] {p}" for p in problems]
            return _error_reply(self.owner.wire.error_shape, problems)
        return reply


@dataclass
class SchemaServer:
    """A `ReplayServer` that checks every request against `wire` before answering it."""

    wire: Wire
    replay: ReplayServer = field(default_factory=ReplayServer)
    problems: list[str] = field(default_factory=list)
    checked: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.replay.replies = _CheckedReplies(self)

    @property
    def url(self) -> str:
        return self.replay.url

    @property
    def replies(self) -> list[Reply]:
        return self.replay.replies

    @replies.setter
    def replies(self, value: list[Reply]) -> None:
        if value is not self.replay.replies:  # `server.replies += [...]` extends in place
            self.replay.replies[:] = value

    @property
    def seen(self) -> list[Seen]:
        return self.replay.seen

    def start(self) -> SchemaServer:
        self.replay.start()
        return self

    def stop(self) -> None:
        self.replay.stop()

    def assert_valid(self) -> None:
        """Fail, listing every problem, if a request broke the vendor's schema."""
        assert self.checked, f"[{self.wire.provider}] no request reached the schema check"
        assert not self.problems, "the vendor's schema refuses the request:\n  " + "\n  ".join(
            self.problems
        )
