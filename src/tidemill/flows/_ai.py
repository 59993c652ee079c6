"""`AIAction`, a step that calls a model once, and the settings of `ai_agent` steps.

`AIAgent` itself is in `_nesting`, since its tools may be flows or agents.
Both name their model with the agent library's spec strings
(`openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `fake`, ...). A key
in a flow file is never written out: `api_key: env:NAME` reads the
environment variable `NAME` on the worker when the step runs, and
`api_key: $var:<path>` a workspace variable (a secret), resolved as the
run's identity. `provider: $res:<path>` names a workspace resource of a
provider type (`openai`, `anthropic`, ...): the model is built with its
credentials (its key, base URL, headers), resolved as the run's identity.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Literal

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import Field, field_validator, model_validator

from tidemill.errors import ConfigurationError, ExpressionError
from tidemill.flows._base import Expr, FlowModel, StepKind
from tidemill.flows._duration import Duration
from tidemill.flows._expr import PLACEHOLDER, compile_expression, placeholders
from tidemill.llm import parse_model_spec
from tidemill.types import ImageRef

__all__ = [
    "AIAction",
    "AgentDelegation",
    "AgentLimits",
    "AgentMemory",
    "AgentQuestions",
    "AttachmentError",
    "MCPTools",
    "Specialist",
    "SpecialistBudget",
    "ToolScript",
    "attachment_problems",
    "model_problem",
    "placeholders",
    "read_attachments",
]

_PLACEHOLDER = PLACEHOLDER
"""The placeholder pattern, by the name the engine's prompt rendering imports it."""


def _check_template(template: str) -> str:
    for text in placeholders(template):
        try:
            compile_expression(text)
        except ExpressionError as exc:
            raise ValueError(f"invalid placeholder {{{{ {text} }}}}: {exc.reason}") from None
    return template


def model_problem(spec: str) -> str | None:
    """Say what is wrong with a model spec the provider layer cannot read, or None.

    The spec is parsed as the worker's default resolver parses it (an unknown
    provider gets the provider layer's did-you-mean), but no model is built:
    keys and endpoints are the worker's business.

    Examples:
        >>> model_problem("opnai:gpt-4o")
        "Unknown model provider in 'opnai:gpt-4o'. Did you mean 'openai'?"
        >>> model_problem("openai:gpt-4o") is None, model_problem("fake") is None
        (True, True)
    """
    try:
        parse_model_spec(spec)
    except ConfigurationError as exc:
        return f"{exc.message} {exc.hint}" if exc.hint else exc.message
    return None


class AttachmentError(ValueError):
    """`user_attachments` that cannot be sent: the message, a hint, the attachment's index."""

    def __init__(self, message: str, hint: str, index: int | None = None) -> None:
        super().__init__(message)
        self.message, self.hint, self.index = message, hint, index


_IMAGE_HINT = (
    "Give each as an image URL (https://... or data:image/png;base64,...) or {url, media_type}."
)


def _attachment(item: Any, index: int) -> ImageRef:
    where = f"user_attachments[{index}]"
    item = {"url": item} if isinstance(item, str) else item
    if isinstance(item, Mapping) and "url" not in item and "text" in item:
        message = f"{where} is a text file: attachments are images (messages carry no documents)"
        raise AttachmentError(message, "Put the text in user_message.", index)
    if not isinstance(item, Mapping) or not isinstance(item.get("url"), str) or not item["url"]:
        raise AttachmentError(
            f"{where} is neither an image URL nor {{url: ...}}", _IMAGE_HINT, index
        )
    url, media_type = item["url"].strip(), item.get("media_type")
    extra = sorted(set(item) - {"url", "media_type"})
    if extra or not isinstance(media_type, str | None):
        what = f"unknown keys {', '.join(map(repr, extra))}" if extra else "a media_type not text"
        raise AttachmentError(f"{where} has {what}", _IMAGE_HINT, index)
    if url[:5].lower() == "data:":
        header, comma, payload = url[5:].partition(",")
        kind, *params = header.lower().split(";")
        try:
            valid = bool(comma and kind.startswith("image/") and params[-1:] == ["base64"])
            valid = valid and base64.b64decode(payload, validate=True) != b""
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            message = f"{where} is a data: URL but not a base64 image ({url[:40]!r}...)"
            raise AttachmentError(message, "Write data:image/<type>;base64,<bytes>.", index)
        media_type = media_type or kind
    elif url.partition("://")[0].lower() not in ("http", "https") or (
        "generativelanguage.googleapis.com" in url.lower()  # a stored file, as the proxy's policy
    ):
        raise AttachmentError(
            f"{where} is not an http(s) or data: image URL ({url[:60]!r}); stored files "
            "(file://, s3://, gs://, Gemini files) are not sent",
            "Send the image inline (data:image/png;base64,...) or at a public https URL.",
            index,
        )
    if media_type is not None and not media_type.lower().startswith("image/"):
        message = f"{where} has the media_type {media_type!r}, not an image type"
        raise AttachmentError(message, _IMAGE_HINT, index)
    return ImageRef(url=url, media_type=media_type)


