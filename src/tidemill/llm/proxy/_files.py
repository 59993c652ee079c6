"""`FilePolicy`: the image URLs a client may send, and those only the operator may allow.

An upstream gets an `image_url` in one of three ways: inline bytes (`data:`),
a public URL it fetches as anyone would (OpenAI, Anthropic and Gemini do),
or a stored file it reads with the proxy's own credentials: an `s3://`
object (Bedrock, with the proxy's AWS keys), a `gs://` object (Vertex AI,
with the proxy's service account) or a Gemini Files API URL
(`https://generativelanguage.googleapis.com/.../files/...`, a file uploaded
under the proxy's key). A stored file would let one client read what another
stored, so it is refused with a 400 naming the field, unless the operator
allows its bucket or prefix. So is anything that is neither an http(s) nor a
`data:` URL: the proxy cannot tell who would read it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from urllib.parse import unquote

from tidemill.errors import ConfigurationError
from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.types import Message

__all__ = ["FilePolicy"]

_PUBLIC = frozenset({"http", "https"})
_PREFIX_SCHEMES = frozenset({"s3", "gs", "https"})
_GEMINI_FILES_HOST = "generativelanguage.googleapis.com"


class FilePolicy:
    """Which image URLs the proxy passes upstream.

    Args:
        allowed: Prefixes of stored files clients may name: a bucket
            (`s3://photos`, `gs://shared`), a folder in one
            (`gs://shared/team/`), or the Gemini Files API
            (`https://generativelanguage.googleapis.com/v1beta/files`). A
            prefix matches whole path segments: `s3://photos` allows
            `s3://photos/cat.png`, not `s3://photos-private/cat.png`.

    Raises:
        ConfigurationError: For a prefix that names no bucket or host.

    Examples:
        >>> policy = FilePolicy(["s3://photos"])
        >>> policy.refusal("https://example.com/cat.png") is None
        True
        >>> policy.refusal("s3://photos/cat.png") is None
        True
        >>> print(policy.refusal("s3://payroll/scan.png"))
        names a stored file (s3://), which the upstream would read with the proxy's own credentials
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = tuple(_prefix(text) for text in allowed)

    def check(self, messages: Sequence[Message], payload: object) -> None:
        """Refuse the first image of `messages` the proxy must not pass on.

        `messages` are the request's messages as parsed, in the order of the
        body's `messages` array (`payload`, where the field is looked up).

        Raises:
            InvalidRequest: Naming the field, e.g. `messages[1].content[0].image_url.url`.
        """
        for index, message in enumerate(messages):
            for image in message.images:
                reason = self.refusal(image.url)
                if reason is not None:
                    param = _param(payload, index, image.url)
                    raise InvalidRequest(
                        f"'{param}' {reason}. Send the image inline, as a data: URL, or at a "
                        "public https URL; the proxy's operator can allow a bucket "
                        "(--allow-file-prefix).",
                        param=param,
                        code="invalid_image_url",
                    )

    def refusal(self, url: str) -> str | None:
        """Why `url` is refused, or None when it may be passed on."""
        text = url.strip()
        scheme, colon, _ = text.partition(":")
        scheme = scheme.lower() if colon else ""
        if scheme == "data":
            return None
        if scheme in _PUBLIC and not _names_gemini_files(text):
            return None
        if self._allows(text):
            return None
        if scheme in _PUBLIC or scheme in ("s3", "gs"):
            where = "a Gemini file" if scheme in _PUBLIC else f"{scheme}://"
            return (
                f"names a stored file ({where}), which the upstream would read with the "
                "proxy's own credentials"
            )
        return "is neither an https nor a data: URL"

    def _allows(self, url: str) -> bool:
        if not self.allowed or _has_dot_segment(url):
            return False
        return any(url == prefix or url.startswith(prefix + "/") for prefix in self.allowed)


def _names_gemini_files(url: str) -> bool:
    """Whether `url` points at Gemini's own API, however its host is spelled.

    The upstream parses the URL, not the proxy: percent-escapes, case, a
    trailing dot and full-width dots all reach the same host, so the folded
    text is searched rather than one parser's idea of the host.
    """
    folded = unicodedata.normalize("NFKC", unquote(unquote(url))).lower()
    return _GEMINI_FILES_HOST in folded.replace("\u3002", ".")


def _has_dot_segment(url: str) -> bool:
    path = unquote(unquote(url)).replace("\\", "/")
    return any(segment in (".", "..") for segment in path.split("/"))


def _prefix(text: str) -> str:
    """An allowed prefix, checked, without its trailing slashes."""
    prefix = text.strip().rstrip("/")
    scheme, sep, rest = prefix.partition("://")
    bucket = rest.split("/", 1)[0]
    if not sep or scheme not in _PREFIX_SCHEMES or not bucket or _has_dot_segment(prefix):
        raise ConfigurationError(
            f"The file prefix {text!r} names no bucket.",
            hint="Write it as s3://bucket, gs://bucket/folder/ or "
            "https://generativelanguage.googleapis.com/v1beta/files.",
        )
    return prefix


def _param(payload: object, index: int, url: str) -> str:
    """The field holding `url` in the `index`th message of the request body."""
    where = f"messages[{index}].content"
    messages = payload.get("messages") if isinstance(payload, dict) else None
    message = messages[index] if isinstance(messages, list) and index < len(messages) else None
    content = message.get("content") if isinstance(message, dict) else None
    for position, part in enumerate(content if isinstance(content, list) else []):
        image = part.get("image_url") if isinstance(part, dict) else None
        if image == url:
            return f"{where}[{position}].image_url"
        if isinstance(image, dict) and image.get("url") == url:
            return f"{where}[{position}].image_url.url"
    return where
