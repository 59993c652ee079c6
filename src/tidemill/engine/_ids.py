"""Run and approval ids: UUIDs whose first bits are the time, so they sort by age."""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["new_id"]


def new_id() -> str:
    """A new time-ordered UUID (version 7 layout) as text.

    Examples:
        >>> run_id = new_id()
        >>> len(run_id), run_id[14], uuid.UUID(run_id).variant
        (36, '7', 'specified in RFC 4122')
    """
    millis = time.time_ns() // 1_000_000
    tail = int.from_bytes(os.urandom(10), "big")
    value = (millis & (2**48 - 1)) << 80 | tail
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))
