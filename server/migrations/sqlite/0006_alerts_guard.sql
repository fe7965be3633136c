-- Alert rules (/api/alerts) and what they fired.
CREATE TABLE alert_rules (
    id            TEXT    PRIMARY KEY NOT NULL,
    name          TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    threshold     REAL NOT NULL,
    window_secs   INTEGER NOT NULL,
    webhook_url   TEXT    NOT NULL,
    enabled       INTEGER NOT NULL,
    created_ms    INTEGER NOT NULL
);

CREATE TABLE alerts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    rule_id          TEXT    NOT NULL,
    fired_ms         INTEGER NOT NULL,
    value            REAL NOT NULL,
    message          TEXT    NOT NULL,
    resolved_ms      INTEGER,
    acknowledged_ms  INTEGER,
    delivered        INTEGER NOT NULL,
    delivery_attempts INTEGER NOT NULL,
    delivery_error   TEXT    NOT NULL
);
CREATE INDEX alerts_rule ON alerts (rule_id, id);

-- Guard policies (/api/guard) and the incidents they recorded.
CREATE TABLE guard_policies (
    id            TEXT    PRIMARY KEY NOT NULL,
    kind          TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    limit_value   REAL NOT NULL,
    enabled       INTEGER NOT NULL,
    created_ms    INTEGER NOT NULL
);

CREATE TABLE guard_incidents (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    policy_id     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    at_ms         INTEGER NOT NULL,
    detail        TEXT    NOT NULL,
    action        TEXT    NOT NULL
);
CREATE INDEX guard_incidents_at ON guard_incidents (at_ms);
