"""Where a store lives: `sqlite:///path` or `postgresql://...`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tidemill.errors import ConfigurationError

__all__ = ["DEFAULT_URL", "StoreURL"]

DEFAULT_URL = "sqlite:///.tidemill/tidemill.db"
"""The embedded default: a SQLite file under `.tidemill/` in the working directory."""

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store address.

    `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` and
    `postgresql://user@host:port/db` (or `postgres://`). A PostgreSQL URL may
    carry `?schema=name` to keep Tidemill's tables in a schema of their own
    (created when missing); other query parameters go to the driver.

    Examples:
        >>> StoreURL.parse("sqlite:///runs/tidemill.db").path
        PosixPath('runs/tidemill.db')
        >>> url = StoreURL.parse("postgresql://postgres@127.0.0.1:5432/test?schema=tm")
        >>> url.dialect, url.schema, url.dsn
        ('postgres', 'tm', 'postgresql://postgres@127.0.0.1:5432/test')
    """

    dialect: Literal["sqlite", "postgres"]
    path: Path | None = None
    dsn: str = ""
    schema: str = "public"

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        """Read a store URL; raise `ConfigurationError` naming the accepted forms."""
        if url.startswith("sqlite://"):
            rest = url.removeprefix("sqlite://")
            if not rest.startswith("/") or rest == "/":
                raise _bad(url)
            return cls("sqlite", path=Path(rest[1:]))
        if url.startswith(("postgresql://", "postgres://")):
            parts = urlsplit(url)
            query = dict(parse_qsl(parts.query))
            schema = query.pop("schema", "public")
            if not _SCHEMA_NAME.match(schema):
                raise ConfigurationError(
                    f"Bad schema name {schema!r} in the store URL.",
                    hint="Use lower-case letters, digits and underscores, e.g. ?schema=tidemill.",
                )
            scheme = "postgresql"
            dsn = urlunsplit((scheme, parts.netloc, parts.path, urlencode(query), ""))
            return cls("postgres", dsn=dsn, schema=schema)
        raise _bad(url)

    def __str__(self) -> str:
        if self.dialect == "sqlite":
            return f"sqlite:///{self.path}"
        suffix = "" if self.schema == "public" else f"?schema={self.schema}"
        joiner = "&" if "?" in self.dsn and suffix else ""
        return self.dsn + (joiner + suffix[1:] if joiner else suffix)


def _bad(url: str) -> ConfigurationError:
    return ConfigurationError(
        f"Unknown store URL {url!r}.",
        hint="Use sqlite:///path/to/file.db (the embedded default is "
        f"{DEFAULT_URL}) or postgresql://user@host:5432/database.",
    )
