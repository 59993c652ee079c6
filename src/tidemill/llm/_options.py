"""Request fields field by field: what one API makes of each, and the error for one it cannot take.

A Chat Completions request has more fields than Tidemill's typed ones
(`user`, `presence_penalty`, `service_tier`, ...); they travel in
`ModelRequest.options` under their Chat Completions names. Each adapter
holds a `RequestFields`: for every field, a `FieldRule` saying what the
field becomes in its vendor's body (the words the proxy's parameter table
shows), and, for an option, how to write it there. An OpenAI-format API
sends a field without a rule as it is; any other refuses it with
`UnsupportedOption`, which names the field and why, so nothing a caller
asked for is left out unseen.

The rules of typed fields (`temperature`, `seed`, `tool_choice`, ...) only
describe what the builder does with them, or refuse them (`seed` where the
API has none); the proxy checks a request against them before it is sent
(`RequestFields.refusal`), since a library caller's settings are left out
where an API has no field for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from tidemill.errors import ConfigurationError

__all__ = [
    "FieldRule",
    "RequestFields",
    "UnsupportedOption",
    "as_is",
    "check_kind",
    "nothing_for",
    "put",
    "refused",
    "request_fields",
    "sent_as",
    "setting",
    "shown",
    "stream_options_rule",
    "translated",
    "without_logprobs",
]

Body = dict[str, Any]
"""A vendor's request body while it is built."""
Send = Callable[[JsonValue, Body], None]
"""Writes an option's value into a vendor's body."""
Check = Callable[[JsonValue], str | None]
"""Why an option's value cannot be sent (`None` when it can)."""

_SHOWN = 80


def shown(text: str) -> str:
    """`text` cut to a length an error message can quote.

    Examples:
        >>> shown("x" * 100)[-4:], len(shown("x" * 100))
        ('x...', 83)
    """
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


class UnsupportedOption(ConfigurationError):
    """A request field the model's API cannot take, or a value of it that it cannot.

    Args:
        option: The field, by its Chat Completions name (`presence_penalty`).
        provider: The provider that cannot take it.
        why: Why not, as a sentence.
        value: Whether the field is known to the API but not with this value.

    Examples:
        >>> error = UnsupportedOption("logit_bias", "anthropic", "the Messages API has none.")
        >>> error.message, error.context["param"], error.context["code"]
        ("anthropic cannot take 'logit_bias': the Messages API has none.", 'logit_bias', \
'unsupported_parameter')
    """

    def __init__(self, option: str, provider: str, why: str, *, value: bool = False) -> None:
        name = shown(option)
        super().__init__(
            f"{provider} cannot take '{name}': {why}",
            hint="Leave it out, or send the request to a model whose API has it.",
            context={
                "param": name,
                "provider": provider,
                "code": "unsupported_value" if value else "unsupported_parameter",
            },
        )
        self.option = option


@dataclass(frozen=True, slots=True)
class FieldRule:
    """What one API makes of one request field.

    Args:
        becomes: What the field becomes in the vendor's body, in words (for
            the docs and error messages): `` `metadata.user_id` ``, or why it
            is refused.
        send: Writes an option's value into the body; `None` when nothing is
            sent for the values `check` lets through, or the field is typed
            (`setting`) or refused.
        check: Why a value cannot be sent; `None` lets every value through.
        refused: The API has no equivalent: every value is refused.
        setting: A typed field of `ModelRequest`, which the builder sends itself.
    """

    becomes: str
    send: Send | None = None
    check: Check | None = None
    refused: bool = False
    setting: bool = False


