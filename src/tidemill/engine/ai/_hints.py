"""The hints of an AI step's errors, in the words of a flow file rather than the Python API.

The provider layer's errors tell a library user what to pass
(`api_key=`, `base_url=`, `project=`). A flow's AI step has no such
arguments: its key comes from the worker's environment, or from the variable
its `api_key: env:NAME` names, and its endpoint from its `base_url`. The
agent host translates a hint when it records the error of a step
(`step_error`); the error raised to a library user keeps its own hint.

Each rule below rewrites one phrase the provider layer uses; a hint with
none of them (a did-you-mean, "try again") is kept as it is.
"""

from __future__ import annotations

import re

from tidemill.errors import TidemillError

__all__ = ["flow_hint"]

_KEY = "`api_key: env:NAME` in the step's model settings"
_ON_WORKER = "in the worker's environment"

_ANOTHER_KEY = f"or read the key from another variable with {_KEY}"
_STEP_KEY = "the variable of the step's `api_key: env:NAME`"

_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        # "Set the OPENAI_API_KEY environment variable, or pass api_key= (or credentials=...)."
        (r"^Set the (\w+) environment variable, or pass api_key=.*$",
         rf"Set \1 {_ON_WORKER}, {_ANOTHER_KEY}."),
        # "Set GEMINI_API_KEY (or GOOGLE_API_KEY), or pass api_key=."
        (r"^Set (.+?), or pass api_key=\.?$", rf"Set \1 {_ON_WORKER}, {_ANOTHER_KEY}."),
        # "Set AZURE_OPENAI_ENDPOINT to https://..., or pass base_url=."
        (r"^Set (.+?), or pass base_url=\.?$",
         rf"Set \1 {_ON_WORKER}, or give the step a `base_url` in its model settings."),
        # "Pass base_url='https://host/v1' or set OPENAI_COMPATIBLE_BASE_URL."
        (r"^Pass base_url='([^']*)' or set (\w+)\.?$",
         rf"Give the step a `base_url` (e.g. \1) in its model settings, or set \2 {_ON_WORKER}."),
        # "Set GOOGLE_CLOUD_PROJECT, or pass project=.", and the other arguments flows lack
        (r"^(.+?),? or pass [a-z_]+=[^.]*\.", rf"\1 {_ON_WORKER}."),
        # "Check the API key (the OPENAI_API_KEY variable or api_key=) and ..."
        (r"\(([^()]*?),? or api_key=\)", rf"(\1 on the worker, or {_STEP_KEY})"),
        # "Check the access token (access_token= or GOOGLE_OAUTH_ACCESS_TOKEN); ..."
        (r"\([a-z_]+= or (\w+)\)", r"(\1 on the worker)"),
        (r"Raise the model's timeout=, or try again\.",
         "Try again; a `retry` on the step does so by itself."),
        (r"Check base_url=\.", "Check the step's `base_url`."),
    )
)  # fmt: skip


def flow_hint(error: TidemillError) -> str | None:
    """`error`'s hint as a flow's author acts on it: keys on the worker, settings on the step.

    Examples:
        >>> from tidemill.errors import MissingCredentialsError
        >>> flow_hint(MissingCredentialsError(
        ...     "No API key for the openai provider.",
        ...     hint="Set the OPENAI_API_KEY environment variable, or pass api_key= "
        ...     "(or credentials=Credentials(api_key=...)).",
        ... ))
        "Set OPENAI_API_KEY in the worker's environment, or read the key from another variable with `api_key: env:NAME` in the step's model settings."
        >>> flow_hint(TidemillError("Unknown model provider.", hint="Did you mean 'openai'?"))
        "Did you mean 'openai'?"
    """  # noqa: E501
    hint = error.hint
    if not hint:
        return hint
    for pattern, replacement in _RULES:
        hint = pattern.sub(replacement, hint)
    return hint
