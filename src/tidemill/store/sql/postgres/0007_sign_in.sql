-- Signing in: each user's password hash, and the tokens that stand for a user (personal
-- access tokens with scopes, and browser sessions with their CSRF token), stored hashed.
CREATE TABLE tm_ws_passwords (
    workspace  TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, user_name)
);

CREATE TABLE tm_ws_tokens (
    id           TEXT PRIMARY KEY,
    workspace    TEXT NOT NULL,
    kind         TEXT NOT NULL,
    user_name    TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL,
    scopes       TEXT NOT NULL DEFAULT '[]',
    csrf_hash    TEXT,
    created_at   DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION,
    revoked_at   DOUBLE PRECISION
);
CREATE INDEX tm_ws_tokens_user ON tm_ws_tokens (workspace, user_name, kind);
