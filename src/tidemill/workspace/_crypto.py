"""Secrets at rest: a data key per workspace, wrapped by a master key, AES-GCM throughout.

The scheme has two levels of keys:

- A **data key** (`DataKey`): 256 random bits, one per workspace. It encrypts
  each secret value with AES-GCM under a fresh 12-byte nonce, as
  `"v1:" + urlsafe_base64(nonce + ciphertext)`. The item's path (such as
  `"default/f/x/token"`) is the associated data (aad): the ciphertext is bound to
  its item, so a value copied to another path, altered, or read with another
  data key fails to decrypt instead of yielding the wrong secret.
- A **master key** (`MasterKey`): 256 bits that never live in the database. It
  *wraps* (encrypts) each workspace's data key, again with AES-GCM, with aad
  `b"tidemill-data-key:" + workspace`. The database stores only the wrapped
  form, `"<key_id>:" + base64(nonce + ciphertext)`; the key id in front is a
  short fingerprint of the master key, so a wrong key is named, not guessed at.

`load_master_key` finds the master key: `TIDEMILL_MASTER_KEY` (the key's
text), else `TIDEMILL_MASTER_KEY_FILE` (a file holding it), else, for a SQLite
store, the file `<database>.key` next to the database, created on first use
with mode 0600. A PostgreSQL store has no such file: set one of the variables.

Rotation: build a `Keyring` with the new master key and the old ones as
`previous`; it still unwraps data keys wrapped by an old key, and `rewrap`
wraps them again with the new one. Once `needs_rewrap` is false for every
stored data key, the old master keys can be dropped. Secrets themselves are
never re-encrypted by a master key rotation: only the small wrapped data keys.

Examples:
    >>> master = MasterKey.generate()
    >>> keyring = Keyring(master)
    >>> data_key, wrapped = keyring.new_data_key(workspace="default")
    >>> wrapped.startswith(master.key_id + ":")
    True
    >>> token = data_key.encrypt("s3cret", aad="default/f/x/token")
    >>> token.startswith("v1:")
    True
    >>> keyring.data_key(wrapped, workspace="default").decrypt(token, aad="default/f/x/token")
    's3cret'
    >>> try:
    ...     data_key.decrypt(token, aad="default/f/y/token")
    ... except SecretKeyError as exc:
    ...     print(type(exc).__name__, "s3cret" in str(exc))
    SecretKeyError False

    Rotating the master key rewraps the data key; the secrets stay as they are:

    >>> new_master = MasterKey.generate()
    >>> rotating = Keyring(new_master, previous=[master])
    >>> rotating.needs_rewrap(wrapped)
    True
    >>> rewrapped = rotating.rewrap(wrapped, workspace="default")
    >>> Keyring(new_master).data_key(rewrapped, workspace="default").decrypt(
    ...     token, aad="default/f/x/token"
    ... )
    's3cret'
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import os
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tidemill.errors import ConfigurationError

__all__ = [
    "KEY_ENV",
    "KEY_FILE_ENV",
    "DataKey",
    "Keyring",
    "MasterKey",
    "SecretKeyError",
    "load_master_key",
]

KEY_ENV = "TIDEMILL_MASTER_KEY"
"""The environment variable holding the master key's text."""

KEY_FILE_ENV = "TIDEMILL_MASTER_KEY_FILE"
"""The environment variable naming a file that holds the master key's text."""

_KEY_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_KEY_ID_DOMAIN = b"tidemill-master-key"
_WRAP_AAD = b"tidemill-data-key:"
_SECRET_AAD = b"tidemill-secret:"
_VERSION = "v1:"
_KEY_TEXT = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_KEY_FILE_SUFFIX = ".key"

_MAKE_A_KEY = (
    'Make one with `tidemill ws keys new`, or with: python -c "import base64, secrets; '
    'print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"'
)


class SecretKeyError(ConfigurationError):
    """A master key or data key is missing, malformed or wrong, or a ciphertext fails to open.

    The message names keys by their id and items by their path; it never quotes
    a key, a ciphertext or a plaintext.

    Examples:
        >>> try:
        ...     MasterKey.parse("not a key!")
        ... except SecretKeyError as exc:
        ...     print(exc.message)
        The master key is not urlsafe base64 text.
    """


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    """Urlsafe base64 `text`, padded or not, decoded; None when it is not base64."""
    if not _KEY_TEXT.fullmatch(text):
        return None
    text = text.rstrip("=")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _fingerprint(key: bytes) -> str:
    return hashlib.sha256(_KEY_ID_DOMAIN + key).hexdigest()[:16]


