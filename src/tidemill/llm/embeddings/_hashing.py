"""`HashingEmbedder`: offline, deterministic vectors from the words of a text."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm.embeddings._base import EmbeddingModel, Embeddings, Vector, check_texts
from tidemill.types import Usage

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(EmbeddingModel):
    """Embeds with no model and no network: each word is hashed into one of `dimensions` slots.

    Texts that share words get vectors that point the same way, so "What is
    the capital of France?" lands nearer "Paris is the capital of France"
    than "Sort this list". Vectors are L2-normalised, and the same text
    always gives the same vector, in every process: for tests and demos, not
    for meaning (synonyms share no slot). `resolve_embedder("fake")` makes one.

    Args:
        dimensions: The length of each vector.

    Examples:
        >>> import asyncio
        >>> fake = HashingEmbedder(dimensions=64)
        >>> found = asyncio.run(fake.aembed(["the cat sat", "the cat sat", "stock prices"]))
        >>> a, b, c = found.vectors
        >>> a == b, round(sum(x * x for x in a), 6), found.usage.input_tokens
        (True, 1.0, 8)
        >>> sum(x * y for x, y in zip(a, c)) < sum(x * y for x, y in zip(a, b))
        True
    """

    provider = "fake"

    def __init__(self, *, dimensions: int = 256) -> None:
        if dimensions < 8:
            raise ConfigurationError(
                f"A hashing embedder needs at least 8 dimensions, not {dimensions}.",
                hint="Pass dimensions=256 (the default) or more.",
            )
        self.dimensions = dimensions
        self.model_name = f"hashing-{dimensions}"

    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts`; `usage.input_tokens` counts their words, and nothing costs anything."""
        found = check_texts(texts)
        vectors = [self._vector(text) for text in found]
        words = sum(len(_WORD.findall(text)) for text in found)
        usage = Usage(requests=1 if found else 0, input_tokens=words)
        return Embeddings(tuple(vectors), model=self.model_name, usage=usage)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the embedder."""
        return {**super().describe(), "dimensions": self.dimensions}

    def _vector(self, text: str) -> Vector:
        slots = [0.0] * self.dimensions
        for word in _WORD.findall(text.casefold()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            number = int.from_bytes(digest, "big")
            # A sign bit of its own keeps colliding words from always adding up.
            slots[number % self.dimensions] += 1.0 if number >> 63 else -1.0
        norm = math.sqrt(sum(x * x for x in slots))
        if norm == 0.0:  # no word at all (punctuation only): a fixed unit vector
            slots[0], norm = 1.0, 1.0
        return tuple(x / norm for x in slots)
