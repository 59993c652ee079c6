"""`LangSmithTracer`: spans sent to LangSmith's OpenTelemetry endpoint.

LangSmith ingests OTLP/HTTP at `{endpoint}/otel/v1/traces`, authenticated by
an `x-api-key` header, into the project named by a `Langsmith-Project`
header, and maps `langsmith.*` and `gen_ai.*` attributes onto its runs:
https://docs.langchain.com/langsmith/trace-with-opentelemetry. A thread is
the traces sharing a `thread_id` metadata key, set on every run
(https://docs.langchain.com/langsmith/threads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from tidemill.agents.tracing._base import (
    CONVERSATION_ID,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    OUTPUT_MESSAGES,
    OUTPUT_TOKENS,
    RUN_ID,
    TOOL_ARGUMENTS,
    TOOL_RESULT,
    Span,
)
from tidemill.agents.tracing._chat import answer_text, chat_messages, dumps, last_user_text
from tidemill.agents.tracing._otlp import OTLPTracer, setting
from tidemill.errors import MissingCredentialsError

__all__ = ["LangSmithTracer"]

DEFAULT_ENDPOINT = "https://api.smith.langchain.com"
OTEL_PATH = "/otel/v1/traces"

SPAN_KIND = "langsmith.span.kind"
TAGS = "langsmith.span.tags"
METADATA = "langsmith.metadata"
THREAD_ID = "langsmith.metadata.thread_id"
PROMPT = "gen_ai.prompt"  # LangSmith: the run's inputs
COMPLETION = "gen_ai.completion"  # LangSmith: the run's outputs
TOTAL_TOKENS = "gen_ai.usage.total_tokens"

_KINDS = {"agent": "chain", "model": "llm", "tool": "tool"}

_KEY_VARIABLES = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")


class LangSmithTracer(OTLPTracer):
    """Sends an agent's runs to LangSmith, as a chain run with llm and tool runs inside.

    Each run's thread id is set as `thread_id` metadata on every span, so a
    conversation's runs form one LangSmith thread; model calls are `llm`
    runs with model, provider and token usage, tool calls are `tool` runs,
    and a failed span is an errored run. With `capture_content=True` runs
    also get inputs and outputs: chat messages for a model call, the
    arguments and result of a tool call, the question and answer of a run.

    Credentials come from the arguments, else from `LANGSMITH_API_KEY` (or
    `LANGCHAIN_API_KEY`), `LANGSMITH_ENDPOINT` (`https://api.smith.langchain.com`
    by default) and `LANGSMITH_PROJECT` (LangSmith's default project if
    unset). The key never appears in `repr()`, `describe()` or an error.
    Needs `pip install 'tidemill[langsmith]'`.

    Args:
        api_key: A LangSmith API key (`lsv2_...`).
        endpoint: The LangSmith API URL, such as `https://eu.api.smith.langchain.com`.
        project: The project runs go to.
        user_id: Recorded as `user_id` metadata on each trace.
        tags: Tags on every trace's root run.
        metadata: Key-value pairs on every trace's root run.
        service_name: The `service.name` resource attribute.
        timeout: Seconds one export may take.
        capture_content: Record prompts, answers, tool arguments and results.

    Raises:
        MissingCredentialsError: When no API key is given or set in the environment.
        MissingDependencyError: When the OTLP exporter is not installed.

    Examples:
        >>> tracer = LangSmithTracer(
        ...     api_key="lsv2-demo",
        ...     endpoint="https://eu.api.smith.langchain.com",
        ...     project="support",
        ... )
        >>> tracer.describe()["url"], tracer.describe()["project"]
        ('https://eu.api.smith.langchain.com/otel/v1/traces', 'support')
        >>> tracer.close()
    """

    extra = "langsmith"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        endpoint: str | None = None,
        project: str | None = None,
        user_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, str] | None = None,
        service_name: str = "tidemill",
        timeout: float = 10.0,
        capture_content: bool = False,
    ) -> None:
        key = setting(api_key, *_KEY_VARIABLES)
        if key is None:
            raise MissingCredentialsError(
                "The LangSmith tracer needs an API key, and LANGSMITH_API_KEY is not set.",
                hint="Set LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) to a LangSmith API key, "
                "or pass api_key=.",
                context={"env": list(_KEY_VARIABLES)},
            )
        base = setting(endpoint, "LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT") or DEFAULT_ENDPOINT
        base = base.rstrip("/")
        self.project = setting(project, "LANGSMITH_PROJECT", "LANGCHAIN_PROJECT")
        """The project runs go to; LangSmith's default one when None."""
        headers = {"x-api-key": key}
        if self.project:
            headers["Langsmith-Project"] = self.project
        super().__init__(
            base + OTEL_PATH,
            headers=headers,
            service_name=service_name,
            timeout=timeout,
            capture_content=capture_content,
        )
        self.endpoint = base
        """The LangSmith API URL."""
        self.tags = tuple(tags)
        self.metadata = dict(metadata or {})
        if user_id:
            self.metadata["user_id"] = user_id

    def on_start(self, span: Span) -> None:
        """Add LangSmith's attributes, then start the OpenTelemetry span."""
        attributes = span.attributes
        parent = span.parent
        attributes[SPAN_KIND] = _KINDS[span.kind]
        thread = attributes.get(CONVERSATION_ID)
        if thread is None and parent is not None:
            thread = parent.attributes.get(THREAD_ID)
        if isinstance(thread, str):
            attributes[THREAD_ID] = thread
        run_id = attributes.get(RUN_ID)
        if isinstance(run_id, str):
            attributes[f"{METADATA}.run_id"] = run_id
        if parent is None:
            if self.tags:
                attributes[TAGS] = ",".join(self.tags)
            for key, value in self.metadata.items():
                attributes[f"{METADATA}.{key}"] = value
        if self.capture_content:
            self._record_input(span)
        super().on_start(span)

    def on_end(self, span: Span) -> None:
        """Add the outputs and total tokens, then end the OpenTelemetry span."""
        attributes = span.attributes
        if span.kind == "model":
            used_in, used_out = attributes.get(INPUT_TOKENS), attributes.get(OUTPUT_TOKENS)
            if isinstance(used_in, int) and isinstance(used_out, int):
                attributes[TOTAL_TOKENS] = used_in + used_out
        if self.capture_content:
            self._record_output(span)
        super().on_end(span)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description; never the key."""
        return {**super().describe(), "endpoint": self.endpoint, "project": self.project}

    def _record_input(self, span: Span) -> None:
        attributes = span.attributes
        if span.kind == "model":
            messages = chat_messages(attributes.get(INPUT_MESSAGES))
            attributes[PROMPT] = dumps({"messages": list[JsonValue](messages)})
            question = last_user_text(messages)
            run = span.parent
            # A run is asked what its first model call is asked.
            if (
                question
                and run is not None
                and run.kind == "agent"
                and PROMPT not in run.attributes
            ):
                run.attributes[PROMPT] = dumps({"input": question})
        elif span.kind == "tool":
            arguments = attributes.get(TOOL_ARGUMENTS)
            if isinstance(arguments, str):
                attributes[PROMPT] = _inputs(arguments)

    def _record_output(self, span: Span) -> None:
        attributes = span.attributes
        if span.kind == "model":
            messages = chat_messages(attributes.get(OUTPUT_MESSAGES))
            if messages:
                attributes[COMPLETION] = dumps({"messages": list[JsonValue](messages)})
            # A run answers what its last model call answered in text.
            self._answer(span.parent, answer_text(messages))
        elif span.kind == "tool":
            result = attributes.get(TOOL_RESULT)
            if isinstance(result, str):
                attributes[COMPLETION] = dumps({"output": result})
        else:
            self._answer(span, answer_text(chat_messages(attributes.get(OUTPUT_MESSAGES))))

    @staticmethod
    def _answer(run: Span | None, text: str | None) -> None:
        if text and run is not None and run.kind == "agent":
            run.attributes[COMPLETION] = dumps({"output": text})


def _inputs(arguments: str) -> str:
    """Tool arguments as LangSmith inputs, which are an object: wrapped unless they are one."""
    return arguments if arguments.lstrip().startswith("{") else dumps({"input": arguments})
