"""`Session`: one workspace, one acting principal, and transactions that know both.

Every operation of `AsyncWorkspace` is a function over a `Context` run in one
store transaction: the context holds the workspace's queries, the acting
principal read from the store in that same transaction (so a user disabled a
moment ago can do nothing), and the `Permissions` built from them. Nothing
reads or writes an item except through a context, and so not without asking.
"""

from __future__ import annotations

import getpass
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tidemill.errors import PermissionDenied
from tidemill.store import DEFAULT_URL as DEFAULT_STORE
from tidemill.store import Store, StoreURL, Tx, check, upgrade
from tidemill.workspace._crypto import DataKey, Keyring, MasterKey, load_master_key
from tidemill.workspace._models import Principal
from tidemill.workspace._paths import NAME, check_name
from tidemill.workspace._permissions import Permissions
from tidemill.workspace._queries import Queries

__all__ = ["DEFAULT_WORKSPACE", "PREVIOUS_KEYS_ENV", "Context", "Session", "local_user"]

PREVIOUS_KEYS_ENV = "TIDEMILL_MASTER_KEY_PREVIOUS"
"""Older master keys (comma-separated) still accepted while a rotation rolls out."""

DEFAULT_WORKSPACE = "default"
"""The workspace used when none is named."""

T = TypeVar("T")


def local_user(environ: Mapping[str, str] | None = None) -> str:
    """The name of the person at this terminal: `TIDEMILL_USER`, else the login name.

    The login name is lowered and anything a user name cannot hold becomes `-`.

    Examples:
        >>> local_user({"TIDEMILL_USER": "alice"})
        'alice'
    """
    env = os.environ if environ is None else environ
    given = env.get("TIDEMILL_USER")
    if given:
        return check_name(given, what="user")
    try:
        login = getpass.getuser()
    except (KeyError, OSError):  # no login name in a container without a passwd entry
        login = "local"
    cleaned = re.sub(r"[^a-z0-9_-]+", "-", login.lower()).strip("-_")[:64] or "local"
    return cleaned if NAME.match(cleaned) else "local"


@dataclass(slots=True)
class Context:
    """One transaction of one workspace, as one principal."""

    q: Queries
    principal: Principal
    rules: Permissions
    now: float
    keys: Callable[[], Keyring]
    unwrapped: Callable[[str], DataKey]
    """The data key a wrapped one holds (the session keeps each it unwrapped)."""
    deferred: list[tuple[str, Callable[[], None]]] | None = None
    """Checks to run after the transaction's last write, by path (`_agent_references`);
    None: each write checks at once."""
    _data_key: DataKey | None = field(default=None, repr=False)

    def audit(self, action: str, path: str | None = None, **details: Any) -> None:
        """Record what the principal did (in this transaction: it commits with the change)."""
        self.q.audit(self.principal.name, action, path, details, self.now)

    def data_key(self) -> DataKey:
        """The workspace's data key, made (and wrapped by the master key) on first use."""
        if self._data_key is None:
            keyring = self.keys()
            wrapped = self.q.data_key()
            if wrapped:
                self._data_key = self.unwrapped(wrapped)
            else:
                self._data_key, wrapped = keyring.new_data_key(workspace=self.q.ws)
                self.q.set_data_key(wrapped)
        return self._data_key


class Session:
    """A store, a workspace in it, and who is acting.

    Args:
        store: The store, or its URL (`sqlite:///...`, `postgresql://...`);
            None: the embedded default, `.tidemill/tidemill.db`.
        workspace: The workspace's name.
        user: Who acts; None: the local user (`local_user`). The first user
            to open an empty workspace becomes its first admin.
        keyring: The master keys secrets are wrapped with; None: read when a
            secret is first used (`TIDEMILL_MASTER_KEY`, `TIDEMILL_MASTER_KEY_FILE`,
            or the key file next to a SQLite store; older keys still accepted
            during a rotation in `TIDEMILL_MASTER_KEY_PREVIOUS`).
        migrate: Bring the store's schema up to date on first use (the default
            for SQLite; PostgreSQL stores are upgraded with `tidemill db upgrade`).
        environ: The environment to read the user and the master key from.
        create: Start the workspace, with `user` as its first admin, when it
            does not exist yet (False: refuse, as a worker resolving a run's
            references does).
    """

    def __init__(
        self,
        store: Store | StoreURL | str | None = None,
        *,
        workspace: str = DEFAULT_WORKSPACE,
        user: str | None = None,
        keyring: Keyring | None = None,
        migrate: bool | None = None,
        environ: Mapping[str, str] | None = None,
        create: bool = True,
    ) -> None:
        self._create = create
        if isinstance(store, Store):
            self.store, self._owns_store = store, False
        else:
            url = store if isinstance(store, StoreURL) else StoreURL.parse(store or DEFAULT_STORE)
            self.store, self._owns_store = Store(url), True
        self.name = check_name(workspace, what="workspace")
        self._environ = os.environ if environ is None else environ
        self.user = check_name(user, what="user") if user else local_user(self._environ)
        self._keyring = keyring
        self._data_keys: dict[str, DataKey] = {}
        dialect = self.store.dialect
        self._migrate = dialect == "sqlite" if migrate is None else migrate
        self._ready = False

    def keyring(self) -> Keyring:
        """The master keys, loaded on first use."""
        if self._keyring is None:
            url = self.store.url
            master = load_master_key(
                environ=self._environ, sqlite_path=url.path if url.dialect == "sqlite" else None
            )
            # During a rotation, processes that already have the new key still open
            # data keys wrapped by the old ones until the rotation is done.
            older = self._environ.get(PREVIOUS_KEYS_ENV, "")
            previous = [
                MasterKey.parse(text, source=PREVIOUS_KEYS_ENV)
                for text in older.split(",")
                if text.strip()
            ]
            self._keyring = Keyring(master, previous=previous)
        return self._keyring

    async def _open(self) -> None:
        if not self._ready:
            if self._migrate:
                await upgrade(self.store)
            else:
                await check(self.store)
            self._ready = True

    async def transact(self, fn: Callable[[Context], T]) -> T:
        """Run `fn` in one transaction, as the acting principal."""
        await self._open()
        user = self.user

        def step(tx: Tx) -> T:
            return fn(self._context(tx, user))

        return await self.store.transact(step)

    def _context(self, tx: Tx, user: str) -> Context:
        q = Queries(tx, self.name)
        now = time.time()
        principal = q.principal(user)
        if principal is None:
            if self._create and q.data_key() is None:
                # An empty store: this workspace starts here, with its first admin.
                q.create_workspace("", now)
                q.add_user(user, is_admin=True, now=now)
                q.audit(user, "workspace.create", None, {"first_admin": user}, now)
                principal = Principal(user, is_admin=True)
            else:
                raise PermissionDenied(
                    f"{user} is not a user of workspace {self.name!r}.",
                    hint=f"A workspace admin adds it: tidemill ws users add {user}",
                    context={"principal": user, "workspace": self.name},
                )
        rules = Permissions(principal, q.grants())
        return Context(q, principal, rules, now, self.keyring, self._unwrap)

    def _unwrap(self, wrapped: str) -> DataKey:
        """The data key `wrapped` holds; unwrapped once per session (rotation wraps anew)."""
        found = self._data_keys.get(wrapped)
        if found is None:
            found = self._data_keys[wrapped] = self.keyring().data_key(wrapped, workspace=self.name)
        return found

    async def close(self) -> None:
        """Close the store, when this session opened it."""
        if self._owns_store:
            await self.store.close()
