-- The proxy's calls (`/v1` of the server): who asked, with which token, for which
-- provider resource, and what it cost. A sibling of tm_usage, which is a run's.
CREATE TABLE tm_proxy_usage (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace     TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    token_id      TEXT,
    model         TEXT NOT NULL,
    resource      TEXT,
    provider      TEXT,
    status        INTEGER,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd      DOUBLE PRECISION,
    latency_ms    DOUBLE PRECISION NOT NULL,
    at            DOUBLE PRECISION NOT NULL
);
CREATE INDEX tm_proxy_usage_user ON tm_proxy_usage (workspace, user_name, id)
;
