-- Scoped memory of ai_agent steps: one row per message, per (memory id, flow/step key).
CREATE TABLE tm_agent_memory (
    memory_id TEXT NOT NULL,
    step_key  TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    role      TEXT NOT NULL,
    content   TEXT NOT NULL,
    run_id    TEXT NOT NULL,
    at        DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (memory_id, step_key, seq)
);
