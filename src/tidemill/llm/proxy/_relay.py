"""`ChatRelay`: the proxy's fast path for streams from OpenAI-compatible upstreams.

A streamed request for an `OpenAIChatModel` the router built goes here
instead of through `model.stream()`: the adapter's own request
(`build_call`) is sent over the router's `StreamingTransport`, and each read
of the upstream's body is turned into the client's frames by the adapter's
own parser and the proxy's `ChunkEncoder`, so the client gets the same bytes
as on the general path (the model name it asked for, the proxy's response
id, tool calls and reasoning normalised, errors inside the stream turned
into error events).

What it leaves out, per stream: `httpx`'s client and response layers
(cookies, URL merging, content decoding; the request asks for `identity`),
three generator layers per chunk, the whole `ModelResponse` at the end (the
closing events need only the finish reason and usage: every delta was sent
already), and pricing (the proxy reports tokens, not cost). The events of one
read go out in one write, and the closing events (finish reason, usage,
`[DONE]`) are written before the connection goes back to the pool. Failures
become the same typed errors `HttpClient` raises, and retries before the
first byte follow the model's `RetryPolicy`.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from tidemill._version import __version__
from tidemill.errors import MalformedToolCall, ProviderError, ProviderTimeout
from tidemill.llm._adapter import HttpCall
from tidemill.llm._failures import error_from_payload, error_from_response, redact
from tidemill.llm._json import loads_object
from tidemill.llm._model import ModelRequest
from tidemill.llm._retry import parse_retry_after
from tidemill.llm.http._client import read_error_body
from tidemill.llm.http._response import Upstream
from tidemill.llm.http._sse import ServerSentEvent, SSEDecoder
from tidemill.llm.http._transport import StreamingTransport, request_head
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.openai._chat_stream import ChatStreamParser
from tidemill.llm.proxy._chunks import ChunkEncoder
from tidemill.llm.proxy._streaming import Frames

__all__ = ["ChatRelay"]

_DRAIN_SECONDS = 1.0
"""How long a finished stream waits for the end of the upstream's body, to reuse its connection."""
_HEADS_KEPT = 16
"""Request heads kept per model (one per URL and set of headers: usually one)."""

# `_json.dumps` makes a new encoder per call (it passes options); this one is made once.
_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _user_agent() -> bytes:
    return f"tidemill/{__version__} proxy".encode()


