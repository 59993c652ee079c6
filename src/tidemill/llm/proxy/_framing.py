"""Malformed HTTP answered in OpenAI's error shape, in the place uvicorn leaves for it.

A request uvicorn cannot parse (a request line or header that is not HTTP/1.1,
a `Content-Length` that is no number, a broken chunked body, a header block
over h11's 16 KiB) never reaches the app: uvicorn's protocol answers it
itself, with a plain-text 400, through its `send_400_response` method, which
both of its HTTP/1.1 parsers have (h11's and httptools'). `http_protocol`
returns the protocol class uvicorn would use, with that method answering an
OpenAI error body instead (code `invalid_http_request`), so an OpenAI SDK
reads it like any other error of the proxy. `tidemill proxy` serves with it.

What uvicorn answers without such a method, so still in plain text: a 503
when `limit_concurrency` is reached (the proxy does not set it), a 500 when
an app fails before it answers (the proxy's app answers every failure
itself), and a framing error met after the response to that request began
(h11 cannot send a second response; the connection is closed).
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Literal

from tidemill.llm._json import dumps
from tidemill.llm.proxy._errors import ProxyError

__all__ = ["HttpParser", "http_protocol"]

HttpParser = Literal["auto", "h11", "httptools"]
"""uvicorn's HTTP/1.1 parsers; `auto` is httptools when it is installed, else h11."""

_BODY = dumps(
    ProxyError(
        "The request is not valid HTTP/1.1; the connection is closed.",
        status=400,
        code="invalid_http_request",
    ).body()
).encode()
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % len(_BODY)),
    (b"connection", b"close"),
]


def http_protocol(parser: HttpParser = "auto") -> type[asyncio.Protocol]:
    """Uvicorn's protocol class for `parser`, answering malformed requests in OpenAI's shape.

    Pass it as `uvicorn.Config(app, http=http_protocol())` (`tidemill proxy` does).

    Raises:
        ImportError: For `httptools` when it is not installed.

    Examples:
        >>> http_protocol("h11").__name__
        'H11Protocol'
    """
    if parser == "h11" or (parser == "auto" and not _has_httptools()):
        return _h11_protocol()
    return _httptools_protocol()


def _has_httptools() -> bool:
    try:
        import httptools  # noqa: F401
    except ImportError:
        return False
    return True


@cache
def _h11_protocol() -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    class H11Protocol(Base):
        """uvicorn's h11 protocol, answering a request it cannot parse in OpenAI's shape."""

        def send_400_response(self, msg: str) -> None:
            response = h11.Response(status_code=400, headers=_HEADERS, reason=b"Bad Request")
            for event in (response, h11.Data(data=_BODY), h11.EndOfMessage()):
                output = self.conn.send(event)
                if output:
                    self.transport.write(output)
            self.transport.close()

    return H11Protocol


@cache
def _httptools_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base

    class HttpToolsProtocol(Base):
        """uvicorn's httptools protocol, answering a request it cannot parse in OpenAI's shape."""

        def send_400_response(self, msg: str) -> None:
            content = [STATUS_LINE[400]]
            for name, value in [*self.server_state.default_headers, *_HEADERS]:
                content += [name, b": ", value, b"\r\n"]
            content += [b"\r\n", _BODY]
            self.transport.write(b"".join(content))
            self.transport.close()

    return HttpToolsProtocol
