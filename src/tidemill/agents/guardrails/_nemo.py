"""`NemoGuardrail`: the input and output rails of NVIDIA NeMo Guardrails, as a `Guardrail`.

Needs the `nemo` extra (`pip install 'tidemill[nemo]'`, which installs
`nemoguardrails`). A rails configuration says which Colang flows check the
user's input (`rails: input: flows:`) and which the model's answer
(`rails: output: flows:`). Only those rails run, through NeMo's
`LLMRails.check_async`; dialog and retrieval rails never do, and the model
that answers is the agent's, not NeMo's. What NeMo decides becomes a
`GuardrailResult`:

- *passed*: `allow`;
- *modified* (a rail rewrote the text, masking something): `redact`, the
  rewritten text goes on; with `on_violation="block"`, `block`;
- *blocked* (a rail stopped, or one of its actions failed): `block`, so the
  run raises `GuardrailViolation` naming the rail.

Rails that ask an LLM (`self check input`, `self check output`) use the
`models:` of the configuration through NeMo's own clients, or, given
`llm=`, a Tidemill `Model` (any spec `.llm()` takes, or `"fake"` offline).

NeMo's checks are coroutines and the `Guardrail` protocol is synchronous:
they run on an event loop this guardrail owns (a `LoopThread`), made on
first use and stopped by `close()` or `aclose()`. The caller waits while a
check runs, so a rail that calls an LLM holds an async caller that long.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents.guardrails._base import GuardrailResult, OnViolation, Side, Violation
from tidemill.errors import AgentError, ConfigurationError, MissingDependencyError
from tidemill.llm import Model, ModelRequest, resolve_model
from tidemill.types import Message, Role

if TYPE_CHECKING:
    from nemoguardrails import LLMRails, RailsConfig
    from nemoguardrails.types import ChatMessage, LLMResponse, LLMResponseChunk

__all__ = ["NemoGuardrail"]

MODIFIED = "nemo_modified"
"""The category of a violation for text a rail rewrote (NeMo does not say which rail)."""

_GUIDE = "https://docs.nvidia.com/nemo/guardrails/latest/configure-rails/index.html"


class NemoGuardrail:
    """Checks prompts and answers with NeMo Guardrails' input and output rails.

    Use it to apply a NeMo rails configuration (its Colang flows, its
    library rails such as `regex check input`, its own Python actions) to a
    Tidemill agent: `agent().guardrails("nemo", config="rails/")`.

    Args:
        config: A rails configuration: a directory holding `config.yml`
            and Colang `.co` files (and `actions.py`, whose actions NeMo
            registers), a single `.yml` file, or a `RailsConfig`.
        yaml: Instead of `config`, the content of a `config.yml`.
        colang: With `yaml`, the content of a `.co` file.
        actions: Python functions for the flows to `execute`, by action
            name (`{"check_terms": check_terms}`); a function may be async.
        llm: The model the rails' own prompts go to, instead of the
            configuration's `models:`: a `Model` or a spec such as
            `"openai:gpt-4o-mini"`. A model made from a spec is closed with
            the guardrail.
        on_violation: What to do with text a rail rewrote: `"redact"` passes
            the rewritten text on, `"block"` stops the run. A rail that
            blocks always blocks.

    Raises:
        MissingDependencyError: When `nemoguardrails` is not installed.
        ConfigurationError: For a missing or unreadable configuration, one
            NeMo rejects, or one with neither input nor output rails.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | RailsConfig | None = None,
        *,
        yaml: str | None = None,
        colang: str | None = None,
        actions: Mapping[str, Callable[..., Any]] | None = None,
        llm: Model | str | None = None,
        on_violation: OnViolation = "redact",
    ) -> None:
        try:
            import nemoguardrails
        except ImportError as exc:
            raise MissingDependencyError(
                "nemoguardrails", extra="nemo", feature="The 'nemo' guardrail"
            ) from exc
        if on_violation not in ("redact", "block"):
            raise ConfigurationError(
                f"on_violation must be 'redact' or 'block', not {on_violation!r}.",
                hint="'redact' passes on text a rail rewrote; 'block' stops the run instead.",
            )
        self.on_violation: OnViolation = on_violation
        self.source, rails_config = _load(nemoguardrails.RailsConfig, config, yaml, colang)
        self.input_rails: tuple[str, ...] = tuple(rails_config.rails.input.flows)
        """The flows that check a run's input, in order."""
        self.output_rails: tuple[str, ...] = tuple(rails_config.rails.output.flows)
        """The flows that check the model's answers, in order."""
        if not self.input_rails and not self.output_rails:
            raise ConfigurationError(
                f"The rails configuration {self.source} has no input or output rails.",
                hint="List flows under rails: input: flows: or rails: output: flows: in "
                "config.yml; this guardrail runs only those.",
            )
        functions = _actions(actions)
        self.llm: Model | None = resolve_model(llm) if isinstance(llm, str) else llm
        """The model the rails call, when one was given."""
        if self.llm is not None and not isinstance(self.llm, Model):
            raise ConfigurationError(
                f"Cannot use {type(self.llm).__name__} as the rails' LLM.",
                hint="Pass a Tidemill Model or a spec such as 'openai:gpt-4o-mini', or leave "
                "llm= out to use the models: of the rails configuration.",
            )
        self._owns_llm = isinstance(llm, str)
        bridge = _RailsLLM(self.llm) if self.llm is not None else None
        self._sync = LoopThread("tidemill-nemo")
        # Made on the guardrail's own loop: NeMo looks for a current loop while it sets up.
        self._rails = self._sync.run(
            _rails(nemoguardrails.LLMRails, rails_config, functions, bridge)
        )

    def check_input(self, messages: Sequence[Message]) -> GuardrailResult:
        """Run the input rails on each user message, with the messages before it as context.

        Other messages (system, assistant, tool) are not checked. Spans are
        offsets in the content of the message that `message_index` names.

        Raises:
            AgentError: When NeMo fails instead of deciding (an LLM it calls
                is unreachable, say).
        """
        given = tuple(messages)
        if not self.input_rails:
            return GuardrailResult("input", messages=given)
        checked = list(given)
        violations: list[Violation] = []
        for index, message in enumerate(given):
            if message.role != Role.USER or not message.content:
                continue
            context = [_turn(m) for m in checked[:index] if m.role in _CONTEXT_ROLES]
            turn = {"role": "user", "content": message.content}
            status, content, rail = self._check("input", [*context, turn])
            if status == "blocked":
                return _blocked("input", rail, message.content, index)
            if status == "modified":
                violation = _modified(message.content, content, index)
                if self.on_violation == "block":
                    return GuardrailResult("input", "block", (violation,))
                violations.append(violation)
                checked[index] = message.model_copy(update={"content": content})
        if not violations:
            return GuardrailResult("input", messages=given)
        return GuardrailResult("input", "redact", tuple(violations), messages=tuple(checked))

    def check_output(self, text: str) -> GuardrailResult:
        """Run the output rails on the model's answer.

        The rails see the answer as `$bot_message`; `$user_message` is empty,
        because the protocol passes the answer alone.

        Raises:
            AgentError: When NeMo fails instead of deciding.
        """
        if not self.output_rails or not text:
            return GuardrailResult("output", text=text)
        status, content, rail = self._check("output", [{"role": "assistant", "content": text}])
        if status == "blocked":
            return _blocked("output", rail, text, None)
        if status == "modified":
            violation = _modified(text, content, None)
            if self.on_violation == "block":
                return GuardrailResult("output", "block", (violation,))
            return GuardrailResult("output", "redact", (violation,), text=content)
        return GuardrailResult("output", text=text)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the policy."""
        return {
            "type": "nemo",
            "config": self.source,
            "input_rails": list(self.input_rails),
            "output_rails": list(self.output_rails),
            "on_violation": self.on_violation,
            "llm": self.llm.describe() if self.llm is not None else None,
        }

    def close(self) -> None:
        """Stop the guardrail's event loop (a later check starts a new one), and its own model."""
        if self._owns_llm and self.llm is not None:
            self._sync.run(self.llm.aclose())
        self._sync.close()

    async def aclose(self) -> None:
        """Close the model made from a spec and stop the loop, as `close()` does."""
        if self._owns_llm and self.llm is not None:
            await self.llm.aclose()
        self._sync.close()

    def _check(self, side: Side, turns: list[dict[str, str]]) -> tuple[str, str, str | None]:
        """NeMo's verdict on the last turn: status, the text it leaves, the rail that stopped."""
        from nemoguardrails.exceptions import LLMCallException, LLMClientError
        from nemoguardrails.rails.llm.options import RailType

        rail_type = RailType.INPUT if side == "input" else RailType.OUTPUT
        try:
            result = self._sync.run(self._rails.check_async(turns, rail_types=[rail_type]))
        except (LLMCallException, LLMClientError) as exc:
            raise AgentError(
                f"The NeMo {side} rails failed: {exc}",
                hint="A rail asked an LLM that did not answer: check the model given as llm=, "
                "or the models: of the rails configuration and their credentials.",
                context={"side": side, "config": self.source},
            ) from exc
        return str(result.status.value), str(result.content), result.rail

    def __repr__(self) -> str:
        return f"NemoGuardrail(config={self.source!r}, on_violation={self.on_violation!r})"


