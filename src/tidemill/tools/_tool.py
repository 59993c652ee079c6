"""`Tool`: a named, described, schema-checked action a model may call."""

from __future__ import annotations

import asyncio
import inspect
import secrets
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, cast, get_origin, get_type_hints

import jsonschema
import pydantic
import pydantic_core
from pydantic import JsonValue

from tidemill._sync import SyncFunction
from tidemill.errors import ConfigurationError, ToolArgumentsError
from tidemill.tools._context import ToolContext
from tidemill.tools._docstring import parse_docstring
from tidemill.tools._return import ToolReturn
from tidemill.types import ToolDefinition, ToolResult

__all__ = ["FunctionTool", "Tool", "render_result"]

P = ParamSpec("P")
R = TypeVar("R")

_EMPTY_SCHEMA: dict[str, JsonValue] = {"type": "object", "properties": {}}


class Tool:
    """An action a model may call: a name, a description, a JSON Schema.

    Use `@tool` for functions. Build a `Tool` by hand when the schema comes
    from elsewhere (an API description, a config file), passing the function
    to call; or subclass it and override `acall`.

    Args:
        function: Called with the validated arguments as keyword arguments.
            Async functions run on the event loop; sync ones in a worker
            thread, or on the loop's thread where nothing else needs that
            loop (see "How calls run" in the tools guide).
        name: The name the model calls it by.
        description: What it does and when to use it; the model reads this.
        parameters: The JSON Schema of the arguments object. Arguments are
            validated against it before the call.
        requires_approval: Pause the run for a human decision before each call.

    Examples:
        >>> import asyncio
        >>> def lookup(sku: str) -> dict[str, int]:
        ...     return {"stock": 3}
        >>> stock = Tool(
        ...     lookup,
        ...     name="stock",
        ...     description="How many units of a product are in stock.",
        ...     parameters={"type": "object", "properties": {"sku": {"type": "string"}},
        ...                 "required": ["sku"]},
        ... )
        >>> stock.validate({"sku": 42})
        Traceback (most recent call last):
        ...
        tidemill.errors.ToolArgumentsError: Invalid arguments for tool 'stock': sku: 42 is not ...
    """

    def __init__(
        self,
        function: Callable[..., object] | None = None,
        *,
        name: str,
        description: str = "",
        parameters: Mapping[str, JsonValue] | None = None,
        requires_approval: bool = False,
    ) -> None:
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise ConfigurationError(
                f"Tool name {name!r} is not usable.",
                hint="Use letters, digits, '_' and '-' only (providers reject other names).",
            )
        if function is None and type(self).acall is Tool.acall:
            raise ConfigurationError(
                f"Tool {name!r} has nothing to run.",
                hint="Pass function=..., or subclass Tool and override acall().",
            )
        schema = dict(parameters) if parameters is not None else dict(_EMPTY_SCHEMA)
        if schema.get("type") != "object":
            raise ConfigurationError(
                f"The parameters of tool {name!r} must be a JSON Schema of type 'object'.",
                context={"parameters": schema},
            )
        self.name = name
        """The name the model calls it by."""
        self.description = description
        """What it does and when to use it; the model reads this."""
        self.parameters: dict[str, JsonValue] = schema
        """The JSON Schema of the arguments object."""
        self.requires_approval = requires_approval
        """Whether the run pauses for a human decision before each call."""
        self._function = function
        self._is_async = function is not None and _is_async(function)
        self._blocking: SyncFunction[object] | None = (
            None if function is None or self._is_async else SyncFunction(function)
        )
        self._validator: jsonschema.protocols.Validator | None = None
        self.definition = ToolDefinition(
            name=name, description=description, parameters=self.parameters
        )
        """The tool as a model sees it."""

    delegates: bool = False
    """Whether calling this tool runs another agent (bounded by delegation limits)."""

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        """Check `arguments` against the schema and return the values to call with.

        Raises:
            ToolArgumentsError: Listing every problem, by argument.
        """
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.parameters)
            self._validator = cls(self.parameters)
        problems = [
            f"{'.'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message}"
            for error in self._validator.iter_errors(dict(arguments))
        ]
        if problems:
            raise ToolArgumentsError(self.name, sorted(problems))
        return dict(arguments)

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the tool with validated arguments and return its result.

        Override this in a subclass for tools that are not a single function.
        """
        assert self._function is not None  # guaranteed by __init__
        return await _invoke(self._function, arguments, self._blocking)

    def render(self, value: object) -> str:
        """Turn the tool's return value into the text the model sees."""
        return render_result(value)

    async def arun(self, context: ToolContext | None = None, /, **arguments: Any) -> ToolResult:
        """Call the tool yourself, as an agent would: validate, run, render.

        For scripts and tests. Unlike a call the model makes, a problem
        raises instead of becoming an error result the model can correct.

        Args:
            context: The call's context; by default a one-off one
                (`thread_id="direct"`, a fresh `call_id`).
            **arguments: The arguments, as the model would send them.

        Raises:
            ToolArgumentsError: When the arguments do not fit the schema.

        Examples:
            >>> import asyncio
            >>> from tidemill import tool
            >>> @tool
            ... def add(a: int, b: int) -> int:
            ...     '''Add two numbers.'''
            ...     return a + b
            >>> asyncio.run(add.arun(a=2, b=3)).content
            '5'
        """
        if context is None:
            call_id = "direct_" + secrets.token_hex(6)
            context = ToolContext(thread_id="direct", call_id=call_id, tool_name=self.name)
        value = await self.acall(self.validate(arguments), context)
        failed = isinstance(value, ToolReturn) and value.is_error
        shown = value.value if isinstance(value, ToolReturn) else value
        return ToolResult(
            call_id=context.call_id, name=self.name, content=self.render(shown), is_error=failed
        )

    def run(self, context: ToolContext | None = None, /, **arguments: Any) -> ToolResult:
        """Blocking `arun`, for code that is not inside an event loop.

        Raises:
            ToolArgumentsError: When the arguments do not fit the schema.
            ConfigurationError: When called inside a running event loop.

        Examples:
            >>> from tidemill import tool
            >>> @tool
            ... def shout(text: str) -> str:
            ...     '''Upper-case the text.'''
            ...     return text.upper()
            >>> shout.run(text="hi").content
            'HI'
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(context, **arguments))
        raise ConfigurationError(
            f"Tool {self.name!r} was run with the blocking run() inside an event loop.",
            hint="Use `await tool.arun(...)` there.",
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class FunctionTool(Tool, Generic[P, R]):
    """A tool made from a Python function, usually by `@tool`.

    The schema comes from the type hints and the docstring's `Args:` section;
    the function stays callable as before.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
    ) -> None:
        self._wrapped = function
        tool_name = name or str(getattr(function, "__name__", ""))
        if tool_name == "<lambda>":
            raise ConfigurationError(
                "A lambda has no name a model could call it by.",
                hint="Use a def, or give it one with @tool(name=...) or Tool(fn, name=...).",
            )
        doc = parse_docstring(inspect.getdoc(function))
        self._args_model, self._context_param = _arguments_model(function, tool_name, doc.params)
        schema = _clean_schema(self._args_model.model_json_schema())
        super().__init__(
            function,
            name=tool_name,
            description=description if description is not None else doc.description,
            parameters=schema,
            requires_approval=requires_approval,
        )
        self.__doc__ = function.__doc__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._wrapped(*args, **kwargs)

    @property
    def function(self) -> Callable[P, R]:
        """The function it was made from."""
        return self._wrapped

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        """Validate with the pydantic model built from the type hints."""
        try:
            model = self._args_model.__pydantic_validator__.validate_python(arguments)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(
                self.name,
                [
                    f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                ],
            ) from None
        return dict(model.__dict__)

    def acall(self, arguments: dict[str, Any], context: ToolContext) -> Coroutine[Any, Any, object]:
        """Call the function, adding the `ToolContext` if it asks for one.

        Returns the call's own coroutine rather than one that awaits it: one
        coroutine less on every tool call an agent makes.
        """
        if self._context_param is not None:
            arguments = {**arguments, self._context_param: context}
        return _invoke(self._wrapped, arguments, self._blocking)