@dataclass(frozen=True, slots=True)
class RequestFields:
    """One API's rules for the fields of a Chat Completions request.

    Args:
        provider: The provider's name, for messages.
        rules: The rule of each field that has one.
        unknown: Why a field with no rule is refused; `None` sends it as it is
            (an OpenAI-format API).

    Examples:
        >>> fields = RequestFields("acme", {"user": refused("Acme has no user ids.")},
        ...                        unknown="Acme's API has no such field.")
        >>> fields.describe("user"), fields.describe("top_k")
        ('**400**: Acme has no user ids.', "**400**: Acme's API has no such field.")
        >>> fields.refusal("user", "ann").message
        "acme cannot take 'user': Acme has no user ids."
    """

    provider: str
    rules: Mapping[str, FieldRule] = field(default_factory=dict)
    unknown: str | None = None

    def rule(self, name: str) -> FieldRule:
        """The rule of `name`: its own, or the one for fields without a rule."""
        known = self.rules.get(name)
        if known is not None:
            return known
        if self.unknown is None:
            return as_is(name)
        return refused(self.unknown)

    def describe(self, name: str) -> str:
        """What `name` becomes, as the proxy's parameter table says it."""
        rule = self.rule(name)
        return f"**400**: {rule.becomes}" if rule.refused else rule.becomes

    def refusal(self, name: str, value: JsonValue = None) -> UnsupportedOption | None:
        """The error for sending `name` (with `value`), or `None` when it can be sent."""
        rule = self.rules.get(name)
        if rule is None:  # sent as it is, or refused as unknown
            return (
                None
                if self.unknown is None
                else UnsupportedOption(name, self.provider, self.unknown)
            )
        if rule.refused:
            return UnsupportedOption(name, self.provider, rule.becomes)
        if rule.check is not None and value is not None:
            why = rule.check(value)
            if why is not None:
                return UnsupportedOption(name, self.provider, why, value=True)
        return None

    def apply(self, body: Body, options: Mapping[str, JsonValue]) -> None:
        """Write `options` into `body` as the rules say.

        Raises:
            UnsupportedOption: For a field the API cannot take, or a value it
                cannot, or one that would overwrite what the request set already.
            ConfigurationError: For a typed field given as an option.
        """
        for name, value in options.items():
            error = self.refusal(name, value)
            if error is not None:
                raise error
            rule = self.rules.get(name)
            if rule is None:  # an OpenAI-format API: as it is
                self._send(name, value, body, None)
                continue
            if rule.setting:
                raise ConfigurationError(
                    f"'{shown(name)}' has a place of its own in a ModelRequest, not its options.",
                    hint="Pass it as the request's settings, tools, tool_choice or output_format.",
                )
            if rule.send is not None and value is not None:
                self._send(name, value, body, rule.send)

    def _send(self, name: str, value: JsonValue, body: Body, send: Send | None) -> None:
        """`send` the value (`None`: as it is, under its name), a clash as the option's error."""
        try:
            if send is None:
                put(body, (name,), value)
            else:
                send(value, body)
        except _Conflict as conflict:
            raise UnsupportedOption(
                name,
                self.provider,
                f"it becomes `{conflict.path}`, which the request sets already.",
                value=True,
            ) from None


def request_fields(model: object) -> RequestFields | None:
    """The `RequestFields` of a model (an adapter's `request_fields`), or `None`.

    Models without one (scripted, offline, a wrapper, your own) take the
    request's fields as its settings and options, and do with them what they do.
    """
    fields = getattr(model, "request_fields", None)
    return fields if isinstance(fields, RequestFields) else None


# -- rules ---------------------------------------------------------------------------------------


class _Conflict(ValueError):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def put(body: Body, path: str | tuple[str, ...], value: JsonValue) -> None:
    """Set the dotted `path` (or path of keys) of `body` to `value`, making objects on the way.

    Raises:
        ValueError: When the path holds another value already (a conflict
            `RequestFields.apply` reports as the option's).

    Examples:
        >>> body = {"metadata": {}}
        >>> put(body, "metadata.user_id", "ann"); body
        {'metadata': {'user_id': 'ann'}}
    """
    *parents, leaf = path.split(".") if isinstance(path, str) else path
    where = path if isinstance(path, str) else ".".join(path)
    node = body
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise _Conflict(where)
        node = child
    if leaf in node and node[leaf] != value:
        raise _Conflict(where)
    node[leaf] = value


def setting(becomes: str, *, refused_because: str | None = None) -> FieldRule:
    """A typed field the builder sends itself: what it becomes (or why it is refused)."""
    if refused_because is not None:
        return FieldRule(refused_because, refused=True, setting=True)
    return FieldRule(becomes, setting=True)


def refused(why: str) -> FieldRule:
    """A field the API has no equivalent for."""
    return FieldRule(why, refused=True)


def as_is(name: str) -> FieldRule:
    """A field sent under its own name, with its value unchanged."""
    return FieldRule("as is", send=lambda value, body: put(body, (name,), value))


_KINDS: dict[str, tuple[type, ...]] = {
    "a string": (str,),
    "a boolean": (bool,),
    "a number": (int, float),
    "an integer": (int,),
    "an object": (dict,),
}


def check_kind(kind: str) -> Check:
    """A check that the value is of `kind` (`"a string"`, `"a number"`, ...)."""
    types = _KINDS[kind]

    def check(value: JsonValue) -> str | None:
        wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        return f"it must be {kind}." if wrong else None

    return check


def sent_as(
    path: str,
    *,
    kind: str | None = None,
    values: Mapping[str, str | None] | None = None,
    becomes: str | None = None,
) -> FieldRule:
    """A field sent at `path` of the vendor's body.

    Args:
        path: Where the value goes, dotted (`metadata.user_id`).
        kind: The JSON type the value must have (see `check_kind`).
        values: For an enumeration: each value the API takes, and what it is
            sent as (`None`: nothing is sent, the API does that by default);
            any other value is refused.
        becomes: The words of the docs, when `path` alone would not say it.

    Examples:
        >>> rule = sent_as("service_tier", values={"auto": "auto", "default": "standard_only"})
        >>> rule.becomes
        '`service_tier`: `auto`, `default` as `standard_only`; any other value **400**'
        >>> body = {}; rule.send("default", body); body
        {'service_tier': 'standard_only'}
        >>> rule.check("flex")
        "'flex' is not one it has; it takes 'auto' or 'default'."
    """
    if values is None:
        words = becomes or f"`{path}`"
        check = check_kind(kind) if kind else None
        return FieldRule(words, send=lambda value, body: put(body, path, value), check=check)
    table = dict(values)
    if becomes is None:
        parts = [
            f"`{name}`" if sent == name else f"`{name}` as `{sent}`"
            for name, sent in table.items()
            if sent is not None
        ]
        unsent = [f"`{name}`" for name, sent in table.items() if sent is None]
        listed = ", ".join(parts) + (f" ({', '.join(unsent)}: nothing sent)" if unsent else "")
        becomes = f"`{path}`: {listed}; any other value **400**"

    def check_value(value: JsonValue) -> str | None:
        if isinstance(value, str) and value in table:
            return None
        accepted = " or ".join(repr(name) for name in table)
        return f"{shown(repr(value))} is not one it has; it takes {accepted}."

    def send(value: JsonValue, body: Body) -> None:
        sent = table[str(value)]
        if sent is not None:
            put(body, path, sent)

    return FieldRule(becomes, send=send, check=check_value)