def _split_wrapped(wrapped: str) -> tuple[str, bytes]:
    """The key id and the nonce plus ciphertext of a wrapped data key."""
    key_id, sep, body = str(wrapped).partition(":")
    blob = _b64decode(body) if sep and key_id else None
    if blob is None or len(blob) < _NONCE_BYTES + _TAG_BYTES:
        raise SecretKeyError(
            "The stored data key is not a wrapped data key.",
            hint="A wrapped data key reads '<key id>:<base64>'; it may have been edited by hand.",
        )
    return key_id, blob


@dataclass(frozen=True, repr=False)
class MasterKey:
    """The key that wraps every workspace's data key; it never lives in the database.

    Args:
        key: The 32 key bytes.

    Attributes:
        key_id: A short fingerprint naming the key in wrapped data keys and in
            errors: the first 16 hex characters of
            `sha256(b"tidemill-master-key" + key)`.

    Examples:
        >>> key = MasterKey(bytes(32))
        >>> key
        MasterKey(key_id='...')
        >>> MasterKey.parse(key.encoded()) == key
        True
    """

    key: bytes = field(compare=False)
    key_id: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) != _KEY_BYTES:
            size = len(self.key) if isinstance(self.key, bytes | bytearray) else None
            raise SecretKeyError(
                f"A master key is {_KEY_BYTES} bytes, not "
                f"{size if size is not None else type(self.key).__name__}.",
                hint=_MAKE_A_KEY,
            )
        object.__setattr__(self, "key_id", _fingerprint(self.key))

    def __repr__(self) -> str:
        return f"MasterKey(key_id={self.key_id!r})"

    @classmethod
    def generate(cls) -> MasterKey:
        """A new random master key."""
        return cls(secrets.token_bytes(_KEY_BYTES))

    @classmethod
    def parse(cls, text: str, *, source: str = "The master key") -> MasterKey:
        """The master key written as urlsafe base64 text (as `encoded` writes it).

        Args:
            text: 32 bytes in urlsafe base64, with or without `=` padding;
                whitespace (a trailing newline, say) is ignored.
            source: Where the text came from, for the error message.

        Raises:
            SecretKeyError: The text is not base64, or not 32 bytes. The message
                does not quote the text.
        """
        cleaned = "".join(str(text).split())
        if not cleaned:
            raise SecretKeyError(f"{source} is empty.", hint=_MAKE_A_KEY)
        raw = _b64decode(cleaned)
        if raw is None:
            raise SecretKeyError(f"{source} is not urlsafe base64 text.", hint=_MAKE_A_KEY)
        if len(raw) != _KEY_BYTES:
            raise SecretKeyError(
                f"{source} decodes to {len(raw)} bytes; a master key is {_KEY_BYTES}.",
                hint=_MAKE_A_KEY,
            )
        return cls(raw)

    def encoded(self) -> str:
        """The key as urlsafe base64 text, for `TIDEMILL_MASTER_KEY` or a key file."""
        return _b64encode(self.key)

    def wrap(self, data_key: bytes, *, workspace: str) -> str:
        """`data_key` encrypted by this key, bound to `workspace`, as `"<key_id>:<base64>"`.

        Args:
            data_key: The 32 bytes of a workspace's data key.
            workspace: The workspace it belongs to; unwrapping for another fails.
        """
        if len(data_key) != _KEY_BYTES:
            raise SecretKeyError(f"A data key is {_KEY_BYTES} bytes, not {len(data_key)}.")
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self.key).encrypt(nonce, bytes(data_key), _wrap_aad(workspace))
        return f"{self.key_id}:{_b64encode(nonce + sealed)}"

    def unwrap(self, wrapped: str, *, workspace: str) -> bytes:
        """The data key that `wrap` wrapped for `workspace`.

        Raises:
            SecretKeyError: It was wrapped by another master key (the message
                names both key ids), was altered, or belongs to another workspace.
        """
        key_id, blob = _split_wrapped(wrapped)
        if key_id != self.key_id:
            raise SecretKeyError(
                f"The data key of workspace {workspace!r} was wrapped with master key "
                f"{key_id!r}, but this master key is {self.key_id!r}.",
                hint=f"Set {KEY_ENV} to the master key {key_id!r}, or keep it in the "
                "keyring's `previous` keys while rotating.",
                context={"workspace": workspace, "needed": key_id, "have": [self.key_id]},
            )
        nonce, sealed = blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]
        try:
            data_key = AESGCM(self.key).decrypt(nonce, sealed, _wrap_aad(workspace))
        except InvalidTag:
            raise SecretKeyError(
                f"The data key of workspace {workspace!r} does not open with master key "
                f"{self.key_id!r}: it was altered, or was wrapped for another workspace.",
                hint="Restore the workspace's stored data key from a backup.",
                context={"workspace": workspace, "key_id": self.key_id},
            ) from None
        if len(data_key) != _KEY_BYTES:
            raise SecretKeyError(
                f"The data key of workspace {workspace!r} is {len(data_key)} bytes, "
                f"not {_KEY_BYTES}.",
                context={"workspace": workspace},
            )
        return data_key