def render_result(value: object) -> str:
    """Render a tool's return value as text: strings as they are, the rest as JSON.

    Examples:
        >>> render_result({"total": 3})
        '{"total":3}'
    """
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value, fallback=str).decode()
    except pydantic_core.PydanticSerializationError:
        return repr(value)


_AsyncFunction = Callable[..., Coroutine[Any, Any, object]]


def _invoke(
    function: Callable[..., object],
    arguments: dict[str, Any],
    blocking: SyncFunction[object] | None,
) -> Coroutine[Any, Any, object]:
    """The call's coroutine: an async function's own, or the sync one's `SyncFunction.call`."""
    if blocking is None:
        return cast(_AsyncFunction, function)(**arguments)
    return blocking.call(arguments)


def _is_async(function: Callable[..., object]) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    # A callable object whose __call__ is async.
    return inspect.iscoroutinefunction(type(function).__call__)


def _arguments_model(
    function: Callable[..., object], tool_name: str, docs: Mapping[str, str]
) -> tuple[type[pydantic.BaseModel], str | None]:
    try:
        signature = inspect.signature(function)
        # A callable object's hints live on its __call__.
        hinted = function if inspect.isroutine(function) else type(function).__call__
        hints = get_type_hints(hinted)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigurationError(
            f"Cannot read the signature of tool {tool_name!r}: {exc}",
            hint="Use a plain function with type hints that resolve at import time.",
        ) from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"Tool {tool_name!r} has a parameter {param.name!r} the model cannot fill.",
                hint="Tools take named parameters only: no *args, **kwargs or positional-only.",
            )
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext or get_origin(annotation) is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default=default, description=docs.get(param.name)),
        )
    model = pydantic.create_model(
        f"{tool_name}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    return cast(type[pydantic.BaseModel], model), context_param


def _clean_schema(schema: dict[str, Any]) -> dict[str, JsonValue]:
    """Drop pydantic's generated titles: noise to a model, and tokens to pay for."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return cast(dict[str, JsonValue], schema)
