"""Query parameters several routes share, bounded to what the store can hold.

A number past a 64-bit integer would overflow the store's column types
(SQLite raises, PostgreSQL refuses), so every id, cursor and version a
request names is bounded here and answered with a 422 when it is larger.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

__all__ = ["BIGINT_MAX", "After", "Version"]

BIGINT_MAX = 2**63 - 1
"""The largest integer the store's columns hold."""

After = Annotated[int, Query(ge=0, le=BIGINT_MAX, description="Only what comes after this id.")]
"""A cursor: the id of the last entry seen (0: from the start)."""

Version = Annotated[int, Query(ge=1, le=BIGINT_MAX)]
"""An item's version number."""
