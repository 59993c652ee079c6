"""Security headers on every answer, and a limit on failed sign-ins.

Examples:
    >>> limiter = SignInLimiter(attempts=2, window=60.0)
    >>> limiter.failed("ada|10.0.0.1", now=0.0); limiter.failed("ada|10.0.0.1", now=1.0)
    >>> limiter.wait("ada|10.0.0.1", now=2.0), limiter.wait("ada|10.0.0.1", now=61.0)
    (58.0, 0.0)
"""

from __future__ import annotations

import time
from collections import deque

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "SecurityHeaders", "SignInLimiter"]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)
# The API answers JSON; its docs page loads the Swagger UI from a CDN.
_API_CSP = b"default-src 'none'; frame-ancestors 'none'"
_DOCS_CSP = (
    b"default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    b"style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: "
    b"https://fastapi.tiangolo.com; frame-ancestors 'none'"
)


class SecurityHeaders:
    """ASGI middleware: every HTTP answer gets `SECURITY_HEADERS` and a content security policy.

    A header the answer already has is kept: the UI's page (`_ui`) sets its
    own policy, with its nonce, and its assets their own `Cache-Control`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = _DOCS_CSP if scope.get("path", "") in ("/docs", "/redoc") else _API_CSP

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", csp))
                if b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class SignInLimiter:
    """At most `attempts` failed sign-ins per key (user and address) in `window` seconds."""

    def __init__(self, attempts: int = 5, window: float = 300.0) -> None:
        self.attempts = attempts
        self.window = window
        self._failures: dict[str, deque[float]] = {}

    def wait(self, key: str, *, now: float | None = None) -> float:
        """Seconds to wait before `key` may try again (0: it may now)."""
        now = time.monotonic() if now is None else now
        failures = self._failures.get(key)
        if not failures:
            return 0.0
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        if len(failures) < self.attempts:
            if not failures:
                del self._failures[key]
            return 0.0
        return failures[0] + self.window - now

    def failed(self, key: str, *, now: float | None = None) -> None:
        """Count a failed sign-in of `key`."""
        now = time.monotonic() if now is None else now
        self._failures.setdefault(key, deque()).append(now)
        if len(self._failures) > 100_000:  # never grow without bound under a flood
            self._failures.pop(next(iter(self._failures)))

    def succeeded(self, key: str) -> None:
        """Forget `key`'s failures."""
        self._failures.pop(key, None)
