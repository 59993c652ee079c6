"""The HTTP machinery every adapter shares.

The client with retries, the streaming transport under it, SSE and AWS
event-stream decoding, and SigV4 signing. Nothing here knows a wire format
family or the proxy (an import-linter contract keeps it so).

Who owns what: `_client` is `HttpClient` (retries, deadlines, typed errors)
and `new_http_client`, the `httpx` client a process shares; `_transport` is
`StreamingTransport`, the lean HTTP/1.1 transport under it (its pool and
exchange), with
`_connection` (one connection, an asyncio protocol) and `_response` (the
response head and `Body`); `_sse` and `_eventstream` decode server-sent
events and AWS event-stream framing; `_sigv4` signs AWS requests.
"""
