"""OpenAI wire formats: Chat Completions and its vendor dialects, the Responses API, and Azure.

Who owns what: `_chat` builds Chat Completions requests (`OpenAIChatModel`),
`_chat_wire` holds their body's types and `_chat_stream` parses the answers,
whole or streamed; `_dialects` says how each OpenAI-compatible vendor
(Mistral, DeepSeek, Groq, ...) differs; `_azure` is the Chat Completions
adapter at an Azure deployment's URL. `_responses`, `_responses_wire` and
`_responses_stream` are the same three for the Responses API.
"""
