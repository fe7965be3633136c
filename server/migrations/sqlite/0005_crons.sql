-- Scheduled messages to hosted agents (/api/crons).
CREATE TABLE crons (
    id           TEXT    PRIMARY KEY NOT NULL,
    instance_id  TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    schedule     TEXT    NOT NULL,
    message      TEXT    NOT NULL,
    enabled      INTEGER NOT NULL,
    -- Unix ms; NULL when disabled or when the schedule never fires again.
    next_run_ms  INTEGER,
    last_run_ms  INTEGER,
    created_ms   INTEGER NOT NULL
);
CREATE INDEX crons_due ON crons (next_run_ms) WHERE enabled = 1;

CREATE TABLE cron_runs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    cron_id      TEXT    NOT NULL,
    started_ms   INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    ok           INTEGER NOT NULL,
    reply        TEXT    NOT NULL,
    error        TEXT    NOT NULL
);
CREATE INDEX cron_runs_cron ON cron_runs (cron_id, id);