_CONTEXT_ROLES = (Role.USER, Role.ASSISTANT)


def _turn(message: Message) -> dict[str, str]:
    return {"role": message.role.value, "content": message.content}


def _mask(text: str) -> str:
    """A sample that never holds the text: at most its first two characters, for long ones."""
    return (text[:2] if len(text) > 8 else "") + "****"


def _blocked(side: Side, rail: str | None, text: str, index: int | None) -> GuardrailResult:
    violation = Violation(
        category=rail or "nemo",
        span=(0, len(text)),
        sample=_mask(text),
        kind="custom",
        message_index=index,
    )
    return GuardrailResult(side, "block", (violation,))


def _modified(before: str, after: str, index: int | None) -> Violation:
    """The part of `before` a rail rewrote: between the prefix and the suffix both share."""
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end = len(before)
    tail = len(after)
    while end > start and tail > start and before[end - 1] == after[tail - 1]:
        end -= 1
        tail -= 1
    return Violation(
        category=MODIFIED,
        span=(start, end),
        sample=_mask(before[start:end]),
        kind="custom",
        message_index=index,
    )


def _load(
    rails_config: type[RailsConfig],
    config: str | os.PathLike[str] | RailsConfig | None,
    yaml: str | None,
    colang: str | None,
) -> tuple[str, RailsConfig]:
    """The configuration and how to name it in messages, from whichever form was given."""
    if isinstance(config, rails_config):
        if yaml is not None or colang is not None:
            raise _both()
        return str(config.config_path or "<RailsConfig>"), config
    if config is None:
        if yaml is None:
            raise ConfigurationError(
                "The 'nemo' guardrail needs a rails configuration.",
                hint="Pass config='path/to/rails' (a directory with config.yml and .co files), "
                "a RailsConfig, or yaml= (and colang=) with their content.",
            )
        return "<content>", _parse(
            "<content>", lambda: rails_config.from_content(colang_content=colang, yaml_content=yaml)
        )
    if yaml is not None or colang is not None:
        raise _both()
    if not isinstance(config, str | os.PathLike):
        raise ConfigurationError(
            f"Cannot use {type(config).__name__} as a rails configuration.",
            hint="Pass a directory path, a .yml file, or a nemoguardrails.RailsConfig.",
        )
    path = Path(config)
    _check_path(path)
    if path.is_file():
        # As content: NeMo's from_path fills in the defaults of a directory only (`models:`).
        text = path.read_text(encoding="utf-8")
        return str(path), _parse(str(path), lambda: rails_config.from_content(yaml_content=text))
    return str(path), _parse(str(path), lambda: rails_config.from_path(str(path)))


