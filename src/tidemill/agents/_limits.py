"""`UsageLimits`: budgets a run may not cross, checked before the work that would cross them."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from pydantic import JsonValue

from tidemill.errors import ConfigurationError, LimitExceeded
from tidemill.llm import Model, ModelRequest
from tidemill.types import ModelResponse, Usage

__all__ = [
    "CHARS_PER_TOKEN",
    "SAFE_MAX_TOKENS",
    "LimitName",
    "UsageLimits",
    "estimate_input_tokens",
]

LimitName = str
"""`requests`, `tool_calls`, `input_tokens`, `output_tokens` or `total_tokens`."""

CHARS_PER_TOKEN = 4
"""The rough ratio `estimate_input_tokens` counts with."""

SAFE_MAX_TOKENS = 4096
"""A lowered `max_tokens` is sent to a model whose own default is unknown only below this.

Most providers refuse a `max_tokens` above what the model can produce, and
every current model can produce this many; a larger budget is left to the
model's default and the after-the-fact check.
"""


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """What one run may spend, across approval pauses and resumes.

    `requests` and `tool_calls` are checked before the model call or the batch
    of tool calls that would cross them, so the work never happens.

    Token limits are checked before each model call too (`fit`): a call is not
    sent once a limit is reached, nor when its input, *estimated* at about four
    characters a token (`estimate_input_tokens`), would cross `input_tokens`
    or leave no room for an answer within `total_tokens`; and the call's
    `max_tokens` is lowered to what is left of `output_tokens` and
    `total_tokens`, never raised. Real counts are only known once a model has
    answered, so `after_turn` stays as the backstop: an answer whose usage
    crosses a limit anyway (the estimate was low, the provider overshot, or
    the budget was too large to send as `max_tokens`), or that was cut short
    by the lowered `max_tokens`, ends the run before any of its tool calls runs.

    Examples:
        >>> limits = UsageLimits(requests=3, total_tokens=1000)
        >>> limits.before_request(Usage(requests=3))
        ('requests', 3)
        >>> limits.before_request(Usage(requests=2)) is None
        True
    """

    requests: int | None = None
    """Model calls."""
    tool_calls: int | None = None
    """Tool calls started."""
    input_tokens: int | None = None
    """Input tokens, cached ones included, as the run's `Usage` counts them."""
    output_tokens: int | None = None
    """Output tokens, as the run's `Usage` counts them."""
    total_tokens: int | None = None
    """Input plus output tokens."""

    def __post_init__(self) -> None:
        for name in ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigurationError(
                    f"The {name} limit must be a whole number of at least 1, not {value!r}.",
                    hint="Leave a limit out (None) to have none.",
                )

    @property
    def tokens(self) -> bool:
        """Whether any token limit is set (checking one needs the run's usage)."""
        return (
            self.input_tokens is not None
            or self.output_tokens is not None
            or self.total_tokens is not None
        )

    def before_request(self, used: Usage) -> tuple[LimitName, int] | None:
        """The limit one more model call would cross, if any."""
        if self.requests is not None and used.requests + 1 > self.requests:
            return "requests", self.requests
        return None

    def before_tools(self, started: int, batch: int) -> tuple[LimitName, int] | None:
        """The limit starting `batch` more tool calls would cross, if any."""
        if self.tool_calls is not None and started + batch > self.tool_calls:
            return "tool_calls", self.tool_calls
        return None

    def fit(
        self,
        request: ModelRequest,
        used: Usage,
        *,
        model_max_tokens: int = SAFE_MAX_TOKENS,
        thinking_budget: int | None = None,
    ) -> ModelRequest:
        """`request` made to fit the token limits, or `LimitExceeded` if it cannot.

        Only call it when `tokens` is true: it estimates the input when an
        `input_tokens` or `total_tokens` limit is set.

        Args:
            request: The model call about to be sent.
            used: The run's usage so far.
            model_max_tokens: The `max_tokens` the model uses when the request
                sets none; the lowered value is only sent below it.
            thinking_budget: The model's reasoning budget, if it has one: a
                provider refuses a `max_tokens` at or below it, so none is sent.

        Returns:
            `request`, its `max_tokens` lowered to the output budget left
            (what is left of `output_tokens`, and of `total_tokens` after the
            estimated input) when that is below the value it would be sent with.

        Raises:
            LimitExceeded: When `used` already reaches a token limit, or the
                estimated input would cross `input_tokens` or leave no room for
                output within `total_tokens`.

        Examples:
            >>> from tidemill.types import Message
            >>> limits = UsageLimits(output_tokens=500)
            >>> request = ModelRequest([Message.user("Hi")])
            >>> limits.fit(request, Usage(output_tokens=380)).settings
            {'max_tokens': 120}
        """
        for name, spent, limit in (
            ("input_tokens", used.input_tokens, self.input_tokens),
            ("output_tokens", used.output_tokens, self.output_tokens),
            ("total_tokens", used.total_tokens, self.total_tokens),
        ):
            if limit is not None and spent >= limit:
                raise LimitExceeded(
                    name,
                    limit,
                    message=f"The run has used {spent:,} tokens of its {name} limit of "
                    f"{limit:,}; another model call would cross it, so it was not made.",
                )
        estimate = 0
        if self.input_tokens is not None or self.total_tokens is not None:
            estimate = estimate_input_tokens(request)
            if self.input_tokens is not None and used.input_tokens + estimate > self.input_tokens:
                raise _estimated("input_tokens", self.input_tokens, used.input_tokens, estimate)
            if self.total_tokens is not None and used.total_tokens + estimate >= self.total_tokens:
                raise _estimated("total_tokens", self.total_tokens, used.total_tokens, estimate)
        room = self._room(used, estimate)
        if room is None or room >= request.settings.get("max_tokens", model_max_tokens):
            return request
        if thinking_budget is not None and room <= thinking_budget:
            return request
        settings = request.settings.copy()
        settings["max_tokens"] = room
        return replace(request, settings=settings)

    def fit_model(self, request: ModelRequest, used: Usage, model: Model) -> ModelRequest:
        """`fit`, with the `max_tokens` default and reasoning budget `model` says it has."""
        return self.fit(
            request,
            used,
            model_max_tokens=_model_max_tokens(model),
            thinking_budget=_thinking_budget(model),
        )

    def after_turn(
        self, used: Usage, request: ModelRequest, response: ModelResponse
    ) -> tuple[LimitName, int] | None:
        """The token limit a model's answer to `request` crossed, if any.

        `used` is the usage before the answer. Besides a limit crossed anyway
        (`after_response`), an answer cut short (`finish_reason` `length`) at
        the `max_tokens` that `fit` lowered to a budget counts as crossing
        that budget's limit: the model needed more than was left.
        """
        crossed = self.after_response(used + response.usage)
        if crossed is not None or response.finish_reason != "length":
            return crossed
        sent = request.settings.get("max_tokens")
        if sent is None:
            return None
        if self.output_tokens is not None and sent == self.output_tokens - used.output_tokens:
            return "output_tokens", self.output_tokens
        if self.total_tokens is not None and sent == (
            self.total_tokens - used.total_tokens - estimate_input_tokens(request)
        ):
            return "total_tokens", self.total_tokens
        return None

    def after_response(self, used: Usage) -> tuple[LimitName, int] | None:
        """The token limit `used` has crossed, if any."""
        for name, value, limit in (
            ("input_tokens", used.input_tokens, self.input_tokens),
            ("output_tokens", used.output_tokens, self.output_tokens),
            ("total_tokens", used.total_tokens, self.total_tokens),
        ):
            if limit is not None and value > limit:
                return name, limit
        return None

    def describe(self) -> dict[str, JsonValue]:
        """The limits that are set."""
        return {
            name: getattr(self, name)
            for name in ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens")
            if getattr(self, name) is not None
        }

    def _room(self, used: Usage, estimate: int) -> int | None:
        """The output tokens the budgets leave one call, or None without an output budget."""
        rooms = []
        if self.output_tokens is not None:
            rooms.append(self.output_tokens - used.output_tokens)
        if self.total_tokens is not None:
            rooms.append(self.total_tokens - used.total_tokens - estimate)
        return min(rooms) if rooms else None


