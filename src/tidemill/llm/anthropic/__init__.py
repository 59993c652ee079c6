"""The Anthropic Messages API: its request builder, response and stream parsers, and Vertex AI."""