def read_attachments(value: Any) -> tuple[ImageRef, ...]:
    """An `ai_agent` step's input `user_attachments`, as images (None: none).

    Each is an `https`/`http` URL or a base64 `data:image/...` URL, or `{url, media_type}`.

    Raises:
        AttachmentError: Naming the attachment that cannot be sent (its index), with a hint.

    Examples:
        >>> read_attachments([{"url": "data:image/gif;base64,R0lGODlhAQABAAAAACw="}])[0].media_type
        'image/gif'
        >>> read_attachments(["s3://bucket/a.png"])
        Traceback (most recent call last):
        tidemill.flows._ai.AttachmentError: user_attachments[0] is not an http(s) or data: ...
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        message = f"user_attachments is a {type(value).__name__}, not a list of images"
        raise AttachmentError(message, _IMAGE_HINT)
    return tuple(_attachment(item, index) for index, item in enumerate(value))


def attachment_problems(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A step's static `user_attachments` that cannot be sent, as (field path, message).

    An expression's value is checked when the step runs.
    """
    try:
        value = inputs.get("user_attachments")
        read_attachments(None if isinstance(value, Expr) else value)
    except AttachmentError as exc:
        field = "inputs.user_attachments" + ("" if exc.index is None else f"[{exc.index}]")
        return [(field, f"{exc.message}. {exc.hint}")]
    return []


def _check_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is not None:
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return schema


_WORKSPACE_PATH = r"[uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,}"
_VARIABLE = re.compile(rf"^\$var:{_WORKSPACE_PATH}\Z")
_RESOURCE = re.compile(rf"^\$res:{_WORKSPACE_PATH}\Z")


def _env_or_variable(value: str | None) -> str | None:
    if value is not None and not value.startswith("env:") and not _VARIABLE.match(value):
        raise ValueError(
            "write `env:NAME` to read the key from an environment variable, or "
            "`$var:<path>` to read it from a workspace variable (f/<folder>/<name>); "
            "keys are not stored in flows"
        )
    return value


def _resource_only(
    value: str | None, what: str = "of a provider type (e.g. $res:f/ai/openai)"
) -> str | None:
    if value is not None and not _RESOURCE.match(value):
        raise ValueError(f"write `$res:<path>` naming a workspace resource {what}, not {value!r}")
    return value


def _env_only(value: str | None) -> str | None:
    if value is not None and not value.startswith("env:"):
        raise ValueError(
            "write `env:NAME` to read the key from an environment variable; "
            "keys are not stored in flows"
        )
    return value


class _ModelSettings(FlowModel):
    model: str = Field(min_length=1)
    """The model spec, e.g. `openai:gpt-4o-mini` or `anthropic:claude-sonnet-4-5`."""

    base_url: str | None = None
    """Another endpoint for the provider (an OpenAI-compatible server, a proxy)."""

    api_key: str | None = None
    """`env:NAME` to read the key from the worker's environment variable `NAME`, or
    `$var:<path>` to read it from a workspace variable, as the run's identity."""

    provider: str | None = None
    """`$res:<path>`: a workspace resource of a provider type whose credentials the
    model is built with (resolved as the run's identity when the step runs)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature, when the model accepts one."""

    max_tokens: int | None = Field(default=None, ge=1)
    """The most tokens one answer may have."""

    metadata: dict[str, str] = Field(default_factory=dict)
    """Inference metadata recorded with the usage, e.g. `experiment_id`, `exposure_id`."""

    _no_plain_keys = field_validator("api_key")(_env_or_variable)
    _provider_resource = field_validator("provider")(_resource_only)

    def model_problems(self) -> list[tuple[str, str]]:
        """The model specs it names that the provider layer cannot read: (field path, message)."""
        problem = model_problem(self.model)
        return [] if problem is None else [("model", problem)]