def _wrap_aad(workspace: str) -> bytes:
    return _WRAP_AAD + workspace.encode("utf-8")


class DataKey:
    """A workspace's key for its secrets: AES-GCM with the item's path as aad.

    Args:
        key: The 32 key bytes (from `generate`, or unwrapped by a `MasterKey`).

    Examples:
        >>> key = DataKey.generate()
        >>> key
        DataKey(<hidden>)
        >>> key.decrypt(key.encrypt("hunter2", aad="ws/item"), aad="ws/item")
        'hunter2'
    """

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != _KEY_BYTES:
            raise SecretKeyError(f"A data key is {_KEY_BYTES} bytes.")
        self._key = key

    def __repr__(self) -> str:
        return "DataKey(<hidden>)"

    @classmethod
    def generate(cls) -> DataKey:
        """A new random 256-bit data key."""
        return cls(secrets.token_bytes(_KEY_BYTES))

    @property
    def raw(self) -> bytes:
        """The key bytes, only to be wrapped by a `MasterKey`."""
        return self._key

    def encrypt(self, plaintext: str, *, aad: str) -> str:
        """`plaintext` encrypted, as `"v1:" + urlsafe_base64(nonce + ciphertext)`.

        Args:
            plaintext: The secret value.
            aad: The item it belongs to, such as `"default/f/x/token"`;
                `decrypt` must be given the same, so the ciphertext cannot be
                moved to another item.
        """
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._key).encrypt(nonce, plaintext.encode("utf-8"), _secret_aad(aad))
        return _VERSION + _b64encode(nonce + sealed)

    def decrypt(self, token: str, *, aad: str) -> str:
        """The plaintext that `encrypt` made `token` from, for the same `aad`.

        Raises:
            SecretKeyError: The token is malformed or altered, belongs to another
                item, or was encrypted with another data key. The message quotes
                neither the token nor any plaintext.
        """
        blob = None
        if isinstance(token, str) and token.startswith(_VERSION):
            blob = _b64decode(token[len(_VERSION) :])
        if blob is None or len(blob) < _NONCE_BYTES + _TAG_BYTES:
            raise SecretKeyError(
                f"The stored secret {aad!r} is not an encrypted value.",
                hint="Encrypted values read 'v1:<base64>'; set the secret again.",
                context={"aad": aad},
            )
        nonce, sealed = blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]
        try:
            plain = AESGCM(self._key).decrypt(nonce, sealed, _secret_aad(aad))
        except InvalidTag:
            raise SecretKeyError(
                f"The stored secret {aad!r} does not decrypt: it was altered, copied from "
                "another item, or encrypted with another workspace's data key.",
                hint="Set the secret again.",
                context={"aad": aad},
            ) from None
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretKeyError(
                f"The stored secret {aad!r} is not UTF-8 text.", context={"aad": aad}
            ) from None


def _secret_aad(aad: str) -> bytes:
    return _SECRET_AAD + aad.encode("utf-8")


class Keyring:
    """The master key plus older master keys still accepted for unwrapping (during rotation).

    Args:
        master: The current master key: it wraps every new or rewrapped data key.
        previous: Older master keys, only to unwrap data keys not yet rewrapped.

    Examples:
        >>> old, new = MasterKey(bytes(32)), MasterKey(bytes(range(32)))
        >>> Keyring(new, previous=[old])
        Keyring(master='...', previous=['...'])
    """

    __slots__ = ("_by_id", "_master", "_previous")

    def __init__(self, master: MasterKey, *, previous: Sequence[MasterKey] = ()) -> None:
        self._master = master
        by_id: dict[str, MasterKey] = {}
        for key in previous:
            by_id.setdefault(key.key_id, key)
        by_id.pop(master.key_id, None)
        self._previous = tuple(by_id.values())
        self._by_id = {master.key_id: master, **by_id}

    def __repr__(self) -> str:
        previous = [key.key_id for key in self._previous]
        return f"Keyring(master={self._master.key_id!r}, previous={previous!r})"

    @property
    def master(self) -> MasterKey:
        """The current master key."""
        return self._master

    @property
    def previous(self) -> tuple[MasterKey, ...]:
        """The older master keys accepted for unwrapping, without the current one."""
        return self._previous

    def new_data_key(self, *, workspace: str) -> tuple[DataKey, str]:
        """A new data key for `workspace`, and its wrapped form to store."""
        key = DataKey.generate()
        return key, self._master.wrap(key.raw, workspace=workspace)

    def data_key(self, wrapped: str, *, workspace: str) -> DataKey:
        """The data key of `workspace`, unwrapped by the master key that wrapped it.

        Raises:
            SecretKeyError: No key of this keyring has the key id in front of
                `wrapped` (the message names the one needed), or it does not open.
        """
        key_id, _ = _split_wrapped(wrapped)
        master = self._by_id.get(key_id)
        if master is None:
            known = list(self._by_id)
            raise SecretKeyError(
                f"The data key of workspace {workspace!r} was wrapped with master key "
                f"{key_id!r}, which is not in the keyring (it has {', '.join(map(repr, known))}).",
                hint=f"Set {KEY_ENV} to the master key {key_id!r}, or pass it among the "
                "previous keys while rotating.",
                context={"workspace": workspace, "needed": key_id, "have": known},
            )
        return DataKey(master.unwrap(wrapped, workspace=workspace))

    def rewrap(self, wrapped: str, *, workspace: str) -> str:
        """`wrapped` unwrapped by whichever key wrapped it, and wrapped by the current master."""
        return self._master.wrap(
            self.data_key(wrapped, workspace=workspace).raw, workspace=workspace
        )

    def needs_rewrap(self, wrapped: str) -> bool:
        """Whether `wrapped` was wrapped by a master key other than the current one."""
        key_id, _ = _split_wrapped(wrapped)
        return key_id != self._master.key_id


