r"""Text every layer can store and send: valid Unicode, without lone surrogates.

A Python `str` can hold a surrogate code point that no UTF-8 text can: bytes
decoded with `errors="surrogateescape"` (file names from `os.listdir`, a
subprocess's output) become one, and so does a JSON `"\ud83d"` escape whose
partner never came. No journal can store such text and no provider accepts
it, so text from tools and from providers is made valid where it enters.
"""

from __future__ import annotations

import re

__all__ = ["valid_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    r"""`text` as UTF-8 can carry it: surrogate pairs joined, each lone surrogate U+FFFD.

    Examples:
        >>> valid_text("plain") == "plain"
        True
        >>> valid_text("\ud83d\ude00") == "\U0001f600"  # a pair, as JSON escapes write it
        True
        >>> valid_text(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\ufffd"
        True
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    # UTF-16 keeps each surrogate as it is ("surrogatepass"); reading it back
    # pairs the ones that belong together and replaces the rest.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
