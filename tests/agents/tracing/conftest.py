"""The local OTLP/HTTP receiver the vendor tracer tests export to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from otlp_receiver import OTLPReceiver, serve


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with serve() as collected:
        yield collected
