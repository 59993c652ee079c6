"""Where a Bedrock model finds its region and its AWS credentials.

In order, the first that gives an answer wins:

1. arguments (`access_key_id=`/`secret_access_key=`/`session_token=`, or a
   Bedrock API key as `api_key=`), then the same fields of a `Credentials`;
2. `AWS_BEARER_TOKEN_BEDROCK`: a Bedrock API key, sent as a bearer token
   with no signing;
3. `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`
   for temporary credentials);
4. with the `bedrock` extra (`pip install 'tidemill[bedrock]'`, which
   installs `botocore`): botocore's credential chain, so the shared
   credentials file and `AWS_PROFILE`/`profile=`, SSO, assumed roles,
   container and instance roles work as they do for the AWS CLI, and
   temporary credentials are refreshed before they expire.

The first three are read when the model is built. The chain may take
seconds (it asks the container and instance metadata services before it
gives up), so it is asked on the model's first call, in a thread, once for
however many calls wait for it (`BotocoreKeys`): the event loop never waits
on it. A failed lookup is remembered for `LOOKUP_FAILURE_TTL` seconds, so the
calls in between fail at once instead of asking again.

The region comes from `region=`, `Credentials.region`, `AWS_REGION`,
`AWS_DEFAULT_REGION`, then (with botocore) the profile's configured region.
Botocore is only used to find credentials; requests are signed by Tidemill
(`BedrockAccess.sign`, with `tidemill.llm.http._sigv4`) and sent with httpx.
`BedrockAccess` also builds what every Bedrock call shares, chat
(`BedrockModel`) or embeddings (`BedrockEmbedder`): the model's URL and the
headers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tidemill.errors import ConfigurationError, MissingCredentialsError, MissingDependencyError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials, trusts_url
from tidemill.llm._json import dumps
from tidemill.llm.http._sigv4 import AwsKeys, sign_v4

__all__ = [
    "AWS_AUTH_HINT",
    "LOOKUP_FAILURE_TTL",
    "SIGNING_NAME",
    "BearerToken",
    "BedrockAccess",
    "BotocoreKeys",
    "StaticKeys",
    "key_secrets",
    "resolve_bedrock_access",
]

SIGNING_NAME = "bedrock"
"""The SigV4 service name of `bedrock-runtime`."""

AWS_AUTH_HINT = (
    "Check the AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, "
    "AWS_PROFILE, or the Bedrock API key AWS_BEARER_TOKEN_BEDROCK), that they have not "
    "expired, and that the model is enabled for the account in this region."
)
"""What to tell a user whose AWS credentials were refused."""

LOOKUP_FAILURE_TTL = 30.0
"""Seconds a failed botocore lookup is remembered before the next call asks again."""

_MISSING_HINT = (
    "Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary "
    "credentials), or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK, or pass "
    "access_key_id= and secret_access_key=. To use ~/.aws/credentials, AWS_PROFILE or SSO, "
    "install botocore: pip install 'tidemill[bedrock]'."
)


@dataclass(frozen=True, slots=True, repr=False)
class BearerToken:
    """A Bedrock API key, sent as `Authorization: Bearer`; nothing is signed."""

    token: str

    def __repr__(self) -> str:
        return "BearerToken(<set>)"


@dataclass(frozen=True, slots=True)
class StaticKeys:
    """Access keys that do not change while the model lives."""

    keys: AwsKeys

    def current(self) -> AwsKeys:
        """The keys to sign with."""
        return self.keys


class BotocoreKeys:
    """Keys from botocore's credential chain, looked up off the event loop, once.

    `akeys` runs the lookup in a thread on first use, one lookup for all the
    calls that wait for it, and keeps what it found; temporary keys are
    refreshed (in a thread again) only when botocore says they are about to
    expire. A failed lookup is remembered for `failure_ttl` seconds: `akeys`
    raises the same error at once until then.

    Args:
        session: The botocore session to ask.
        profile: The profile asked for, named by errors.
        failure_ttl: Seconds a failed lookup is remembered.
        clock: Monotonic seconds; tests pass their own.
    """

    def __init__(
        self,
        session: Any,
        profile: str | None,
        *,
        failure_ttl: float = LOOKUP_FAILURE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_ttl = failure_ttl
        self.clock = clock
        self.method: str | None = None
        """Where botocore found the keys (`shared-credentials-file`, `sso`, `iam-role`, ...)."""
        self._session = session
        self._profile = profile
        self._lock = threading.Lock()  # calls may come from several event loops
        self._credentials: Any = None
        self._keys: AwsKeys | None = None
        self._failure: tuple[float, ConfigurationError] | None = None
        self._pending: concurrent.futures.Future[AwsKeys] | None = None

    async def akeys(self) -> AwsKeys:
        """The keys to sign with, frozen so the three parts belong together.

        Raises:
            ConfigurationError: `MissingCredentialsError` when the chain finds
                none; a `ConfigurationError` when botocore fails to load or
                refresh them.
        """
        failure = self._failure
        if failure is not None and self.clock() - failure[0] < self.failure_ttl:
            raise _again(failure[1])
        keys = self._keys
        if keys is not None and not _refresh_needed(self._credentials):
            return keys
        try:
            # Shielded: a caller that gives up leaves the lookup running for the others.
            return await asyncio.shield(asyncio.wrap_future(self._lookup()))
        except ConfigurationError as exc:  # each waiter raises its own copy
            raise _again(exc) from exc.__cause__

    def _lookup(self) -> concurrent.futures.Future[AwsKeys]:
        """The lookup in progress, or a new one started in a thread."""
        with self._lock:
            pending = self._pending
            if pending is None:
                pending = self._pending = concurrent.futures.Future()
                pending.set_running_or_notify_cancel()
                thread = threading.Thread(
                    target=self._run, args=(pending,), name="tidemill-aws-credentials", daemon=True
                )
                thread.start()
            return pending

    def _run(self, pending: concurrent.futures.Future[AwsKeys]) -> None:
        try:
            keys = self._find()
        except ConfigurationError as exc:
            self._failure = (self.clock(), exc)
            self._finish(pending)
            pending.set_exception(exc)
        except BaseException as exc:  # not remembered: the next call asks again
            self._finish(pending)
            pending.set_exception(exc)
        else:
            self._keys, self._failure = keys, None
            self._finish(pending)
            pending.set_result(keys)

    def _finish(self, pending: concurrent.futures.Future[AwsKeys]) -> None:
        with self._lock:
            if self._pending is pending:
                self._pending = None

    def _find(self) -> AwsKeys:
        """Blocking: ask the chain (the first time), then freeze the keys (refreshing them)."""
        if self._credentials is None:
            found = _botocore_credentials(self._session, self._profile)
            self.method = str(getattr(found, "method", "botocore"))
            self._credentials = found
        exceptions = importlib.import_module("botocore.exceptions")
        try:
            frozen = self._credentials.get_frozen_credentials()
        except exceptions.BotoCoreError as exc:
            raise ConfigurationError(
                f"botocore could not refresh the AWS credentials: {exc}",
                hint="Check the profile's SSO session or role, or " + _MISSING_HINT,
                context={"provider": "bedrock", "profile": self._profile},
            ) from exc
        return AwsKeys(str(frozen.access_key), str(frozen.secret_key), frozen.token or None)


def _refresh_needed(credentials: Any) -> bool:
    """Whether botocore's temporary keys are about to expire (static keys never are)."""
    check = getattr(credentials, "refresh_needed", None)
    return bool(check()) if callable(check) else False


