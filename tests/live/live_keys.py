"""Real vendor keys, read from the shell when the live tests are collected.

Collection happens before any fixture runs, so these are the developer's keys
even though every test starts with the vendor variables cleared.
"""

from __future__ import annotations

import os

LIVE_KEYS = {
    name: os.environ[name]
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "MISTRAL_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
    )
    if os.environ.get(name)
}