class AIAction(_ModelSettings, StepKind):
    """One model call: render `prompt`, ask the model, validate the answer.

    The prompt's `{{ ... }}` placeholders are expressions over the step's
    evaluated inputs (and `flow_input`, `results`, `previous_result`). With
    `output_schema`, the answer must be JSON matching it; a mismatch is shown
    to the model, up to `output_retries` times, and the step's result is the
    parsed object. Without it, the result is the answer's text.

    Examples:
        >>> AIAction(model="fake", prompt="Classify: {{ text }}").output_retries
        2
    """

    prompt: str = Field(min_length=1)
    """The user message, with `{{ expression }}` placeholders."""

    system: str = ""
    """The system prompt (placeholders allowed too)."""

    output_schema: dict[str, Any] | None = None
    """A JSON Schema the answer must match; the result is then the parsed JSON."""

    output_retries: int = Field(default=2, ge=0)
    """How many times a schema mismatch is sent back to the model before the step fails."""

    _check_prompt = field_validator("prompt", "system")(_check_template)
    _check_output = field_validator("output_schema")(_check_schema)

    def templates(self) -> dict[str, str]:
        """`prompt`, and `system` when it is set."""
        return {"prompt": self.prompt, **({"system": self.system} if self.system else {})}


_SCRIPT_REFERENCE = re.compile(rf"^{_WORKSPACE_PATH}(?:@[1-9][0-9]*)?\Z")


class ToolScript(FlowModel):
    """The workspace script of a `script` tool: `script: {path: f/<folder>/<name>}`.

    `path` may pin one of the script's versions (`f/tools/lookup@3`);
    unpinned, the tool runs the script as deployed when the flow (or the
    linked agent) is read for a run. Reading it from the workspace, as the
    run's identity, fills `code` and `source_path` (`f/tools/lookup@3`, the
    version read) and drops `path`, as a script step's `path` is read in.

    Examples:
        >>> ToolScript(path="f/tools/lookup@3").path
        'f/tools/lookup@3'
    """

    path: str | None = None
    """The workspace script, `f/<folder>/<name>`, optionally pinned (`...@3`)."""

    code: str | None = None
    """Its Python, once read (or written inline in this form)."""

    source_path: str | None = None
    """Where `code` was read from, with its version (`f/tools/lookup@3`); set when read."""

    @model_validator(mode="after")
    def _one_source(self) -> ToolScript:
        if (self.path is None) == (self.code is None):
            raise ValueError(
                "a tool script needs exactly one of path (a workspace script) and code"
            )
        if self.path is not None and not _SCRIPT_REFERENCE.match(self.path):
            raise ValueError(
                f"write the workspace path of a script (f/<folder>/<name>), optionally pinned "
                f"to a version (f/<folder>/<name>@3), not {self.path!r}"
            )
        if self.source_path is not None and self.code is None:
            raise ValueError("source_path is only allowed with code")
        return self


