"""OpenAI wire formats: Chat Completions and its vendor dialects, the Responses API, and Azure."""
