-- Scheduled messages to hosted agents (/api/crons).
CREATE TABLE crons (
    id           TEXT    PRIMARY KEY NOT NULL,
    instance_id  TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    schedule     TEXT    NOT NULL,
    message      TEXT    NOT NULL,
    enabled      BOOLEAN NOT NULL,
    -- Unix ms; NULL when disabled or when the schedule never fires again.
    next_run_ms  BIGINT,
    last_run_ms  BIGINT,
    created_ms   BIGINT  NOT NULL
);
CREATE INDEX crons_due ON crons (next_run_ms) WHERE enabled;

CREATE TABLE cron_runs (
    id           BIGSERIAL PRIMARY KEY,
    cron_id      TEXT    NOT NULL,
    started_ms   BIGINT  NOT NULL,
    duration_ms  BIGINT  NOT NULL,
    ok           BOOLEAN NOT NULL,
    reply        TEXT    NOT NULL,
    error        TEXT    NOT NULL
);
CREATE INDEX cron_runs_cron ON cron_runs (cron_id, id);
