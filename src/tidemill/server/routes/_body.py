"""`Body`: the base of every request body the API reads.

A field the API does not know is refused (422, naming it) rather than
dropped: a client that misspells `edited_arguments` as `arguments` would
otherwise approve the model's arguments while believing it changed them.

Examples:
    >>> import pydantic
    >>> class NoteIn(Body):
    ...     text: str
    >>> NoteIn(text="hi").text
    'hi'
    >>> try:
    ...     NoteIn.model_validate({"text": "hi", "txet": "typo"})
    ... except pydantic.ValidationError as exc:
    ...     print(exc.errors()[0]["type"], exc.errors()[0]["loc"])
    extra_forbidden ('txet',)
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Body"]


class Body(BaseModel):
    """A request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
