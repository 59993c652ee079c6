"""Google: the Gemini API (AI Studio and Vertex AI), its schema dialect, and Google Cloud auth.

Who owns what: `_gemini` builds `generateContent` requests (`GeminiModel`,
`VertexGeminiModel`), `_wire` holds their body's types and `_stream` parses
the answers, whole or streamed; `_schema` turns JSON Schema into the subset
Gemini's function declarations take; `_auth` is the Google Cloud plumbing
(Vertex AI projects, locations, tokens, and Google's errors), shared with
Claude on Vertex (`tidemill.llm.anthropic._vertex`).
"""
