"""What a model call cost: `Usage.cost_usd` from the `genai-prices` package.

Prices come from `genai-prices` (pydantic's maintained price list, bundled
with the package and never fetched at run time). It is an optional extra,
`pip install 'tidemill[prices]'`: it is pure Python but not light (a 1.6 MB
price table and a second HTTP client stack). Without it, or for a model or
provider it does not know (a local Ollama, a custom base URL, a fine-tune),
a call is counted in `Usage.unpriced_requests` instead, so a total never
passes an unknown price off as zero.

Tidemill's `Usage` and the package agree on what the token counts mean:
`input_tokens` includes the cache reads and writes, which are priced at
their own rates where the price list has them, and `output_tokens`
includes the reasoning tokens (passed too, for models that price them apart).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Mapping
from types import ModuleType

from tidemill.types import Usage

__all__ = ["PRICE_PROVIDERS", "load_prices", "price_usage", "prices_available"]

PRICE_PROVIDERS: Mapping[str, str] = {
    "openai": "openai",
    "openai-responses": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    # Claude and Gemini on Vertex AI are billed by Google, at Google's list prices.
    "anthropic-vertex": "google",
    "gemini": "google",
    "vertex": "google",
    "bedrock": "aws",
    "mistral": "mistral",
    "deepseek": "deepseek",
    "groq": "groq",
    "together": "together",
    "openrouter": "openrouter",
}
"""Tidemill provider → `genai-prices` provider id. Providers missing here
(`ollama`, `vllm`, `openai-compatible`) have no list price: their calls are unpriced."""


@functools.cache
def _package() -> ModuleType | None:
    try:
        import genai_prices
    except ImportError:
        return None
    return genai_prices


def prices_available() -> bool:
    """Whether the `genai-prices` package is installed (the `prices` extra)."""
    return _package() is not None


@functools.cache
def load_prices() -> None:
    """Import the package and read its price table, once per process.

    It takes most of a second, so models do it when they are built rather
    than on an event loop in the middle of their first call.
    """
    package = _package()
    if package is None:
        return
    # Any lookup reads the whole table; whether it finds the model does not matter.
    with contextlib.suppress(LookupError, ValueError):
        package.calc_price(package.Usage(input_tokens=1), "gpt-4o", provider_id="openai")


def price_usage(usage: Usage, *, provider: str, models: Iterable[str | None]) -> Usage:
    """Return `usage` with its cost, or counted as unpriced when the price is not known.

    Args:
        usage: The tokens of one call, as a parser read them.
        provider: The Tidemill provider name (`openai`, `bedrock`, ...).
        models: Model ids to look up, best first: the id the provider
            reported (`gpt-4o-mini-2024-07-18`), then the one requested.

    Examples:
        >>> used = Usage(requests=1, input_tokens=10, output_tokens=2)
        >>> price_usage(used, provider="ollama", models=["llama3.2"]).unpriced_requests
        1
    """
    # No usage reported: its cost is unknown, not the price of zero tokens.
    cost = None if usage.unreported_requests else _cost(usage, provider, models)
    if cost is None:
        return usage.model_copy(update={"cost_usd": 0.0, "unpriced_requests": usage.requests or 1})
    return usage.model_copy(update={"cost_usd": cost, "unpriced_requests": 0})


def _cost(usage: Usage, provider: str, models: Iterable[str | None]) -> float | None:
    package = _package()
    provider_id = PRICE_PROVIDERS.get(provider)
    if package is None or provider_id is None:
        return None
    tokens = package.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_reasoning_tokens=usage.reasoning_tokens,
    )
    for model in dict.fromkeys(m for m in models if m):
        try:
            calculation = package.calc_price(tokens, model, provider_id=provider_id)
        except LookupError:
            continue  # not in the price list under this name; try the next one
        except (ValueError, ArithmeticError):
            return None  # counts the package refuses (cache tokens above the input)
        return float(calculation.total_price)
    return None
