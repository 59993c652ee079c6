"""The Anthropic Messages API: its request builder, response and stream parsers, and Vertex AI.

Who owns what: `_adapter` builds Messages requests (`AnthropicModel`),
`_wire` holds their body's types and `_stream` parses the answers, whole or
streamed; `_vertex` sends the same body to Vertex AI (`AnthropicVertexModel`),
with Google Cloud's projects, tokens and errors from `tidemill.llm.google._auth`
(the one import between families, named in the import-linter contract).
"""
