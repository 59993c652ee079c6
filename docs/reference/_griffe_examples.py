"""A griffe extension for the API reference: `Example:` sections as examples.

Tidemill's docstrings head their doctests `Example:`. Griffe's Google parser
knows `Examples:` as a section and reads anything else as an admonition, whose
body is Markdown: `>>>` lines would render as nested quotes and a doctest's
output as text (where `['a', 'b']` reads as a link). This extension renames the
heading before the docstring is parsed, so the doctests render as code.
Once the docstrings say `Examples:`, it does nothing and can be removed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename `Example:` headings to `Examples:` in every docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the object's docstring, before anything parses it."""
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
