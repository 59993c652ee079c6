-- The workspace: items at paths with versions, drafts, users, groups, folders and grants,
-- an audit log; runs record who they run as and which workspace item they ran.
CREATE TABLE tm_ws_workspaces (
    name       TEXT PRIMARY KEY,
    data_key   TEXT NOT NULL,
    generation BIGINT NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE tm_ws_users (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    is_admin   BOOLEAN NOT NULL DEFAULT FALSE,
    disabled   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_groups (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_members (
    workspace  TEXT NOT NULL,
    group_name TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    PRIMARY KEY (workspace, group_name, user_name)
);

CREATE TABLE tm_ws_folders (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_grants (
    workspace TEXT NOT NULL,
    target    TEXT NOT NULL,
    grantee   TEXT NOT NULL,
    role      TEXT NOT NULL,
    PRIMARY KEY (workspace, target, grantee)
);

CREATE TABLE tm_ws_items (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    secret        BOOLEAN NOT NULL DEFAULT FALSE,
    body          TEXT NOT NULL,
    version       BIGINT NOT NULL,
    updated_by    TEXT NOT NULL,
    updated_at    DOUBLE PRECISION NOT NULL,
    deleted_at    DOUBLE PRECISION,
    PRIMARY KEY (workspace, path)
);
-- Listing pages in byte order, as SQLite does, whatever the database's collation.
CREATE INDEX tm_ws_items_bytes ON tm_ws_items (workspace, path COLLATE "C");

CREATE TABLE tm_ws_versions (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    version       BIGINT NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    body          TEXT NOT NULL,
    message       TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    created_at    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, path, version)
);

CREATE TABLE tm_ws_drafts (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    owner         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    body          TEXT NOT NULL,
    updated_at    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, path, owner)
);

CREATE TABLE tm_ws_audit (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace TEXT NOT NULL,
    at        DOUBLE PRECISION NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    path      TEXT,
    details   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX tm_ws_audit_at ON tm_ws_audit (workspace, id);

ALTER TABLE tm_runs ADD COLUMN run_as TEXT;
ALTER TABLE tm_runs ADD COLUMN source TEXT
;