class MCPTools(FlowModel):
    """An MCP server whose tools an `ai_agent` step may call, named `<tool name>__<server tool>`.

    The step connects when it starts (a `command` run as a subprocess over
    stdio, or a streamable HTTP `url`) and disconnects when it ends. Values
    of `env` and `headers` written `env:NAME` are read from the worker's
    environment variable `NAME`, so keys stay out of flow files. Or
    `resource: $res:<path>` (a bare `f/<folder>/<name>` reads the same)
    names a workspace resource of type `mcp_server` holding `command`,
    `args`, `env` or `url`, `headers`: it is read, its `$var:` values
    resolved, as the run's identity when the step starts.

    Examples:
        >>> MCPTools(command="uvx", args=["mcp-server-fetch"]).call_timeout
        300.0
    """

    command: str | None = None
    """The program that runs the server (stdio)."""

    args: list[str] = Field(default_factory=list)
    """Its arguments."""

    env: dict[str, str] = Field(default_factory=dict)
    """Variables for the server process (`env:NAME` reads the worker's `NAME`)."""

    url: str | None = None
    """Or the endpoint of a running streamable HTTP server."""

    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers for every request (`env:NAME` reads the worker's `NAME`)."""

    resource: str | None = None
    """Or `$res:<path>`: a workspace resource of type `mcp_server` holding the server's
    `command`, `args`, `env` or `url`, `headers` (resolved as the run's identity)."""

    tools: list[str] | None = None
    """The server's tools the model may call (their names on the server); None: all of them."""

    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds to start or reach the server and list its tools."""

    call_timeout: float = Field(default=300.0, gt=0)
    """Seconds one call may take."""

    @field_validator("resource", mode="before")
    @classmethod
    def _resource_reference(cls, value: Any) -> Any:
        if isinstance(value, str) and re.match(rf"^{_WORKSPACE_PATH}\Z", value):
            return f"$res:{value}"  # a bare path names the resource too
        return _resource_only(value, what="of type mcp_server (e.g. $res:f/ai/fetch)")

    @model_validator(mode="after")
    def _one_transport(self) -> MCPTools:
        named = (("command", self.command), ("url", self.url), ("resource", self.resource))
        given = [name for name, value in named if value is not None]
        if len(given) != 1:
            raise ValueError(
                "an MCP server needs exactly one of command (stdio), url (HTTP) and resource "
                f"($res:<path> of an mcp_server resource); got {' and '.join(given) or 'none'}"
            )
        if self.resource is not None and (self.args or self.env or self.headers):
            raise ValueError(
                f"args, env and headers come from the resource {self.resource}: "
                "write them in it, not in the tool"
            )
        return self


class AgentLimits(FlowModel):
    """Execution bounds of an `ai_agent` step; `on_exceeded` says what crossing one does.

    With `on_exceeded: fail` (the default), crossing a bound fails the step,
    naming it; with `ask`, the step asks a person to extend the bound or stop.
    """

    max_tool_calls: int | None = Field(default=None, ge=1)
    """Tool calls the agent may start."""
    max_requests: int | None = Field(default=None, ge=1)
    """Model calls the agent may make."""
    max_input_tokens: int | None = Field(default=None, ge=1)
    """Input tokens the agent may spend, cached ones included."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output tokens the agent may spend."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """Input plus output tokens the agent may spend."""
    max_duration: Duration | None = None
    """Wall time for the whole step, across resumes (seconds, or `5m`)."""
    on_exceeded: Literal["fail", "ask"] = "fail"
    """`fail`: crossing a bound fails the step; `ask`: a person may extend the bound.
    With `ask`, when `max_requests`, `max_tool_calls`, a token bound or `max_duration` is
    used up, the step parks with an approval of kind `budget` (approvers: the tools'
    approvers, or anyone) that extends the bound or stops; `max_iterations` always fails."""


class AgentQuestions(FlowModel):
    """Questions an `ai_agent` step may ask a person, with the built-in tool `ask_person`.

    A call of `ask_person(question)` parks the step with an approval row of
    kind `question`; the person's answer (`tidemill approvals answer`) is the
    call's result. A question waits `approval_timeout` (the agent's); when it
    expires, the model is told no answer came and goes on.
    """

    approvers: list[str] = Field(default_factory=list)
    """Who may answer; empty means anyone."""


class AgentMemory(FlowModel):
    """Managed conversation memory of an `ai_agent` step (a brain key, saved with an agent).

    - `{kind: window, context_length: N}`: the store keeps the conversation,
      per (memory id, step id), and a fresh agent run recalls its newest `N`
      messages, as one user-role message framed as untrusted information.
      The memory id is the step's input `memory_id` when the step sets one (an
      expression that evaluates to nothing runs stateless), else the run's
      (`submit(memory_id=...)`); with neither, the step runs stateless.
    - `{kind: off}` (or no `memory` at all): nothing is kept; the step's
      input `previous_messages` supplies the history.
    - The older spellings still read: `{kind: auto, context_length: N,
      memory_id: ...}` (the run's memory id, else the one written here) and
      `{kind: manual, messages: [...]}` (replays its list); neither reads the
      step's `memory_id` or `previous_messages`. `{turns: N}` reads as a
      window of `2N` messages.

    Examples:
        >>> AgentMemory(kind="window", context_length=6).managed
        True
        >>> AgentMemory.model_validate({"turns": 3}).context_length
        6
        >>> AgentMemory(kind="auto").kind_read
        'off'
    """

    kind: Literal["window", "off", "auto", "manual"] = "window"
    """`window` keeps and replays the conversation; `off` keeps none; `auto` and `manual`
    are the older spellings."""

    context_length: int | None = Field(default=None, ge=0)
    """How many of the newest stored messages a run recalls (`window`, `auto`)."""

    memory_id: str | None = None
    """`auto` only: the memory id written with the agent, used when the run has none."""

    messages: list[dict[str, Any]] | None = None
    """`manual` only: the history to replay, as `{role, content}` mappings."""

    @model_validator(mode="before")
    @classmethod
    def _older_turns(cls, data: Any) -> Any:
        if isinstance(data, dict) and set(data) == {"turns"} and isinstance(data["turns"], int):
            return {"kind": "window", "context_length": 2 * data["turns"]}
        return data

    @model_validator(mode="after")
    def _fits_kind(self) -> AgentMemory:
        if self.kind == "window" and not self.context_length:
            raise ValueError("a window memory needs context_length: the messages it recalls (>= 1)")
        if self.memory_id is not None and self.kind != "auto":
            raise ValueError("memory_id belongs to the step's inputs, not to a window memory")
        if self.messages is not None and self.kind != "manual":
            raise ValueError("messages belong to a manual memory (or to previous_messages)")
        return self

    @property
    def kind_read(self) -> str:
        """The kind as run: an `auto` without a count (or with 0) is `off`."""
        if self.kind == "auto" and not self.context_length:
            return "off"
        return self.kind

    @property
    def managed(self) -> bool:
        """Whether the store keeps this memory (`window`)."""
        return self.kind == "window"


class SpecialistBudget(FlowModel):
    """What one delegated task may spend; crossing a bound fails that task, not the step.

    Where the delegating agent is bounded (the step's `limits`, or the
    enclosing specialist's budget), the budget must set the same bound, no
    larger. When the model delegates, the budgets of the tasks must fit in
    what the delegating agent has left, or nothing starts.
    """

    max_iterations: int = Field(default=10, ge=1)
    """Model calls of the task's agent run before it fails."""

    max_requests: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)


