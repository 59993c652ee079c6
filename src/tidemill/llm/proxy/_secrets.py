r"""`SecretSet`: the credentials the proxy holds, in every form an upstream may echo them.

An upstream that repeats a key in its error text rarely repeats it verbatim:
a URL it echoes has the key percent-encoded (`/` as `%2F`, or `%2f`, `+` as
`%2B`, a space as `+`), and a JSON string may escape `/` as `\/`. The proxy
scrubs each of these forms from what it sends a client. The set is keyed by
value, so it grows with the credentials configured, not with the models
built from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

__all__ = ["SecretSet", "encoded_forms"]

_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def encoded_forms(secret: str) -> list[str]:
    r"""`secret` and the encodings of it an upstream is likely to echo, without repeats.

    Examples:
        >>> encoded_forms("ab/c+d")
        ['ab/c+d', 'ab%2Fc%2Bd', 'ab%2fc%2bd', 'ab/c%2Bd', 'ab\\/c+d']
    """
    url = quote(secret, safe="")
    forms = [
        secret,
        url,
        _ESCAPE.sub(lambda hexed: hexed.group().lower(), url),
        quote_plus(secret, safe=""),
        quote(secret),  # `/` kept, as in a path
        quote_plus(secret, safe="/"),
    ]
    escaped = json.dumps(secret)[1:-1]
    forms += [escaped, escaped.replace("/", "\\/"), json.dumps(secret, ensure_ascii=False)[1:-1]]
    return list(dict.fromkeys(forms))


class SecretSet:
    r"""Secret values and their encoded forms, each kept once, longest first.

    Examples:
        >>> secrets = SecretSet()
        >>> secrets.add(["key/1", "key/1"])
        >>> secrets.values()
        ('key%2F1', 'key%2f1', 'key\\/1', 'key/1')
    """

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._forms: dict[str, None] = {}
        self._values: tuple[str, ...] = ()

    def add(self, secrets: Iterable[str]) -> None:
        """Add `secrets` (empty values are skipped) with their encoded forms."""
        changed = False
        for secret in secrets:
            if not secret or secret in self._known:
                continue
            self._known.add(secret)
            for form in encoded_forms(secret):
                self._forms[form] = None
            changed = True
        if changed:
            # Longest first, so that no form is cut by a shorter one it contains.
            self._values = tuple(sorted(self._forms, key=len, reverse=True))

    def values(self) -> tuple[str, ...]:
        """Every form of every secret, to pass to `redact`."""
        return self._values
