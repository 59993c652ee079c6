"""Google: the Gemini API (AI Studio and Vertex AI), its schema dialect, and Google Cloud auth."""
