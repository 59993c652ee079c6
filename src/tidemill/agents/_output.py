"""`OutputSpec`: a run's final answer parsed and validated against a type or JSON Schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pydantic
from pydantic import JsonValue, TypeAdapter

from tidemill.errors import ConfigurationError
from tidemill.llm import OutputFormat
from tidemill.llm._strict_schema import inline_root_ref, strict_json_schema

__all__ = ["OutputSpec"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class OutputSpec:
    r"""How a final answer must look, and how to tell the model when it does not.

    Build one with `OutputSpec.of(type_or_schema)`: a pydantic model (or any
    type pydantic understands) gives back validated instances; a JSON Schema
    dict gives back the validated JSON value.

    When the schema's root is an object, `format` carries it to models that
    take a native output format (`Model.supports_output_format`): OpenAI's
    `json_schema`, Gemini's `responseSchema`, a forced tool on Anthropic and
    Bedrock. The answer is validated here all the same, and an invalid one
    is sent back for correction (`retries`).

    Examples:
        >>> from pydantic import BaseModel
        >>> class City(BaseModel):
        ...     name: str
        ...     population: int
        >>> spec = OutputSpec.of(City)
        >>> spec.parse('```json\n{"name": "Lyon", "population": 522250}\n```')
        ({'name': 'Lyon', 'population': 522250}, [])
        >>> spec.load({"name": "Lyon", "population": 522250})
        City(name='Lyon', population=522250)
        >>> spec.parse('{"name": "Lyon"}')[1]
        ['population: Field required']
        >>> spec.format.name, spec.format.strict
        ('final_answer', False)
    """

    schema: dict[str, JsonValue]
    """The JSON Schema the answer must match; sent to the model."""
    retries: int = 2
    """How many invalid answers the model may correct before the run fails."""
    strict: bool = False
    """Ask for OpenAI's strict mode (the schema must fit its strict subset)."""
    _adapter: TypeAdapter[Any] | None = field(default=None, repr=False, compare=False)
    format: OutputFormat | None = field(init=False, repr=False, compare=False)
    """The native output format sent to models that take one; `None` when the
    schema's root is not an object (forced tools and OpenAI need one)."""

    def __post_init__(self) -> None:
        output_format = None
        schema = inline_root_ref(self.schema)
        if schema.get("type") == "object":
            output_format = OutputFormat(schema=schema, strict=self.strict)
        object.__setattr__(self, "format", output_format)

    @classmethod
    def of(
        cls,
        output: type[Any] | Mapping[str, JsonValue],
        *,
        retries: int = 2,
        strict: bool = False,
    ) -> OutputSpec:
        """Build a spec from a type or a JSON Schema.

        Args:
            output: A pydantic model (or any type pydantic understands), or a JSON Schema.
            retries: How many invalid answers the model may correct.
            strict: Send the schema in OpenAI's strict mode (other providers ignore it).

        Raises:
            ConfigurationError: When the schema is invalid, the type has no
                schema, or `strict` is asked for a schema that cannot be strict.
        """
        if retries < 0:
            raise ConfigurationError("Output retries must not be negative.")
        spec = cls._of(output, retries)
        if strict:
            strict_json_schema(spec.schema)  # refuse now, not at the first model call
            spec = cls(schema=spec.schema, retries=retries, strict=True, _adapter=spec._adapter)
        return spec

    @classmethod
    def _of(cls, output: type[Any] | Mapping[str, JsonValue], retries: int) -> OutputSpec:
        if isinstance(output, Mapping):
            schema = dict(output)
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ConfigurationError(
                    f"The output schema is not a valid JSON Schema: {exc.message}",
                    hint="Pass a pydantic model, or a JSON Schema dict.",
                ) from None
            return cls(schema=schema, retries=retries)
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output)
            schema = adapter.json_schema()
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
            raise ConfigurationError(
                f"Cannot use {output!r} as an output type: {exc}",
                hint="Use a pydantic model, a dataclass, a TypedDict, or a JSON Schema dict.",
            ) from None
        return cls(schema=schema, retries=retries, _adapter=adapter)

    @property
    def instructions(self) -> str:
        """What the model is told about the answer's shape."""
        return (
            "When you give your final answer, reply with only a JSON value that matches "
            f"this JSON Schema, and nothing else:\n{json.dumps(self.schema)}"
        )

    def parse(self, text: str) -> tuple[JsonValue, list[str]]:
        """Parse and validate a final answer: the JSON value, or the problems found."""
        fenced = _FENCE.match(text)
        raw = fenced.group(1) if fenced else text.strip()
        try:
            value: JsonValue = json.loads(raw)
        except ValueError as exc:
            return None, [f"the answer is not JSON: {exc}"]
        if self.strict:
            value = _nulls_left_out(value, self.schema)
        if self._adapter is not None:
            try:
                checked = self._adapter.validate_python(value)
            except pydantic.ValidationError as exc:
                return None, [
                    f"{'.'.join(str(p) for p in e['loc']) or '(answer)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                ]
            return self._adapter.dump_python(checked, mode="json"), []
        validator = jsonschema.validators.validator_for(self.schema)(self.schema)
        problems = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(answer)'}: {e.message}"
            for e in validator.iter_errors(value)
        ]
        return (None, sorted(problems)) if problems else (value, [])

    def load(self, value: JsonValue) -> Any:
        """Turn a validated JSON value back into the output type."""
        return value if self._adapter is None else self._adapter.validate_python(value)

    def feedback(self, errors: list[str]) -> str:
        """What the model is told when its answer did not validate."""
        return (
            "Your answer did not match the required JSON Schema: "
            + "; ".join(errors)
            + ". Reply again with only the corrected JSON value."
        )


def _nulls_left_out(value: JsonValue, schema: dict[str, JsonValue]) -> JsonValue:
    """`value` without the properties that are null where the schema takes no null.

    In strict mode an optional property is sent nullable (`strict_json_schema`),
    OpenAI's way to let the model leave it out: such a null means "left out".
    """
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = list(validator.iter_errors(value))
    paths = []
    while errors:  # with the errors of `anyOf` branches, for a union of objects
        error = errors.pop()
        errors.extend(error.context or ())
        if error.instance is None and error.absolute_path:
            paths.append(list(error.absolute_path))
    for *parents, key in paths:
        parent: JsonValue = value
        for part in parents:
            parent = parent[part]  # type: ignore[index]
        if isinstance(parent, dict) and isinstance(key, str):
            parent.pop(key, None)
    return value