def load_master_key(
    *, environ: Mapping[str, str], sqlite_path: Path | None, create: bool = True
) -> MasterKey:
    """The master key: from the environment, else from the key file of a SQLite store.

    In order: `TIDEMILL_MASTER_KEY` (the key's text); `TIDEMILL_MASTER_KEY_FILE`
    (a file holding it, whose permissions are the deployment's business: secret
    mounts are often 0644); for a SQLite store, `<sqlite_path>.key` next to the
    database, created with mode 0600 when absent and `create` is true, and
    refused when group or others can read it.

    Args:
        environ: The environment to read, usually `os.environ`.
        sqlite_path: The SQLite database file, or None for a PostgreSQL store.
        create: Whether to create the SQLite key file when it does not exist.

    Raises:
        SecretKeyError: No key is found, or the one found is malformed or its
            file is readable by others.
    """
    if KEY_ENV in environ:
        return MasterKey.parse(environ[KEY_ENV], source=KEY_ENV)
    if KEY_FILE_ENV in environ:
        path = Path(environ[KEY_FILE_ENV]).expanduser()
        return MasterKey.parse(_read_key_file(path, KEY_FILE_ENV), source=f"The key file {path}")
    if sqlite_path is None:
        raise SecretKeyError(
            f"no master key: set {KEY_ENV} (or {KEY_FILE_ENV}, a file holding it); a "
            "PostgreSQL store keeps no key file of its own.",
            hint=_MAKE_A_KEY + ". Keep it outside the database, and keep a copy: "
            "without it the workspace's secrets cannot be read.",
        )
    path = Path(sqlite_path).with_name(Path(sqlite_path).name + _KEY_FILE_SUFFIX)
    return _sqlite_key(path, create=create)


def _sqlite_key(path: Path, *, create: bool) -> MasterKey:
    if not path.exists():
        if not create:
            raise SecretKeyError(
                f"no master key: the key file {path} does not exist.",
                hint=f"Restore it from a backup, or set {KEY_ENV}. {_MAKE_A_KEY}",
            )
        created = _create_key_file(path)
        if created is not None:
            return created
    _check_private(path)
    return MasterKey.parse(_read_key_file(path, None), source=f"The key file {path}")


def _create_key_file(path: Path) -> MasterKey | None:
    """A new key written to `path` (mode 0600), or None when another process made it first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = MasterKey.generate()
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key.encoded() + "\n")
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return key


def _check_private(path: Path) -> None:
    if os.name == "nt":  # pragma: no cover - POSIX modes mean little on Windows
        return
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SecretKeyError(
            f"The key file {path} is readable by others (mode {mode:o}).",
            hint=f"Make it private with: chmod 600 {path}",
            context={"path": str(path), "mode": oct(mode)},
        )


def _read_key_file(path: Path, env: str | None) -> str:
    """The text of a key file; a file just created by another process is waited for briefly."""
    named = f" (named by {env})" if env else ""
    for _ in range(50):
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            missing = exc.errno == errno.ENOENT
            raise SecretKeyError(
                f"The key file {path}{named} "
                + ("does not exist." if missing else f"cannot be read: {exc.strerror}."),
                hint=_MAKE_A_KEY,
                context={"path": str(path)},
            ) from None
        if text.strip() or env is not None:
            return text
        time.sleep(0.02)  # created by another process that has not written it yet
    return text
