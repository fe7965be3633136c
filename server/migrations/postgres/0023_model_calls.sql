-- Model calls through the model gateway (llm): one row per call a hosted agent made,
-- metered or not, with what the upstream reported and what it cost. A managed call's
-- charge is a usage ledger row naming the call (call_id); the store refuses a second
-- charge of one call. A turn's usage is the sum of the calls made during it.
CREATE TABLE model_calls (
    id                 TEXT PRIMARY KEY,
    account_id         TEXT NOT NULL,
    instance_id        TEXT NOT NULL,
    turn_id            TEXT NOT NULL DEFAULT '',
    api                TEXT NOT NULL,
    model_mode         TEXT NOT NULL,
    request_model      TEXT NOT NULL,
    response_model     TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    http_status        BIGINT NOT NULL DEFAULT 0,
    streamed           BOOLEAN NOT NULL DEFAULT FALSE,
    input_tokens       BIGINT NOT NULL DEFAULT 0,
    output_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost_nanocents     BIGINT NOT NULL DEFAULT 0,
    charged_cents      BIGINT NOT NULL DEFAULT 0,
    started_at         BIGINT NOT NULL,
    duration_ms        BIGINT NOT NULL DEFAULT 0,
    first_chunk_ms     BIGINT,
    error              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX model_calls_instance ON model_calls (instance_id, started_at);
CREATE INDEX model_calls_turn ON model_calls (turn_id) WHERE turn_id <> '';
ALTER TABLE ledger ADD COLUMN call_id TEXT;
CREATE UNIQUE INDEX ledger_one_usage_per_call ON ledger (call_id) WHERE kind = 'usage' AND call_id IS NOT NULL;
