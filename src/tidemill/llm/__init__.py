"""The provider layer: one `Model` interface over every LLM vendor.

Spec strings become models at the edge (`resolve_model("openai:gpt-4o-mini")`);
each HTTP adapter speaks one wire format directly with `httpx`:

- `OpenAIChatModel`: OpenAI Chat Completions, and the OpenAI-compatible
  vendors through an `OpenAIDialect` (Mistral, DeepSeek, Groq, Together,
  OpenRouter, Ollama, vLLM, any base URL); `AzureOpenAIModel` is the same
  adapter at an Azure deployment's URL;
- `OpenAIResponsesModel`: the OpenAI Responses API;
- `AnthropicModel`: the Anthropic Messages API; `AnthropicVertexModel` is
  the same body and parsers at Vertex AI's `rawPredict`;
- `GeminiModel` and `VertexGeminiModel`: Gemini's `generateContent`, on the
  Gemini API and on Vertex AI;
- `BedrockModel`: Amazon Bedrock's Converse API (SigV4-signed, or a Bedrock
  API key), its streams in AWS event-stream framing;
- `ScriptedModel`: offline and deterministic, for tests and demos; with no
  script it answers `offline_answer` (an echo, or a value of the schema asked for).

Structured output: `ModelRequest(..., output_format=OutputFormat(name,
schema, strict=...))` asks for JSON text of a shape, in each vendor's own
form (OpenAI `response_format`/`text.format`, Gemini `responseSchema`, a
forced tool on Anthropic and Bedrock, whose call comes back as the text);
`strict=True` rewrites the schema for OpenAI's strict mode
(`strict_json_schema`).

`ModelAliases` maps the names others use (a proxy client, a flow's step)
to the models that serve them, `*` for every name.

Embeddings: `resolve_embedder("openai:text-embedding-3-small")` gives an
`EmbeddingModel` whose `aembed(texts)` returns `Embeddings` (vectors, model,
priced usage), for OpenAI and the compatible vendors, Gemini, Bedrock and
Ollama, or `"fake"` (`HashingEmbedder`) offline; see `tidemill.llm.embeddings`.

`FallbackModel` wraps several models and tries the next when one is rate
limited or down (`resolve_model([...])` builds one). Every HTTP adapter
prices its answers (`Usage.cost_usd`) with the optional `genai-prices`
package, or counts them in `Usage.unpriced_requests`.

Who owns what: one subpackage per wire format family, each a request
builder with its wire types (`_wire`) and a response and stream parser
(`_stream`): `openai` (Chat Completions `_chat*` with the vendor dialects
`_dialects` and Azure `_azure`, the Responses API `_responses*`),
`anthropic` (the Messages API `_adapter`, and Claude on Vertex AI
`_vertex`), `google` (Gemini `_gemini`, its schema subset `_schema`, and
the Google Cloud projects, tokens and errors in `_auth`, which Claude on
Vertex uses too), `bedrock` (the Converse API `_adapter`, AWS regions and
credentials `_aws`). `http` is the HTTP machinery they share: the client
with retries, deadlines and typed errors (`_client`), the lean HTTP/1.1
transport under it (`_transport`, `_connection`, `_response`), SSE and AWS
event-stream decoding (`_sse`, `_eventstream`) and SigV4 signing
(`_sigv4`). `proxy` serves any model behind OpenAI's API, above the
families. The core stays here: the `Model` interface (`_model`), the
`HttpModel` base every adapter extends (`_adapter`), which prices each
answer through `_pricing`, keys and base URLs (`_credentials`), typed
provider failures (`_failures`), `RetryPolicy` (`_retry`), structured output
helpers (`_strict_schema`, `_forced_output`), the request fields beyond the
typed ones and what each API makes of them (`_options`, with each family's
`_fields`), a tool choice beside a forced output tool (`_tool_choice`), response assembly
(`_assembly`), `FallbackModel` (`_fallback`), `ScriptedModel` (`_scripted`)
and its answer with no script (`_offline`), the spec strings that pick a
model (`_spec`) and the aliases that stand for them (`_aliases`).
"""

from tidemill.llm._adapter import HttpCall, HttpModel, StreamParser
from tidemill.llm._aliases import EVERY_MODEL, ModelAliases
from tidemill.llm._credentials import Credentials, CredentialSource
from tidemill.llm._fallback import FallbackModel, should_fall_back
from tidemill.llm._model import (
    ForcedTool,
    Model,
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    OutputFormat,
    ToolChoice,
)
from tidemill.llm._offline import offline_answer
from tidemill.llm._options import UnsupportedOption
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._scripted import Answer, Handler, ScriptedModel
from tidemill.llm._spec import (
    DEFAULT_MODELS,
    KNOWN_PROVIDERS,
    ModelSpec,
    parse_model_spec,
    resolve_model,
)
from tidemill.llm._strict_schema import strict_json_schema
from tidemill.llm.anthropic._adapter import AnthropicModel
from tidemill.llm.anthropic._vertex import AnthropicVertexModel
from tidemill.llm.bedrock._adapter import BedrockModel
from tidemill.llm.embeddings import (
    EmbeddingModel,
    Embeddings,
    HashingEmbedder,
    resolve_embedder,
)
from tidemill.llm.google._gemini import GeminiModel, VertexGeminiModel
from tidemill.llm.http._client import new_http_client
from tidemill.llm.http._sse import ServerSentEvent, SSEDecoder
from tidemill.llm.openai._azure import AzureOpenAIModel
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.openai._dialects import DIALECTS, OpenAIDialect
from tidemill.llm.openai._responses import OpenAIResponsesModel

__all__ = [
    "DEFAULT_MODELS",
    "DIALECTS",
    "EVERY_MODEL",
    "KNOWN_PROVIDERS",
    "Answer",
    "AnthropicModel",
    "AnthropicVertexModel",
    "AzureOpenAIModel",
    "BedrockModel",
    "CredentialSource",
    "Credentials",
    "EmbeddingModel",
    "Embeddings",
    "FallbackModel",
    "ForcedTool",
    "GeminiModel",
    "Handler",
    "HashingEmbedder",
    "HttpCall",
    "HttpModel",
    "Model",
    "ModelAliases",
    "ModelRequest",
    "ModelSettings",
    "ModelSpec",
    "ModelStreamEvent",
    "OpenAIChatModel",
    "OpenAIDialect",
    "OpenAIResponsesModel",
    "OutputFormat",
    "RetryPolicy",
    "SSEDecoder",
    "ScriptedModel",
    "ServerSentEvent",
    "StreamParser",
    "ToolChoice",
    "UnsupportedOption",
    "VertexGeminiModel",
    "new_http_client",
    "offline_answer",
    "parse_model_spec",
    "resolve_embedder",
    "resolve_model",
    "should_fall_back",
    "strict_json_schema",
]
