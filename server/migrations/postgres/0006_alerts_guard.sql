-- Alert rules (/api/alerts) and what they fired.
CREATE TABLE alert_rules (
    id            TEXT    PRIMARY KEY NOT NULL,
    name          TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    threshold     DOUBLE PRECISION NOT NULL,
    window_secs   BIGINT NOT NULL,
    webhook_url   TEXT    NOT NULL,
    enabled       BOOLEAN NOT NULL,
    created_ms    BIGINT NOT NULL
);

CREATE TABLE alerts (
    id               BIGSERIAL PRIMARY KEY,
    rule_id          TEXT    NOT NULL,
    fired_ms         BIGINT NOT NULL,
    value            DOUBLE PRECISION NOT NULL,
    message          TEXT    NOT NULL,
    resolved_ms      BIGINT,
    acknowledged_ms  BIGINT,
    delivered        BOOLEAN NOT NULL,
    delivery_attempts BIGINT NOT NULL,
    delivery_error   TEXT    NOT NULL
);
CREATE INDEX alerts_rule ON alerts (rule_id, id);

-- Guard policies (/api/guard) and the incidents they recorded.
CREATE TABLE guard_policies (
    id            TEXT    PRIMARY KEY NOT NULL,
    kind          TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    limit_value   DOUBLE PRECISION NOT NULL,
    enabled       BOOLEAN NOT NULL,
    created_ms    BIGINT NOT NULL
);

CREATE TABLE guard_incidents (
    id            BIGSERIAL PRIMARY KEY,
    policy_id     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    at_ms         BIGINT NOT NULL,
    detail        TEXT    NOT NULL,
    action        TEXT    NOT NULL
);
CREATE INDEX guard_incidents_at ON guard_incidents (at_ms);
