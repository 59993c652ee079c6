"""`Credentials`: how to reach and authenticate to one provider.

One type for every provider: an API key, a base URL, the OpenAI organization
and project, extra headers, and room for what cloud platforms need (a region,
AWS keys). Values come from arguments first, then from environment variables,
then from the provider's defaults; `CredentialSource` names those variables
and defaults for one provider.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from tidemill.errors import ConfigurationError, MissingCredentialsError

__all__ = ["CredentialSource", "Credentials", "trusts_url"]

_log = logging.getLogger("tidemill.llm")

# Header names whose values are secrets: they are hidden in reprs and scrubbed from errors.
_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "cookie", "signature")


def _empty_headers() -> dict[str, str]:
    return {}


@dataclass(frozen=True, slots=True, repr=False)
class Credentials:
    """What a provider adapter needs to call its API.

    Secrets never show in `repr`, so a `Credentials` can be logged.

    Examples:
        >>> creds = Credentials(api_key="sk-secret", base_url="https://api.openai.com/v1")
        >>> creds
        Credentials(api_key=<set>, base_url='https://api.openai.com/v1')
        >>> "sk-secret" in repr(creds)
        False
    """

    api_key: str | None = None
    """The API key, sent as the provider's auth header."""
    base_url: str | None = None
    """The API's root URL, without a trailing slash (`https://api.openai.com/v1`)."""
    organization: str | None = None
    """The OpenAI organization id, sent as `OpenAI-Organization`."""
    project: str | None = None
    """The OpenAI project id, sent as `OpenAI-Project`."""
    headers: Mapping[str, str] = field(default_factory=_empty_headers)
    """Extra headers sent with every request (gateways, OpenRouter's `HTTP-Referer`)."""
    region: str | None = None
    """The cloud region, for providers hosted on a cloud platform (Bedrock, Vertex)."""
    aws_access_key_id: str | None = None
    """AWS access key id, for Bedrock."""
    aws_secret_access_key: str | None = None
    """AWS secret key, for Bedrock."""
    aws_session_token: str | None = None
    """AWS session token, for Bedrock with temporary credentials."""

    def secrets(self) -> tuple[str, ...]:
        """Return every secret value held, to scrub from error messages and bodies."""
        values = [self.api_key, self.aws_secret_access_key, self.aws_session_token]
        values += [v for k, v in self.headers.items() if _is_secret_header(k)]
        return tuple(v for v in values if v)

    def __repr__(self) -> str:
        parts = [f"api_key={'<set>' if self.api_key else None}"]
        for name in ("base_url", "organization", "project", "region", "aws_access_key_id"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        if self.aws_secret_access_key or self.aws_session_token:
            parts.append("aws_secret=<set>")
        if self.headers:
            parts.append(f"headers={sorted(self.headers)!r}")
        return f"Credentials({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class CredentialSource:
    """Where one provider's credentials come from when no argument gives them."""

    provider: str
    """The provider's name, for messages."""
    api_key_env: str | None
    """The environment variable holding the API key."""
    default_base_url: str | None
    """The base URL used when neither an argument nor `base_url_env` gives one."""
    base_url_env: str | None = None
    """The environment variable that overrides the base URL."""
    key_required: bool = True
    """Whether a call without an API key is a configuration error (not for local servers)."""
    organization_env: str | None = None
    project_env: str | None = None

    def resolve(
        self,
        credentials: Credentials | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Credentials:
        """Combine arguments, `credentials`, environment variables and defaults.

        An argument beats the same field of `credentials`, which beats the
        environment, which beats the default. The environment's API key is
        sent only to the environment's base URL or the default one
        (`trusts_url`): another URL needs its key passed with it.

        Raises:
            ConfigurationError: When no API key is found but one is required,
                naming the variable to set; or when there is no base URL.

        Examples:
            >>> source = CredentialSource("openai", "OPENAI_API_KEY", "https://api.openai.com/v1")
            >>> source.resolve(environ={"OPENAI_API_KEY": "sk-x"}).base_url
            'https://api.openai.com/v1'
            >>> source.resolve(environ={})
            Traceback (most recent call last):
            ...
            tidemill.errors.MissingCredentialsError: No API key for the openai provider. ...
            >>> source.resolve(base_url="https://collector.example/v1",
            ...                environ={"OPENAI_API_KEY": "sk-x"})
            Traceback (most recent call last):
            ...
            tidemill.errors.MissingCredentialsError: No API key for the openai provider at ...
        """
        env = os.environ if environ is None else environ
        base = credentials or Credentials()
        env_url = _env(env, self.base_url_env)
        url = base_url or base.base_url or env_url or self.default_base_url
        key = api_key or base.api_key
        env_key = None if key else _env(env, self.api_key_env)
        withheld = env_key is not None and not trusts_url(url, env_url, self.default_base_url)
        resolved = replace(
            base,
            api_key=key or (None if withheld else env_key),
            base_url=url,
            organization=organization or base.organization or _env(env, self.organization_env),
            project=project or base.project or _env(env, self.project_env),
            headers={**base.headers, **(headers or {})},
        )
        if withheld and self.key_required:
            raise MissingCredentialsError(
                f"No API key for the {self.provider} provider at {url}: the "
                f"{self.api_key_env} environment variable is sent only to "
                f"{_trusted_words(self.base_url_env, self.default_base_url)}.",
                hint=f"Pass api_key= for {url}, or set {self.base_url_env or 'its URL variable'} "
                "to it to trust that URL with the environment's key.",
                context={"provider": self.provider, "env": self.api_key_env, "base_url": url},
            )
        if withheld:
            _log.warning(
                "%s: not sending %s to %s, which is neither %s; calling it without a key",
                self.provider, self.api_key_env, url,
                _trusted_words(self.base_url_env, self.default_base_url),
            )  # fmt: skip
        if not resolved.api_key and self.key_required:
            where = (
                f"Set the {self.api_key_env} environment variable, or pass"
                if (self.api_key_env)
                else "Pass"
            )
            raise MissingCredentialsError(
                f"No API key for the {self.provider} provider.",
                hint=f"{where} api_key= (or credentials=Credentials(api_key=...)).",
                context={"provider": self.provider, "env": self.api_key_env},
            )
        if not resolved.base_url:
            env_hint = f" or set {self.base_url_env}" if self.base_url_env else ""
            raise ConfigurationError(
                f"No base URL for the {self.provider} provider.",
                hint=f"Pass base_url='https://host/v1'{env_hint}.",
                context={"provider": self.provider, "env": self.base_url_env},
            )
        return replace(resolved, base_url=resolved.base_url.rstrip("/"))

    @property
    def auth_hint(self) -> str:
        """What to tell a user whose key was refused."""
        where = f"the {self.api_key_env} variable or " if self.api_key_env else ""
        return f"Check the API key ({where}api_key=) and that it may use this model."


def trusts_url(url: str | None, *trusted: str | None) -> bool:
    """Whether a secret read from the environment may be sent to `url`.

    A key in the environment belongs to the endpoint the environment (or the
    provider's default) names: a `base_url` given in code, in a flow or in a
    workspace resource is another endpoint, and gets the key only when it is
    passed with it. Otherwise anyone who may set a base URL could collect
    the operator's keys. URLs compare without a trailing slash.

    Examples:
        >>> trusts_url("https://api.openai.com/v1/", None, "https://api.openai.com/v1")
        True
        >>> trusts_url("https://collector.example/v1", None, "https://api.openai.com/v1")
        False
    """
    wanted = (url or "").rstrip("/")
    return any(wanted == (t or "").rstrip("/") for t in trusted if t)


def _trusted_words(url_env: str | None, default: str | None) -> str:
    if url_env and default:
        return f"{default} or to ${url_env}"
    return default or f"${url_env}"


def _env(environ: Mapping[str, str], name: str | None) -> str | None:
    if not name:
        return None
    value = environ.get(name, "").strip()
    return value or None


def _is_secret_header(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_HEADER_WORDS)
