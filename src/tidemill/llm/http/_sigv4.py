"""AWS Signature Version 4 request signing, with the standard library only.

Bedrock authenticates a request by a signature over its method, path,
query, chosen headers and body hash, keyed by a key derived from the
secret access key, the date, the region and the service:
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html

Every service but S3 signs its path URI-encoded a second time, which
matters here: Bedrock model ids carry a `:` (`anthropic.claude-...-v1:0`),
sent as `%3A` and signed as `%253A`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote

import httpx

__all__ = ["ALGORITHM", "AwsKeys", "canonical_request", "sign_v4", "signing_key"]

ALGORITHM = "AWS4-HMAC-SHA256"

_SAFE = "-_.~"  # RFC 3986 unreserved characters besides letters and digits
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True, repr=False)
class AwsKeys:
    """An AWS access key pair, with the session token of temporary credentials.

    The secret and the token never show in `repr`.

    Examples:
        >>> AwsKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        AwsKeys(access_key_id='AKIDEXAMPLE', secret_access_key=<set>)
    """

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        token = ", session_token=<set>" if self.session_token else ""
        return f"AwsKeys(access_key_id={self.access_key_id!r}, secret_access_key=<set>{token})"


def signing_key(secret_access_key: str, date: str, region: str, service: str) -> bytes:
    """Derive the key that signs one day's requests to one service in one region.

    Args:
        secret_access_key: The secret access key.
        date: The request date, `YYYYMMDD`.
        region: The region (`us-east-1`).
        service: The signing name of the service (`bedrock`).
    """
    key = _hmac(("AWS4" + secret_access_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def canonical_request(
    method: str, url: str, headers: Mapping[str, str], body: bytes, *, double_encode: bool = True
) -> tuple[str, str]:
    """Return the canonical request and its signed-headers list.

    Args:
        method: The HTTP method.
        url: The full URL, its path already percent-encoded as it will be sent.
        headers: The headers to sign (names in any case).
        body: The exact body bytes.
        double_encode: Encode the path again, as every service but S3 expects.
    """
    parsed = httpx.URL(url)
    raw_path = parsed.raw_path.split(b"?", 1)[0].decode("ascii") or "/"
    path = quote(raw_path, safe="/" + _SAFE) if double_encode else raw_path
    pairs: list[tuple[str, str]] = []
    for part in parsed.query.decode("ascii").split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((_encode(unquote(name)), _encode(unquote(value))))
    query = "&".join(f"{name}={value}" for name, value in sorted(pairs))
    canonical: dict[str, list[str]] = {}
    for name, value in headers.items():
        canonical.setdefault(name.strip().lower(), []).append(_SPACES.sub(" ", value.strip()))
    names = sorted(canonical)
    header_lines = "".join(f"{name}:{','.join(canonical[name])}\n" for name in names)
    signed = ";".join(names)
    payload = hashlib.sha256(body).hexdigest()
    return "\n".join([method.upper(), path, query, header_lines, signed, payload]), signed


def sign_v4(
    method: str,
    url: str,
    *,
    body: bytes,
    keys: AwsKeys,
    region: str,
    service: str,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """Sign a request; return the headers to send with it.

    The returned headers are `x-amz-date`, `x-amz-security-token` (with
    temporary credentials) and `authorization`; `host` is signed as httpx
    will send it (the URL's host, and its port when not the default).

    Args:
        method: The HTTP method.
        url: The full URL, as it will be sent.
        body: The exact body bytes.
        keys: The access key pair.
        region: The region the endpoint is in.
        service: The signing name of the service (`bedrock` for bedrock-runtime).
        headers: Other headers to sign as well.
        now: The signing time (default: now).

    Examples:
        >>> from datetime import datetime, UTC
        >>> signed = sign_v4(
        ...     "GET", "https://example.amazonaws.com/", body=b"",
        ...     keys=AwsKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        ...     region="us-east-1", service="service",
        ...     now=datetime(2015, 8, 30, 12, 36, tzinfo=UTC))
        >>> signed["authorization"].split("Signature=")[1][:16]
        '5fa00fa31553b73e'
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = moment.strftime("%Y%m%dT%H%M%SZ")
    date = stamp[:8]
    added = {"x-amz-date": stamp}
    if keys.session_token:
        added["x-amz-security-token"] = keys.session_token
    to_sign = {name.lower(): value for name, value in (headers or {}).items()}
    to_sign.setdefault("host", httpx.URL(url).netloc.decode("ascii"))
    to_sign.update(added)
    request, signed = canonical_request(method, url, to_sign, body)
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        [ALGORITHM, stamp, scope, hashlib.sha256(request.encode("utf-8")).hexdigest()]
    )
    key = signing_key(keys.secret_access_key, date, region, service)
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    added["authorization"] = (
        f"{ALGORITHM} Credential={keys.access_key_id}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return added


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def _encode(text: str) -> str:
    return quote(text, safe=_SAFE)