def _check_path(path: Path) -> None:
    if not path.exists():
        raise ConfigurationError(
            f"There is no rails configuration at {path}: the path does not exist.",
            hint="Pass the directory that holds config.yml and the Colang .co files "
            "(relative paths start from the working directory, "
            f"{Path.cwd()}).",
            context={"path": str(path)},
        )
    if path.is_file():
        if path.suffix not in (".yml", ".yaml"):
            raise ConfigurationError(
                f"The rails configuration {path} is not a .yml file.",
                hint="Pass the directory that holds config.yml and the .co files, or config.yml.",
                context={"path": str(path)},
            )
        return
    if not any(p.suffix in (".yml", ".yaml") for p in path.rglob("*") if p.is_file()):
        raise ConfigurationError(
            f"The rails directory {path} has no config.yml.",
            hint="Add a config.yml with rails: input: flows: and rails: output: flows:, "
            f"next to the .co files that define them (see {_GUIDE}).",
            context={"path": str(path)},
        )


def _parse(source: str, load: Callable[[], RailsConfig]) -> RailsConfig:
    """Load a configuration, NeMo's errors becoming a `ConfigurationError` that names it."""
    import yaml as pyyaml
    from nemoguardrails.colang.v2_x.runtime.errors import ColangParsingError, ColangSyntaxError

    try:
        with _own_deprecations():
            return load()
    except (ValueError, OSError, pyyaml.YAMLError, ColangParsingError, ColangSyntaxError) as exc:
        raise _invalid(source, exc) from exc