class ChatRelay:
    """Streams an `OpenAIChatModel`'s answers over a `StreamingTransport`.

    Args:
        model: The model; its request builder, parser, dialect and retry policy are used.
        transport: The router's transport.
        timeout: The per-request limits: the model's own, else the router client's.
    """

    def __init__(
        self, model: OpenAIChatModel, transport: StreamingTransport, timeout: httpx.Timeout
    ) -> None:
        self.model = model
        self.transport = transport
        self.timeouts = {"connect": timeout.connect, "read": timeout.read, "write": timeout.write}
        self._secrets = model.credentials.secrets()
        self._agent = _user_agent()
        self._heads: dict[tuple[object, ...], tuple[httpx.URL, bytes]] = {}

    def handles(self, request: ModelRequest) -> bool:
        """Whether the relay serves `request`: not when a whole-call `timeout` is set."""
        return "timeout" not in self.model.merged_settings(request)

    async def frames(self, request: ModelRequest, encoder: ChunkEncoder) -> Frames:
        """The streamed answer to `request`, as the client's frames.

        Raises:
            ProviderError: Or a subclass (after the dialect's translation), when
                the upstream refuses, fails or cuts the stream.
        """
        upstream: Upstream | None = None
        complete = False
        try:
            upstream = await self._open(self.model.build_call(request, stream=True))
            parser = self.model.stream_parser()
            decoder = SSEDecoder(self.model.provider)
            frame = b""
            while data := await _read_some(upstream, self.model.provider):
                frame, failure = _encode(decoder.feed(data), parser, encoder)
                if failure is not None:
                    if frame:  # what came before the failure goes out first, as it would alone
                        yield frame, False
                    raise failure
                if parser.done:
                    break
                if frame:
                    yield frame, False
            if not parser.done:
                frame, failure = _encode(decoder.close(), parser, encoder)
                if failure is not None:
                    if frame:
                        yield frame, False
                    raise failure
            try:
                end = parser.end()  # every delta went out: no whole response is needed
            except (ProviderError, MalformedToolCall):  # cut short, or a call without a name
                if frame:
                    yield frame, False
                raise
            closing = frame + encoder.closing(end.finish_reason, end.usage)
            complete = True
            yield closing, True
        except ProviderError as exc:
            translated = self.model.dialect.translate_error(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            if upstream is not None and complete:  # the last frame went out: keep the connection
                await upstream.body.drain(within=_DRAIN_SECONDS)
            elif upstream is not None:  # failed, or the client left: close it now
                await upstream.body.aclose()

    # -- opening the stream ----------------------------------------------------------------

    async def _open(self, call: HttpCall) -> Upstream:
        """Send the request, retrying before the first byte as the model's policy says."""
        retry = self.model.http.retry
        attempt = 0
        while True:
            try:
                return await self._attempt(call)
            except ProviderError as error:
                wait = retry.delay(attempt, retry_after=getattr(error, "retry_after", None))
                if not error.retryable or attempt >= retry.max_retries or wait is None:
                    raise
            await asyncio.sleep(wait)
            attempt += 1

    def _head(self, call: HttpCall) -> tuple[httpx.URL, bytes]:
        """The call's URL and request head up to `content-length`, made once per URL and headers."""
        key = (call.url, *call.headers.items())
        known = self._heads.get(key)
        if known is not None:
            return known
        url = httpx.URL(call.url)
        headers = [
            (b"host", url.netloc),
            (b"content-type", b"application/json"),
            (b"accept", b"text/event-stream"),
            (b"accept-encoding", b"identity"),
            (b"user-agent", self._agent),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in call.headers.items()),
        ]
        if len(self._heads) >= _HEADS_KEPT:  # rotated credentials: forget the old ones
            self._heads.clear()
        known = self._heads[key] = (url, request_head("POST", url, headers, None))
        return known

    async def _attempt(self, call: HttpCall) -> Upstream:
        url, head = self._head(call)
        content = _encode_json(call.body).encode("utf-8")
        data = b"%scontent-length: %d\r\n\r\n%s" % (head, len(content), content)
        try:
            upstream = await self.transport.send("POST", url, data, self.timeouts)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        media_type = upstream.header(b"content-type").split(b";")[0].strip().lower()
        encoding = upstream.header(b"content-encoding").strip().lower()
        if upstream.status < 400 and media_type != b"application/json" and not encoding:
            return upstream
        try:
            body = await read_error_body(upstream.body)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        finally:
            await upstream.body.aclose()
        raise self._refusal(upstream, body, encoding)

    def _refusal(self, upstream: Upstream, body: bytes, encoding: bytes) -> ProviderError:
        """The error for an answer that is not an event stream."""
        provider, source = self.model.provider, self.model.dialect.source
        text = body.decode("utf-8", errors="replace")
        if upstream.status >= 400:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in upstream.headers}
            return error_from_response(
                provider,
                upstream.status,
                headers,
                body,
                secrets=self._secrets,
                retry_after=parse_retry_after(headers),
                statuses=self.model.http.retry.statuses,
                auth_hint=source.auth_hint,
            )
        payload = loads_object(body) if not encoding else None
        if payload is not None and "error" in payload:
            return error_from_payload(
                provider, payload, secrets=self._secrets, body=text, auth_hint=source.auth_hint
            )
        what = (
            f"a {encoding.decode('latin-1')}-encoded body"
            if encoding
            else "plain JSON instead of an event stream"
        )
        return ProviderError(
            f"{provider} answered a streaming request with {what}.",
            provider=provider,
            status_code=upstream.status,
            body=redact(text[:4000], self._secrets),
            hint="Check that the base URL points at an API that supports streaming.",
        )

    def _unreachable(self, exc: httpx.HTTPError) -> ProviderError:
        provider = self.model.provider
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(
                f"{provider} did not answer in time ({type(exc).__name__}).",
                provider=provider,
                retryable=True,
                hint="Raise the model's timeout=, or try again.",
            )
        transient = isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError)
        return ProviderError(
            f"Could not reach {provider}: {type(exc).__name__}: " + redact(str(exc), self._secrets),
            provider=provider,
            retryable=transient,
            hint="Check the network and the base URL." if transient else None,
        )


def _encode(
    events: list[ServerSentEvent], parser: ChatStreamParser, encoder: ChunkEncoder
) -> tuple[bytes, ProviderError | None]:
    """The client's bytes for `events`, and the error one of them raised, if any."""
    parts: list[bytes] = []
    try:
        for event in events:
            for delta in parser.feed(event):
                parts.append(encoder.event(delta))
    except ProviderError as exc:
        return b"".join(parts), exc
    return b"".join(parts), None


async def _read_some(upstream: Upstream, provider: str) -> bytes:
    """The upstream's next body bytes (b"" at the end), its transport failures as typed errors."""
    try:
        return await upstream.body.read()
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(
            f"{provider} stopped sending its stream for longer than the read timeout.",
            provider=provider,
            retryable=True,
            hint="Raise the model's timeout=, or try again.",
        ) from exc
    except httpx.HTTPError as exc:
        raise ProviderError(
            f"The {provider} stream broke off: {type(exc).__name__}.",
            provider=provider,
            retryable=True,
        ) from exc