def nothing_for(
    accepted: Iterable[JsonValue], becomes: str, *, why: str | None = None
) -> FieldRule:
    """A field whose `accepted` values ask for what the API does anyway: nothing is sent.

    Any other value is refused (`n`: one answer is every API's default, two
    are more than the answer can carry), with `why` as the reason when given.

    Examples:
        >>> rule = nothing_for([1], "`1`: nothing sent")
        >>> rule.check(1) is None, rule.check(2)
        (True, '2 cannot be honoured; only 1 can.')
    """
    allowed = list(accepted)

    def check(value: JsonValue) -> str | None:
        if any(value == ok and isinstance(value, bool) == isinstance(ok, bool) for ok in allowed):
            return None
        if why is not None:
            return why
        honoured = " or ".join(json.dumps(ok) for ok in allowed)
        return f"{shown(json.dumps(value))} cannot be honoured; only {honoured} can."

    return FieldRule(becomes, check=check)


def without_logprobs(why: str) -> dict[str, FieldRule]:
    """`logprobs` and `top_logprobs` where no log probabilities come back, `why` saying so.

    `logprobs: false` asks for nothing and is taken; `true`, and any
    `top_logprobs`, are refused: an answer without them would drop them unseen.

    Examples:
        >>> rules = without_logprobs("Acme returns no log probabilities.")
        >>> rules["logprobs"].check(False) is None, rules["logprobs"].check(True)
        (True, 'Acme returns no log probabilities.')
        >>> rules["top_logprobs"].refused
        True
    """
    return {
        "logprobs": nothing_for([False], f"`false`: nothing sent; `true` **400**: {why}", why=why),
        "top_logprobs": refused(why),
    }


def stream_options_rule(becomes: str) -> FieldRule:
    """`stream_options` beyond `include_usage`, for an API that has none.

    `include_usage` is the proxy's to read; other keys pass when they ask for
    nothing (`false`), and are refused otherwise.
    """

    def check(value: JsonValue) -> str | None:
        if not isinstance(value, dict):
            return "it must be an object."
        asked = sorted(key for key, item in value.items() if item)
        return f"it has no {shown(', '.join(asked))}." if asked else None

    return FieldRule(becomes, check=check)


def translated(api: str) -> dict[str, FieldRule]:
    """The rules every API that is not OpenAI's format starts from.

    Values that ask for what every API does anyway are taken (`n: 1`,
    `logprobs: false`, text output, `store: false`); OpenAI's own features
    (log probabilities among them) are refused. Each family adds and
    replaces rules for what its API has.
    """
    return {
        "n": nothing_for([1], "`1`: nothing sent (one answer is the default)"),
        **without_logprobs(f"{api} returns no log probabilities."),
        "modalities": nothing_for([["text"]], '`["text"]`: nothing sent'),
        "store": nothing_for(
            [False], f"`false`: nothing sent ({api} keeps no stored completions); `true` **400**"
        ),
        "stream_options": stream_options_rule(
            "nothing sent: `include_usage` is the proxy's own; any other key **400**"
        ),
        "presence_penalty": refused(f"{api} has no presence penalty."),
        "frequency_penalty": refused(f"{api} has no frequency penalty."),
        "logit_bias": refused(f"{api} has no token biases."),
        "user": refused(f"{api} takes no end-user id."),
        "safety_identifier": refused(f"{api} takes no end-user id."),
        "metadata": refused(f"{api} takes no request metadata."),
        "service_tier": refused(f"{api} has no service tiers."),
        "reasoning_effort": refused(f"{api} has no reasoning effort."),
        "parallel_tool_calls": nothing_for(
            [True], f"`true`: nothing sent (the default); `false` **400**: {api} has no such switch"
        ),
        "prediction": refused(f"{api} has no predicted outputs."),
        "web_search_options": refused(f"{api} has no built-in web search here."),
        "verbosity": refused(f"{api} has no verbosity setting."),
        "prompt_cache_key": refused(f"{api} has no prompt cache keys."),
        "prompt_cache_retention": refused(f"{api} has no prompt cache retention setting."),
        "prompt_cache_options": refused(f"{api} has no prompt cache options."),
        "moderation": refused(f"{api} has no moderation setting."),
    }