class Specialist(FlowModel):
    """An agent an `ai_agent` step may delegate tasks to; it sees only its task and lineage.

    Examples:
        >>> Specialist(name="researcher", tools=["search"]).budget.max_iterations
        10
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    """How the delegating model names it."""

    description: str = ""
    """What it is good at, for the delegating model."""

    system: str = ""
    """Its system prompt."""

    model: str | None = Field(default=None, min_length=1)
    """Its model spec; the step's model (and endpoint, key) when unset."""

    base_url: str | None = None
    """Another endpoint for its own `model`."""

    api_key: str | None = None
    """`env:NAME` for its own `model`."""

    tools: list[str] = Field(default_factory=list)
    """Tools it may use: only those its parent has and `delegation.allow` lists too."""

    output_schema: dict[str, Any] | None = None
    """A JSON Schema its answer must match; a mismatch is its task's error."""

    budget: SpecialistBudget = Field(default_factory=SpecialistBudget)
    """What each of its tasks may spend."""

    specialists: list[Specialist] = Field(default_factory=list)
    """Specialists it may delegate to in turn (within `delegation.max_depth`)."""

    _check_output = field_validator("output_schema")(_check_schema)
    _no_plain_keys = field_validator("api_key")(_env_only)

    def model_problems(self) -> list[tuple[str, str]]:
        """Its own model spec's problem and its specialists', as (field path, message)."""
        found: list[tuple[str, str]] = []
        problem = None if self.model is None else model_problem(self.model)
        if problem is not None:
            found.append(("model", problem))
        for index, specialist in enumerate(self.specialists):
            found.extend(
                (f"specialists[{index}].{field}", message)
                for field, message in specialist.model_problems()
            )
        return found


class AgentDelegation(FlowModel):
    """Bounds on an `ai_agent` step's delegation to its specialists."""

    allow: list[str] = Field(default_factory=list)
    """Tools specialists may be given at all (a specialist gets those it lists, too)."""

    max_depth: int = Field(default=1, ge=1)
    """How deep delegations may nest: 1 lets the step's agent delegate, not its specialists."""

    max_fanout: int = Field(default=4, ge=1)
    """Tasks one delegation may start (one delegation per model turn)."""

    max_concurrency: int = Field(default=2, ge=1)
    """Tasks of one delegating agent running at once."""