def estimate_input_tokens(request: ModelRequest) -> int:
    """A rough count of a request's input tokens: its text at `CHARS_PER_TOKEN` a token.

    It counts the messages' text, tool calls (names and arguments) and
    reasoning text, the tools' names, descriptions and schemas, and the
    output format's schema. Images, message framing and the provider's own
    tokenizer are not modelled, so the real count may differ either way.

    Examples:
        >>> from tidemill.types import Message
        >>> estimate_input_tokens(ModelRequest([Message.user("x" * 40)]))
        10
    """
    chars = 0
    for message in request.messages:
        chars += len(message.content)
        for call in message.tool_calls:
            arguments = call.raw_arguments
            chars += len(call.name) + len(
                arguments if arguments is not None else json.dumps(call.arguments)
            )
        for thought in message.reasoning:
            chars += len(thought.text)
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    if request.output_format is not None and request.output_format.schema is not None:
        chars += len(json.dumps(request.output_format.schema))
    return -(-chars // CHARS_PER_TOKEN)


def _estimated(name: str, limit: int, spent: int, estimate: int) -> LimitExceeded:
    """The error for a call refused on its estimated input."""
    after = spent + estimate
    effect = (
        f"cross the run's {name} limit of {limit:,}"
        if name == "input_tokens"
        else f"leave no room for an answer within the run's {name} limit of {limit:,}"
    )
    return LimitExceeded(
        name,
        limit,
        message=f"The next model call was not sent: its input is estimated at {estimate:,} "
        f"tokens (about {CHARS_PER_TOKEN} characters a token, not the provider's count), "
        f"which with the {spent:,} already used would {effect}.",
        hint=f"Raise the limit with .limits({name}=...) well above {after:,}, as the count "
        "is an estimate, or send less: a smaller memory window, shorter tool results, "
        "fewer tools.",
    )


def _model_max_tokens(model: Model) -> int:
    """The `max_tokens` `model` sends when a request sets none, as far as it says.

    A model's default settings, else its own default (Anthropic's, which the
    API requires); a fallback model's smallest; a wrapper's (`inner`) model's;
    else `SAFE_MAX_TOKENS`.
    """
    inner = getattr(model, "inner", None)
    if isinstance(inner, Model):
        return _model_max_tokens(inner)
    members = getattr(model, "models", None)
    if isinstance(members, tuple) and members and all(isinstance(m, Model) for m in members):
        return min(_model_max_tokens(m) for m in members)
    settings = getattr(model, "settings", None)
    if isinstance(settings, dict) and isinstance(settings.get("max_tokens"), int):
        return int(settings["max_tokens"])
    own = getattr(model, "max_tokens", None)
    return own if isinstance(own, int) and not isinstance(own, bool) else SAFE_MAX_TOKENS


def _thinking_budget(model: Model) -> int | None:
    """The largest reasoning budget `model` (or any model it falls back to or wraps) is set to."""
    inner = getattr(model, "inner", None)
    if isinstance(inner, Model):
        return _thinking_budget(inner)
    members = getattr(model, "models", None)
    if isinstance(members, tuple) and members and all(isinstance(m, Model) for m in members):
        budgets = [b for m in members if (b := _thinking_budget(m)) is not None]
        return max(budgets) if budgets else None
    budget = getattr(model, "thinking_budget", None)
    return budget if isinstance(budget, int) and not isinstance(budget, bool) else None