@contextmanager
def _own_deprecations() -> Iterator[None]:
    """Silence the deprecation NeMo 0.24 warns of in its own code whenever it validates a config.

    Its jailbreak-detection settings read their deprecated `nim_url` field:
    nothing in the caller's configuration causes it, and under `-W error`
    it would make every configuration fail. Only that message is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Use 'nim_base_url' instead", category=DeprecationWarning
        )
        yield


async def _rails(
    llm_rails: type[LLMRails],
    config: RailsConfig,
    actions: Mapping[str, Callable[..., Any]],
    llm: _RailsLLM | None,
) -> LLMRails:
    """The rails of `config`, with `actions` registered and `llm` as their main model."""
    try:
        with _own_deprecations():
            rails = llm_rails(config, llm=llm)
    except (ValueError, ImportError) as exc:
        source = str(config.config_path or "<content>")
        raise _invalid(source, exc) from exc
    for name, function in actions.items():
        rails.register_action(function, name=name)
    return rails


def _actions(actions: Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    checked: dict[str, Callable[..., Any]] = {}
    for name, function in (actions or {}).items():
        if not isinstance(name, str) or not name or not callable(function):
            raise ConfigurationError(
                f"The action {name!r} cannot be registered: give it a name and a function.",
                hint="Pass actions={'check_terms': check_terms}, the names the flows execute.",
            )
        checked[name] = function
    return checked


def _invalid(source: str, exc: BaseException) -> ConfigurationError:
    said = " ".join(str(exc).split()) or type(exc).__name__
    if len(said) > 400:
        said = said[:399] + "…"
    return ConfigurationError(
        f"NeMo Guardrails rejected the rails configuration {source}: {said}",
        hint=f"Fix config.yml or the .co files it names; see {_GUIDE}.",
        context={"config": source, "error": type(exc).__name__},
    )


def _both() -> ConfigurationError:
    return ConfigurationError(
        "The 'nemo' guardrail was given config= and yaml=/colang= together.",
        hint="Pass one: a directory or RailsConfig as config=, or the text as yaml= and colang=.",
    )


class _RailsLLM:
    """A Tidemill `Model` as NeMo's `LLMModel`: what rails such as `self check input` ask."""

    def __init__(self, model: Model) -> None:
        self._model = model

    @property
    def model_name(self) -> str:
        return self._model.model_name

    @property
    def provider_name(self) -> str | None:
        return self._model.provider

    @property
    def provider_url(self) -> str | None:
        return None

    async def generate_async(
        self, prompt: str | list[ChatMessage], *, stop: list[str] | None = None, **kwargs: Any
    ) -> LLMResponse:
        from nemoguardrails.types import LLMResponse

        request = ModelRequest(messages=_messages(prompt), settings={"stop": stop} if stop else {})
        response = await self._model.request(request)
        return LLMResponse(content=response.message.content, model=self._model.model_name)

    async def stream_async(
        self, prompt: str | list[ChatMessage], *, stop: list[str] | None = None, **kwargs: Any
    ) -> AsyncIterator[LLMResponseChunk]:
        from nemoguardrails.types import LLMResponseChunk

        response = await self.generate_async(prompt, stop=stop)
        yield LLMResponseChunk(delta_content=response.content, model=response.model)


_ROLES = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT}


def _messages(prompt: str | list[ChatMessage]) -> list[Message]:
    """NeMo's prompt (text, or chat messages) as Tidemill messages; text parts only."""
    if isinstance(prompt, str):
        return [Message.user(prompt)]
    messages: list[Message] = []
    for message in prompt:
        role = _ROLES.get(str(message.role.value))
        content = message.content
        if role is None or content is None:
            continue
        if not isinstance(content, str):
            content = "".join(str(part.get("text", "")) for part in content)
        messages.append(Message(role=role, content=content))
    return messages
