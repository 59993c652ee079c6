"""`EmbeddingModel`: texts in, vectors out; `HttpEmbedder`, the core of the HTTP adapters.

An embedding adapter has two jobs: build the HTTP call for a batch of
texts, and read the vectors and token counts out of the answer.
`HttpEmbedder` does the rest once for all of them: credentials, the shared
HTTP client (retries, deadlines, typed errors with secrets scrubbed),
splitting a long list into the batches a vendor accepts, checking that
every text got a vector, and pricing each batch (`Usage.cost_usd`, through
`tidemill.llm._pricing`, as chat answers are priced).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from tidemill.errors import ConfigurationError, ProviderError
from tidemill.llm._adapter import HttpCall, HttpEndpoint
from tidemill.llm._failures import retyped
from tidemill.llm._json import JsonObject
from tidemill.llm._pricing import price_usage
from tidemill.types import Usage

__all__ = ["Batch", "EmbeddingModel", "Embeddings", "HttpEmbedder", "Vector"]

Vector = tuple[float, ...]
"""One embedding."""


def _no_usage() -> Usage:
    return Usage()


@dataclass(frozen=True, slots=True)
class Embeddings:
    """The vectors of a batch of texts, in the order the texts were given.

    Examples:
        >>> found = Embeddings(((1.0, 0.0),), model="m")
        >>> found.dimensions, len(found)
        (2, 1)
    """

    vectors: tuple[Vector, ...]
    """One vector per text, in order."""
    model: str
    """The model id that made them (as the provider reported it, when it did)."""
    usage: Usage = field(default_factory=_no_usage)
    """What embedding them cost: requests, input tokens, `cost_usd`."""

    @property
    def dimensions(self) -> int:
        """The length of each vector (0 for no vectors)."""
        return len(self.vectors[0]) if self.vectors else 0

    def __len__(self) -> int:
        return len(self.vectors)


class EmbeddingModel(ABC):
    """Turns texts into vectors whose closeness means closeness of meaning.

    Build one with `resolve_embedder("openai:text-embedding-3-small")`, or
    `resolve_embedder("fake")` offline. Subclass it for another backend:
    implement `aembed`.
    """

    provider: str
    """The provider's name, as in a spec string (`openai`, `gemini`, `fake`, ...)."""
    model_name: str
    """The model id sent to the provider."""

    @abstractmethod
    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts`, one vector each, in order.

        Raises:
            ConfigurationError: For an empty or non-string text.
            ProviderError: Or a subclass, when the provider refuses or fails the call.
        """

    async def aclose(self) -> None:
        """Release what the model holds (its HTTP client); nothing by default."""
        return None

    def describe(self) -> dict[str, JsonValue]:
        """A JSON-safe description (never a key)."""
        return {"provider": self.provider, "model": self.model_name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider}:{self.model_name})"


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, refusing what no vendor embeds.

    Raises:
        ConfigurationError: For a bare string, a non-string, or an empty text.

    Examples:
        >>> check_texts(("a", "b"))
        ['a', 'b']
        >>> check_texts("ab")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: aembed() takes a list of texts, not one string. ...
    """
    if isinstance(texts, str):
        raise ConfigurationError(
            "aembed() takes a list of texts, not one string.",
            hint="Wrap it: aembed([text]).",
        )
    found = list(texts)
    for position, text in enumerate(found):
        if not isinstance(text, str):
            raise ConfigurationError(
                f"Text {position} to embed is a {type(text).__name__}, not a str.",
                hint="Pass strings only.",
            )
        if not text.strip():
            raise ConfigurationError(
                f"Text {position} to embed is empty; providers refuse empty input.",
                hint="Leave empty texts out before embedding.",
            )
    return found


@dataclass(frozen=True, slots=True)
class Batch:
    """What one response carried: the vectors, the model that made them, the tokens read."""

    vectors: list[Vector]
    model: str | None = None
    input_tokens: int | None = None
    """None when the provider reports no token count."""


class HttpEmbedder(HttpEndpoint, EmbeddingModel):
    """An `EmbeddingModel` that calls a provider's HTTP API.

    Subclasses implement `build_call` and `parse_batch`, and may lower
    `max_batch` to what the vendor takes in one request; `translate_error`
    re-types a vendor's failures.

    It is built as `tidemill.llm._adapter.HttpEndpoint` is (the model id, the
    provider, credentials, HTTP client, timeout, retry policy and auth hint).
    """

    max_batch: int = 256
    """Texts sent in one request at most; a longer list is split."""

    def check_model_name(self, model_name: str, provider: str) -> None:
        """Refuse an empty model id: embeddings have no default model at this level.

        Raises:
            ConfigurationError: For an empty or blank id.
        """
        if not model_name.strip():
            raise ConfigurationError(
                f"No embedding model id was given for the {provider} provider.",
                hint=f"Write it as '{provider}:<model id>'.",
            )

    @abstractmethod
    def build_call(self, texts: Sequence[str]) -> HttpCall:
        """The HTTP request that embeds `texts` (at most `max_batch` of them)."""

    @abstractmethod
    def parse_batch(self, payload: JsonObject) -> Batch:
        """Read the vectors (and token count) out of one response body.

        Raises:
            ProviderError: When the body is not the vendor's documented shape.
        """

    async def send(self, call: HttpCall) -> JsonObject:
        """POST one call, its failures re-typed by `translate_error`.

        Adapters that sign requests override `prepared`.
        """
        with retyped(self.translate_error):
            call = await self.prepared(call)
            return await self.http.post_json(call.url, call.body, headers=call.headers)

    async def prepared(self, call: HttpCall) -> HttpCall:
        """The call as sent (signed, for adapters that sign); `call` itself by default."""
        return call

    def translate_error(self, error: ProviderError) -> ProviderError:
        """The error to raise for `error`; `error` itself by default."""
        return error

    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` in batches of `max_batch`; see `EmbeddingModel.aembed`."""
        found = check_texts(texts)
        vectors: list[Vector] = []
        usage = Usage()
        model = self.model_name
        for start in range(0, len(found), self.max_batch):
            chunk = found[start : start + self.max_batch]
            batch = self.parse_batch(await self.send(self.build_call(chunk)))
            if len(batch.vectors) != len(chunk):
                raise ProviderError(
                    f"{self.provider} answered {len(batch.vectors)} embedding(s) "
                    f"for {len(chunk)} text(s).",
                    provider=self.provider,
                    retryable=True,
                    hint="The answer was incomplete; try again.",
                )
            vectors += batch.vectors
            model = batch.model or model
            usage += self._priced(batch)
        return Embeddings(tuple(vectors), model=model, usage=usage)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model: provider, model id and base URL (never the key)."""
        return {**super().describe(), "base_url": self.credentials.base_url}

    def _priced(self, batch: Batch) -> Usage:
        reported = batch.input_tokens is not None
        used = Usage(
            requests=1,
            input_tokens=batch.input_tokens or 0,
            unreported_requests=0 if reported else 1,
        )
        return price_usage(used, provider=self.provider, models=(batch.model, self.model_name))


