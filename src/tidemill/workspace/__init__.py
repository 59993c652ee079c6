"""The workspace: everything a team shares, at a path, versioned, with permissions and secrets.

Items live at `u/<user>/<name>` and `f/<folder>/<name>`: scripts, flows,
resources, variables, resource types and schedules. Scripts, flows and resources keep
every version; drafts are per user; folders grant roles to users and groups;
secret variables are encrypted at rest; every change is audited. Every
operation is asked as one principal (`AsyncWorkspace(..., user=...)`), and the
permission module (`Permissions`) answers it.

Examples:
    >>> import tempfile
    >>> from tidemill.workspace import Workspace
    >>> with Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
    ...     _ = ws.add_folder("ai")
    ...     _ = ws.write("f/ai/token", "variable", "sk-test", secret=True)
    ...     print(ws.get("f/ai/token").value, ws.get("f/ai/token", reveal=True).value)
    None sk-test
"""

from tidemill.workspace._agents import (
    AGENT_TYPE,
    agent_definition,
    agent_diff,
    linked_agent,
    overlay_tool_inputs,
    save_as_agent,
    select_tools,
    unlink,
)
from tidemill.workspace._closure import closure
from tidemill.workspace._content import MissingReferences
from tidemill.workspace._credentials import DOMAINS, MIN_PASSWORD, Identity, NewToken, Scope, Token
from tidemill.workspace._crypto import Keyring, MasterKey, SecretKeyError, load_master_key
from tidemill.workspace._facade import Workspace
from tidemill.workspace._models import (
    KINDS,
    ROLES,
    AuditEntry,
    Draft,
    Folder,
    Grant,
    Group,
    Item,
    ItemKind,
    Principal,
    Role,
    User,
    Version,
)
from tidemill.workspace._paths import InvalidPath, ItemPath
from tidemill.workspace._permissions import Action, Permissions
from tidemill.workspace._queries import record_audit
from tidemill.workspace._references import Resolved, has_references
from tidemill.workspace._resource_types import BUILTIN_TYPES, ResourceType, builtin_type
from tidemill.workspace._schedules import ScheduleFire, ScheduleInfo
from tidemill.workspace._search import SearchHit
from tidemill.workspace._session import DEFAULT_WORKSPACE, local_user
from tidemill.workspace._sign_in import Authenticator
from tidemill.workspace._sync_plan import FolderChange, ItemChange, PullReport, PushPlan
from tidemill.workspace._tree import SyncFileError
from tidemill.workspace._values import InvalidValue
from tidemill.workspace._workspace import AsyncWorkspace, RunPlan

__all__ = [
    "AGENT_TYPE",
    "BUILTIN_TYPES",
    "DEFAULT_WORKSPACE",
    "DOMAINS",
    "KINDS",
    "MIN_PASSWORD",
    "ROLES",
    "Action",
    "AsyncWorkspace",
    "AuditEntry",
    "Authenticator",
    "Draft",
    "Folder",
    "FolderChange",
    "Grant",
    "Group",
    "Identity",
    "InvalidPath",
    "InvalidValue",
    "Item",
    "ItemChange",
    "ItemKind",
    "ItemPath",
    "Keyring",
    "MasterKey",
    "MissingReferences",
    "NewToken",
    "Permissions",
    "Principal",
    "PullReport",
    "PushPlan",
    "Resolved",
    "ResourceType",
    "Role",
    "RunPlan",
    "ScheduleFire",
    "ScheduleInfo",
    "Scope",
    "SearchHit",
    "SecretKeyError",
    "SyncFileError",
    "Token",
    "User",
    "Version",
    "Workspace",
    "agent_definition",
    "agent_diff",
    "builtin_type",
    "closure",
    "has_references",
    "linked_agent",
    "load_master_key",
    "local_user",
    "overlay_tool_inputs",
    "record_audit",
    "save_as_agent",
    "select_tools",
    "unlink",
]
