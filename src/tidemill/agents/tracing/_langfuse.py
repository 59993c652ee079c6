"""`LangfuseTracer`: spans sent to Langfuse's OpenTelemetry endpoint.

Langfuse ingests OTLP/HTTP at `{host}/api/public/otel/v1/traces` with Basic
auth of the project's public and secret keys, and maps `langfuse.*`
attributes (and the GenAI conventions' `gen_ai.*`) onto its data model:
https://langfuse.com/integrations/native/opentelemetry#property-mapping.
The names used here are those of Langfuse's own Python SDK
(`LangfuseOtelSpanAttributes`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from tidemill.agents.tracing._base import (
    AGENT_NAME,
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    CONVERSATION_ID,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    OUTPUT_MESSAGES,
    OUTPUT_TOKENS,
    TOOL_ARGUMENTS,
    TOOL_RESULT,
    Span,
)
from tidemill.agents.tracing._chat import answer_text, chat_messages, dumps, last_user_text
from tidemill.agents.tracing._otlp import OTLPTracer, setting
from tidemill.errors import MissingCredentialsError

__all__ = ["LangfuseTracer"]

DEFAULT_HOST = "https://cloud.langfuse.com"
OTEL_PATH = "/api/public/otel/v1/traces"

# Trace-level attributes (Langfuse's SDK sets the session and user on every span).
TRACE_NAME = "langfuse.trace.name"
TRACE_INPUT = "langfuse.trace.input"
TRACE_OUTPUT = "langfuse.trace.output"
TRACE_TAGS = "langfuse.trace.tags"
TRACE_METADATA = "langfuse.trace.metadata"
SESSION_ID = "session.id"
USER_ID = "user.id"
ENVIRONMENT = "langfuse.environment"
# Observation-level attributes.
OBSERVATION_TYPE = "langfuse.observation.type"
OBSERVATION_INPUT = "langfuse.observation.input"
OBSERVATION_OUTPUT = "langfuse.observation.output"
OBSERVATION_LEVEL = "langfuse.observation.level"
OBSERVATION_STATUS_MESSAGE = "langfuse.observation.status_message"

_TYPES = {"agent": "agent", "model": "generation", "tool": "tool"}
_USAGE = (INPUT_TOKENS, OUTPUT_TOKENS, CACHE_READ_TOKENS, CACHE_WRITE_TOKENS)


class LangfuseTracer(OTLPTracer):
    """Sends an agent's runs to Langfuse, as traces of agent, generation and tool observations.

    Each run is a trace named after the agent; its thread id is the Langfuse
    session, so a conversation's runs group together. Model calls are
    generations (model, parameters and token usage come from the `gen_ai.*`
    attributes), tool calls are tools, and a failed span is an `ERROR`-level
    observation with its message. A run's token totals stay off its agent
    observation: Langfuse adds up the generations'. With
    `capture_content=True` each observation also gets its input and output
    (chat messages for a model call; the question and the answer for the run
    and its trace).

    Credentials come from the arguments, else from `LANGFUSE_PUBLIC_KEY`,
    `LANGFUSE_SECRET_KEY` and `LANGFUSE_BASE_URL` (or `LANGFUSE_HOST`; the
    EU cloud, `https://cloud.langfuse.com`, by default). The keys never
    appear in `repr()`, `describe()` or an error. Needs
    `pip install 'tidemill[langfuse]'`.

    Args:
        public_key: The project's public key (`pk-lf-...`).
        secret_key: The project's secret key (`sk-lf-...`).
        host: The Langfuse URL, such as `https://us.cloud.langfuse.com` or a self-hosted one.
        user_id: The user the traces belong to (Langfuse's `userId`).
        tags: Tags on every trace.
        metadata: Key-value pairs on every trace's metadata.
        environment: The Langfuse environment (`production`, `staging`);
            `LANGFUSE_TRACING_ENVIRONMENT` by default.
        service_name: The `service.name` resource attribute.
        timeout: Seconds one export may take.
        capture_content: Record prompts, answers, tool arguments and results.

    Raises:
        MissingCredentialsError: When a key is neither given nor set in the environment.
        MissingDependencyError: When the OTLP exporter is not installed.

    Examples:
        >>> tracer = LangfuseTracer(
        ...     public_key="pk-lf-1", secret_key="sk-lf-1", host="https://us.cloud.langfuse.com"
        ... )
        >>> tracer.describe()["url"]
        'https://us.cloud.langfuse.com/api/public/otel/v1/traces'
        >>> tracer.close()
    """

    extra = "langfuse"

    def __init__(
        self,
        *,
        public_key: str | None = None,
        secret_key: str | None = None,
        host: str | None = None,
        user_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, str] | None = None,
        environment: str | None = None,
        service_name: str = "tidemill",
        timeout: float = 10.0,
        capture_content: bool = False,
    ) -> None:
        public = setting(public_key, "LANGFUSE_PUBLIC_KEY")
        secret = setting(secret_key, "LANGFUSE_SECRET_KEY")
        if public is None or secret is None:
            missing = [
                name
                for name, value in (
                    ("LANGFUSE_PUBLIC_KEY", public),
                    ("LANGFUSE_SECRET_KEY", secret),
                )
                if value is None
            ]
            names = " and ".join(missing)
            raise MissingCredentialsError(
                f"The Langfuse tracer needs {names}, not set in the environment.",
                hint=f"Set {names} (a Langfuse project's API keys), "
                "or pass public_key= and secret_key=.",
                context={"env": missing},
            )
        base = (setting(host, "LANGFUSE_BASE_URL", "LANGFUSE_HOST") or DEFAULT_HOST).rstrip("/")
        token = base64.b64encode(f"{public}:{secret}".encode()).decode("ascii")
        super().__init__(
            base + OTEL_PATH,
            headers={"Authorization": f"Basic {token}"},
            service_name=service_name,
            timeout=timeout,
            capture_content=capture_content,
        )
        self.host = base
        """The Langfuse URL."""
        self.user_id = user_id
        self.tags = tuple(tags)
        self.metadata = dict(metadata or {})
        self.environment = setting(environment, "LANGFUSE_TRACING_ENVIRONMENT")

    def on_start(self, span: Span) -> None:
        """Add Langfuse's attributes, then start the OpenTelemetry span."""
        attributes = span.attributes
        parent = span.parent
        attributes[OBSERVATION_TYPE] = _TYPES[span.kind]
        session = attributes.get(CONVERSATION_ID)
        if session is None and parent is not None:
            session = parent.attributes.get(SESSION_ID)
        if isinstance(session, str):
            attributes[SESSION_ID] = session
        if self.user_id:
            attributes[USER_ID] = self.user_id
        if self.environment:
            attributes[ENVIRONMENT] = self.environment
        if parent is None:
            attributes[TRACE_NAME] = str(attributes.get(AGENT_NAME, span.name))
            if self.tags:
                attributes[TRACE_TAGS] = self.tags
            for key, value in self.metadata.items():
                attributes[f"{TRACE_METADATA}.{key}"] = value
        if self.capture_content:
            self._record_input(span)
        super().on_start(span)

    def on_end(self, span: Span) -> None:
        """Add the output and error level, then end the OpenTelemetry span."""
        attributes = span.attributes
        if span.kind == "agent":
            # Langfuse adds up the generations' usage itself; a run's total on
            # its agent observation is counted twice by servers before the fix
            # of https://github.com/langfuse/langfuse/issues/14754.
            for key in _USAGE:
                attributes.pop(key, None)
        if self.capture_content:
            self._record_output(span)
        if span.status == "error":
            attributes[OBSERVATION_LEVEL] = "ERROR"
            message = span.status_message or span.error_type
            if message:
                attributes[OBSERVATION_STATUS_MESSAGE] = message
        super().on_end(span)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description; never a key."""
        return {**super().describe(), "host": self.host}

    def _record_input(self, span: Span) -> None:
        attributes = span.attributes
        if span.kind == "model":
            messages = chat_messages(attributes.get(INPUT_MESSAGES))
            attributes[OBSERVATION_INPUT] = dumps(list[JsonValue](messages))
            question = last_user_text(messages)
            run = span.parent
            # A run is asked what its first model call is asked.
            first = (
                run is not None and run.kind == "agent" and OBSERVATION_INPUT not in run.attributes
            )
            if question and run is not None and first:
                run.attributes[OBSERVATION_INPUT] = question
                if run.parent is None:
                    run.attributes[TRACE_INPUT] = question
        elif span.kind == "tool":
            arguments = attributes.get(TOOL_ARGUMENTS)
            if isinstance(arguments, str):
                attributes[OBSERVATION_INPUT] = arguments

    def _record_output(self, span: Span) -> None:
        attributes = span.attributes
        if span.kind == "model":
            messages = chat_messages(attributes.get(OUTPUT_MESSAGES))
            if messages:
                attributes[OBSERVATION_OUTPUT] = dumps(messages[0])
            # A run answers what its last model call answered in text.
            self._answer(span.parent, answer_text(messages))
        elif span.kind == "tool":
            result = attributes.get(TOOL_RESULT)
            if isinstance(result, str):
                attributes[OBSERVATION_OUTPUT] = result
        else:
            self._answer(span, answer_text(chat_messages(attributes.get(OUTPUT_MESSAGES))))

    @staticmethod
    def _answer(run: Span | None, text: str | None) -> None:
        if text and run is not None and run.kind == "agent":
            run.attributes[OBSERVATION_OUTPUT] = text
            if run.parent is None:
                run.attributes[TRACE_OUTPUT] = text