def float_vector(value: object, provider: str, where: str) -> Vector:
    """A JSON array of numbers as a vector.

    Raises:
        ProviderError: When `value` is not a non-empty list of numbers.

    Examples:
        >>> float_vector([1, 0.5], "demo", "data[0].embedding")
        (1.0, 0.5)
    """
    if (
        isinstance(value, list)
        and value
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value)
    ):
        return tuple(float(x) for x in value)
    raise no_embedding(provider, where)


def no_embedding(provider: str, where: str) -> ProviderError:
    """The error of an answer with no embedding at `where` (retryable: it was cut or garbled)."""
    return ProviderError(
        f"{provider} sent no embedding at {where}.",
        provider=provider,
        retryable=True,
        hint="The answer was not the documented shape; try again, or report it.",
    )


def json_list(payload: JsonObject, key: str, provider: str) -> list[object]:
    """`payload[key]` when it is a list.

    Raises:
        ProviderError: When it is missing or not a list.
    """
    value = payload.get(key)
    if isinstance(value, list):
        return value
    raise ProviderError(
        f"{provider}'s answer has no {key!r} list.",
        provider=provider,
        retryable=True,
        hint="The answer was not the documented shape; try again, or report it.",
    )


def int_field(payload: object, key: str) -> int | None:
    """`payload[key]` when `payload` is an object and the value an int."""
    if isinstance(payload, dict):
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