def _again(error: ConfigurationError) -> ConfigurationError:
    """A fresh copy of a remembered error, so each raise has its own traceback."""
    copy = type(error)(error.message, hint=error.hint, context=error.context)
    copy.__cause__ = error.__cause__
    return copy


BedrockAuth = BearerToken | StaticKeys | BotocoreKeys
"""How a Bedrock request is authorised."""


@dataclass(frozen=True, slots=True)
class BedrockAccess:
    """The resolved region, endpoint and authorisation of one Bedrock model."""

    region: str
    auth: BedrockAuth
    credentials: Credentials
    """The same facts as a `Credentials` (base URL, region, secrets to scrub)."""

    @property
    def signs(self) -> bool:
        """Whether requests are SigV4-signed (not sent with a bearer token)."""
        return not isinstance(self.auth, BearerToken)

    def model_url(self, model_name: str, operation: str) -> str:
        """`{endpoint}/model/{model id}/{operation}`, the id percent-encoded (`:` as `%3A`)."""
        return f"{self.credentials.base_url}/model/{quote(model_name, safe='')}/{operation}"

    def headers(self, accept: str) -> dict[str, str]:
        """The headers of a JSON POST answered with `accept`.

        With a Bedrock API key they carry it as a bearer token; the extra
        headers of the credentials come last (and are not signed).
        """
        headers = {"content-type": "application/json", "accept": accept}
        if isinstance(self.auth, BearerToken):
            headers["authorization"] = f"Bearer {self.auth.token}"
        return {**headers, **self.credentials.headers}

    async def sign(self, call: HttpCall, *, found: Callable[[AwsKeys], None]) -> HttpCall:
        """Return `call` with its SigV4 headers (unchanged when a bearer token authorises it).

        The signature covers the host, the date, the session token and the
        exact JSON bytes the HTTP client sends (`tidemill.llm._json.dumps`).
        Keys from botocore's chain are looked up on the first call, off the
        event loop (see `BotocoreKeys`), and handed to `found` each time, so
        the caller can scrub them from its errors.

        Raises:
            ConfigurationError: `MissingCredentialsError` when botocore's chain
                finds no keys (remembered for a while: see `BotocoreKeys`).
        """
        auth = self.auth
        if isinstance(auth, BearerToken):
            return call
        keys: AwsKeys
        if isinstance(auth, BotocoreKeys):
            keys = await auth.akeys()
            found(keys)
        else:
            keys = auth.current()
        signature = sign_v4(
            "POST",
            call.url,
            body=dumps(call.body).encode("utf-8"),
            keys=keys,
            region=self.region,
            service=SIGNING_NAME,
        )
        return HttpCall(call.url, {**call.headers, **signature}, call.body)


