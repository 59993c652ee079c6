"""Bedrock models wired to a mock transport, event-stream replies, and a clean AWS environment."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from llm_replay import HELLO, NO_RETRY, Recorder, Streamed, stream_all

from tidemill.llm import BedrockModel, ModelRequest

EVENT_STREAM = "application/vnd.amazon.eventstream"

ACCESS_KEY = "AKIAEXAMPLEKEY123456"
SECRET_KEY = "bedrock/secret+EXAMPLEKEY0123456789SECRET"
"""The fake secret; no error may ever show it (a signature never contains it)."""
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLE-session-token-SECRET"
BEARER = "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlSECRET"
"""A fake Bedrock API key."""

AWS_ENV = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CREDENTIAL_EXPIRATION",
]


def isolate_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting of the developer's shell or home reaches a test, nor does botocore
    ask the instance metadata service (which would be a real network call)."""
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def bedrock_model(
    recorder: Recorder, model: str = "us.amazon.nova-micro-v1:0", **options: Any
) -> BedrockModel:
    """A signing `BedrockModel` (region us-east-1) that talks only to `recorder`."""
    options.setdefault("retry", NO_RETRY)
    options.setdefault("region", "us-east-1")
    if "api_key" not in options:
        options.setdefault("access_key_id", ACCESS_KEY)
        options.setdefault("secret_access_key", SECRET_KEY)
    return BedrockModel(model, http_client=recorder.client(), **options)


def event_stream(body: bytes = b"", *, chunks: Sequence[bytes] | None = None) -> httpx.Response:
    """A 200 event-stream response delivering `body` (or the given `chunks`) piece by piece."""
    pieces = list(chunks) if chunks is not None else [body]

    async def stream() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return httpx.Response(200, headers={"content-type": EVENT_STREAM}, content=stream())


async def replay_bedrock(
    chunks: Sequence[bytes],
    request: ModelRequest = HELLO,
    model: str = "us.amazon.nova-micro-v1:0",
    **options: Any,
) -> Streamed:
    """Stream `chunks` (one ConverseStream body) through a `BedrockModel`."""
    bedrock = bedrock_model(Recorder([event_stream(chunks=chunks)]), model, **options)
    try:
        return await stream_all(bedrock, request)
    finally:
        await bedrock.aclose()


# -- building event-stream messages --------------------------------------------------------------


def _string_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers and correct checksums."""
    encoded = b"".join(_string_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """A ConverseStream event message, as Bedrock frames it."""
    headers = {
        ":event-type": kind,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps({**payload, "p": "abcdefgh"}).encode())


def exception(kind: str, text: str) -> bytes:
    """A ConverseStream exception message (`throttlingException`, ...)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return message(headers, json.dumps({"message": text}).encode())


def delta(index: int, **content: Any) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": index, "delta": content})


def finish(reason: str = "end_turn", **usage: int) -> list[bytes]:
    """The closing `messageStop` and `metadata` events."""
    used = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5, **usage}
    return [
        event("messageStop", {"stopReason": reason}),
        event("metadata", {"usage": used, "metrics": {"latencyMs": 9}}),
    ]