def key_secrets(keys: AwsKeys) -> tuple[str, ...]:
    """The secret parts of `keys` (the secret key, the session token), to scrub from errors."""
    return tuple(k for k in (keys.secret_access_key, keys.session_token) if k)


def resolve_bedrock_access(
    credentials: Credentials | None = None,
    *,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    api_key: str | None = None,
    profile: str | None = None,
    base_url: str | None = None,
    headers: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BedrockAccess:
    """Find the region, endpoint and credentials of a Bedrock model.

    Raises:
        ConfigurationError: Without a region or credentials, naming what to set
            (botocore's chain is asked later, by `BotocoreKeys.akeys`).
        MissingDependencyError: When `profile=` is given without botocore installed.

    Examples:
        >>> access = resolve_bedrock_access(
        ...     region="eu-west-1", access_key_id="AKIDEXAMPLE", secret_access_key="secret",
        ...     environ={})
        >>> access.credentials.base_url, access.signs
        ('https://bedrock-runtime.eu-west-1.amazonaws.com', True)
        >>> resolve_bedrock_access(region="eu-west-1",
        ...                        environ={"AWS_BEARER_TOKEN_BEDROCK": "bedrock-key"}).signs
        False
    """
    env = os.environ if environ is None else environ
    base = credentials or Credentials()
    given_keys = bool(
        access_key_id or secret_access_key or api_key or base.aws_access_key_id
        or base.aws_secret_access_key or base.api_key
    )  # fmt: skip
    auth, session = _auth(
        base,
        access_key_id=access_key_id or base.aws_access_key_id,
        secret_access_key=secret_access_key or base.aws_secret_access_key,
        session_token=session_token or base.aws_session_token,
        api_key=api_key or base.api_key,
        profile=profile,
        env=env,
    )
    found_region = (
        region
        or base.region
        or _env(env, "AWS_REGION")
        or _env(env, "AWS_DEFAULT_REGION")
        or _session_region(session, profile)
    )
    if not found_region:
        raise MissingCredentialsError(
            "No AWS region for the bedrock provider.",
            hint="Set AWS_REGION (or AWS_DEFAULT_REGION), or pass region='us-east-1'.",
            context={"provider": "bedrock", "env": "AWS_REGION"},
        )
    env_host = _env(env, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
    aws_host = f"https://bedrock-runtime.{found_region}.amazonaws.com"
    host = base_url or base.base_url or env_host or aws_host
    if not given_keys and profile is None and not trusts_url(host, env_host, aws_host):
        raise MissingCredentialsError(
            f"No AWS credentials for the bedrock endpoint {host}: the environment's "
            f"credentials are sent only to {aws_host} or $AWS_ENDPOINT_URL_BEDROCK_RUNTIME.",
            hint="Pass access_key_id= and secret_access_key= (or api_key=) for that endpoint, "
            "or set AWS_ENDPOINT_URL_BEDROCK_RUNTIME to it to trust it with them.",
            context={"provider": "bedrock", "base_url": host},
        )
    keys = auth.current() if isinstance(auth, StaticKeys) else None  # botocore's: on first use
    resolved = Credentials(
        api_key=auth.token if isinstance(auth, BearerToken) else None,
        base_url=host.rstrip("/"),
        headers={**base.headers, **(headers or {})},
        region=found_region,
        aws_access_key_id=keys.access_key_id if keys else None,
        aws_secret_access_key=keys.secret_access_key if keys else None,
        aws_session_token=keys.session_token if keys else None,
    )
    return BedrockAccess(found_region, auth, resolved)


def _auth(
    base: Credentials,
    *,
    access_key_id: str | None,
    secret_access_key: str | None,
    session_token: str | None,
    api_key: str | None,
    profile: str | None,
    env: Mapping[str, str],
) -> tuple[BedrockAuth, Any]:
    """The authorisation, and the botocore session when one was opened."""
    if access_key_id or secret_access_key:
        return StaticKeys(_pair(access_key_id, secret_access_key, session_token, "argument")), None
    if api_key:
        return BearerToken(api_key), None
    if profile is None:
        bearer = _env(env, "AWS_BEARER_TOKEN_BEDROCK")
        if bearer:
            return BearerToken(bearer), None
        env_key, env_secret = _env(env, "AWS_ACCESS_KEY_ID"), _env(env, "AWS_SECRET_ACCESS_KEY")
        if env_key or env_secret:
            token = _env(env, "AWS_SESSION_TOKEN")
            return StaticKeys(_pair(env_key, env_secret, token, "environment")), None
    session = _botocore_session(profile)
    if session is None:
        raise MissingCredentialsError(
            "No AWS credentials for the bedrock provider.",
            hint=_MISSING_HINT,
            context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID"},
        )
    _check_profile(session, profile)
    return BotocoreKeys(session, profile), session


def _pair(
    access_key_id: str | None, secret_access_key: str | None, token: str | None, where: str
) -> AwsKeys:
    if not access_key_id or not secret_access_key:
        missing = "AWS_SECRET_ACCESS_KEY" if access_key_id else "AWS_ACCESS_KEY_ID"
        given = "secret_access_key=" if access_key_id else "access_key_id="
        raise ConfigurationError(
            f"Half an AWS key pair for the bedrock provider (from the {where}): "
            f"{missing} is missing.",
            hint=f"Set {missing}, or pass {given}; both halves are needed to sign requests.",
            context={"provider": "bedrock", "env": missing},
        )
    return AwsKeys(access_key_id, secret_access_key, token or None)


def _botocore_session(profile: str | None) -> Any:
    """A botocore session, or `None` without botocore (an error if a profile was asked for)."""
    try:
        sessions = importlib.import_module("botocore.session")
    except ImportError:
        if profile is not None:
            raise MissingDependencyError(
                "botocore", extra="bedrock", feature="Reading an AWS profile"
            ) from None
        return None
    return sessions.Session(profile=profile)


def _check_profile(session: Any, profile: str | None) -> None:
    """Refuse a profile the shared files do not have (reading them is quick, unlike the chain)."""
    if profile is None:
        return
    exceptions = importlib.import_module("botocore.exceptions")
    try:
        known = session.available_profiles
    except exceptions.BotoCoreError as exc:
        known, problem = [], str(exc)
    else:
        problem = f"The config profile ({profile}) could not be found"
    if profile not in known:
        raise ConfigurationError(
            f"botocore could not load AWS credentials: {problem}",
            hint="Check the profile name and ~/.aws/config, or " + _MISSING_HINT,
            context={"provider": "bedrock", "profile": profile},
        )


def _botocore_credentials(session: Any, profile: str | None) -> Any:
    """Blocking: botocore's credential chain (it may ask the network), or an error."""
    exceptions = importlib.import_module("botocore.exceptions")
    try:
        found = session.get_credentials()
    except exceptions.BotoCoreError as exc:
        raise ConfigurationError(
            f"botocore could not load AWS credentials: {exc}",
            hint="Check the profile name and ~/.aws/config, or " + _MISSING_HINT,
            context={"provider": "bedrock", "profile": profile},
        ) from exc
    if found is None:
        where = f"the {profile!r} profile" if profile else "botocore's credential chain"
        raise MissingCredentialsError(
            f"No AWS credentials for the bedrock provider, not even in {where}.",
            hint=_MISSING_HINT.split(" To use")[0],
            context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID", "profile": profile},
        )
    return found


def _session_region(session: Any, profile: str | None) -> str | None:
    """The region of the profile's configuration, when botocore is installed."""
    if session is None:
        session = _botocore_session(profile)
        if session is None:
            return None
    exceptions = importlib.import_module("botocore.exceptions")
    try:
        value = session.get_config_variable("region")
    except exceptions.BotoCoreError:
        return None
    return value if isinstance(value, str) and value else None


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None
