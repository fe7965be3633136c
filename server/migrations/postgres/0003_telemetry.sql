-- Observed telemetry (seeds/local-dashboard-api.md): spans and their events, log records,
-- metric points, the resources they came from; custom runs and events; node push.
-- Summaries (sessions, traces, services, daily usage and activity) are kept current in the
-- same transaction as the raw rows, so q/1 never aggregates millions of rows to answer.
-- Times are Unix nanoseconds (UTC); cost is nanocents (10^-9 cent) from the price book;
-- node_id is '' for data ingested here, else the node that pushed it.

CREATE TABLE resources (
    id          BIGSERIAL PRIMARY KEY,
    hash        TEXT    NOT NULL UNIQUE,
    service     TEXT    NOT NULL,
    attributes  TEXT    NOT NULL,
    first_ns    BIGINT NOT NULL
);

CREATE TABLE spans (
    id              BIGSERIAL PRIMARY KEY,
    trace_id        TEXT    NOT NULL,
    span_id         TEXT    NOT NULL,
    parent_span_id  TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    kind            BIGINT NOT NULL,
    start_ns        BIGINT NOT NULL,
    end_ns          BIGINT NOT NULL,
    status_code     BIGINT NOT NULL,
    status_message  TEXT    NOT NULL,
    service         TEXT    NOT NULL,
    resource_id     BIGINT NOT NULL,
    scope           TEXT    NOT NULL,
    session_id      TEXT,
    agent_id        TEXT,
    operation       TEXT,
    gen_ai_system   TEXT,
    request_model   TEXT,
    response_model  TEXT,
    input_tokens    BIGINT,
    output_tokens   BIGINT,
    cost_nanocents  BIGINT,
    attributes      TEXT    NOT NULL,
    node_id         TEXT    NOT NULL
);
-- Also what makes a re-sent span (an exporter's retry) a no-op.
CREATE UNIQUE INDEX spans_key ON spans (trace_id, span_id);
CREATE INDEX spans_start ON spans (start_ns);
CREATE INDEX spans_session ON spans (session_id, start_ns) WHERE session_id IS NOT NULL;

CREATE TABLE span_events (
    id          BIGSERIAL PRIMARY KEY,
    trace_id    TEXT    NOT NULL,
    span_id     TEXT    NOT NULL,
    time_ns     BIGINT NOT NULL,
    name        TEXT    NOT NULL,
    attributes  TEXT    NOT NULL
);
CREATE INDEX span_events_span ON span_events (trace_id, span_id);

CREATE TABLE logs (
    id               BIGSERIAL PRIMARY KEY,
    time_ns          BIGINT NOT NULL,
    observed_ns      BIGINT NOT NULL,
    severity_number  BIGINT NOT NULL,
    severity_text    TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    service          TEXT    NOT NULL,
    resource_id      BIGINT NOT NULL,
    trace_id         TEXT,
    span_id          TEXT,
    session_id       TEXT,
    attributes       TEXT    NOT NULL,
    node_id          TEXT    NOT NULL
);
CREATE INDEX logs_time ON logs (time_ns);
CREATE INDEX logs_session ON logs (session_id, time_ns) WHERE session_id IS NOT NULL;

CREATE TABLE metric_points (
    id           BIGSERIAL PRIMARY KEY,
    name         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    unit         TEXT    NOT NULL,
    service      TEXT    NOT NULL,
    resource_id  BIGINT NOT NULL,
    time_ns      BIGINT NOT NULL,
    start_ns     BIGINT NOT NULL,
    value        DOUBLE PRECISION,
    count        BIGINT,
    detail       TEXT,
    attributes   TEXT    NOT NULL,
    session_id   TEXT,
    node_id      TEXT    NOT NULL
);
CREATE INDEX metric_points_name ON metric_points (name, time_ns);
CREATE INDEX metric_points_time ON metric_points (time_ns);

CREATE TABLE runs (
    id              TEXT    PRIMARY KEY,
    runtime         TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    agent_id        TEXT    NOT NULL,
    metadata        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    started_ns      BIGINT NOT NULL,
    ended_ns        BIGINT,
    events          BIGINT NOT NULL DEFAULT 0,
    input_tokens    BIGINT NOT NULL DEFAULT 0,
    output_tokens   BIGINT NOT NULL DEFAULT 0,
    cost_nanocents  BIGINT NOT NULL DEFAULT 0,
    node_id         TEXT    NOT NULL
);
CREATE INDEX runs_started ON runs (started_ns);
CREATE INDEX runs_session ON runs (session_id, started_ns);

CREATE TABLE events (
    seq             BIGSERIAL PRIMARY KEY,
    run_id          TEXT    NOT NULL,
    id              TEXT    NOT NULL,
    ts_ns           BIGINT NOT NULL,
    event_type      TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    agent_id        TEXT    NOT NULL,
    tool_name       TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    role            TEXT    NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL,
    data            TEXT    NOT NULL,
    node_id         TEXT    NOT NULL,
    UNIQUE (run_id, id)
);
CREATE INDEX events_session ON events (session_id, ts_ns);
CREATE INDEX events_time ON events (ts_ns);

CREATE TABLE sessions (
    session_id      TEXT    PRIMARY KEY,
    agent_id        TEXT    NOT NULL,
    service         TEXT    NOT NULL,
    first_ns        BIGINT NOT NULL,
    last_ns         BIGINT NOT NULL,
    spans           BIGINT NOT NULL,
    events          BIGINT NOT NULL,
    logs            BIGINT NOT NULL,
    errors          BIGINT NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL,
    last_model      TEXT    NOT NULL
);
CREATE INDEX sessions_last ON sessions (last_ns);

CREATE TABLE traces (
    trace_id        TEXT    PRIMARY KEY,
    start_ns        BIGINT NOT NULL,
    end_ns          BIGINT NOT NULL,
    spans           BIGINT NOT NULL,
    errors          BIGINT NOT NULL,
    root_name       TEXT    NOT NULL,
    service         TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL
);
CREATE INDEX traces_start ON traces (start_ns);
CREATE INDEX traces_session ON traces (session_id, start_ns);

CREATE TABLE services (
    service        TEXT    PRIMARY KEY,
    first_ns       BIGINT NOT NULL,
    last_ns        BIGINT NOT NULL,
    spans          BIGINT NOT NULL,
    errors         BIGINT NOT NULL,
    logs           BIGINT NOT NULL,
    log_errors     BIGINT NOT NULL,
    metric_points  BIGINT NOT NULL
);

-- Per UTC day and model ('' for spans and events that name none).
CREATE TABLE usage_daily (
    day             TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    calls           BIGINT NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL,
    PRIMARY KEY (day, model)
);

CREATE TABLE activity_daily (
    day             TEXT    PRIMARY KEY,
    spans           BIGINT NOT NULL,
    span_errors     BIGINT NOT NULL,
    logs            BIGINT NOT NULL,
    log_errors      BIGINT NOT NULL,
    metric_points   BIGINT NOT NULL,
    events          BIGINT NOT NULL,
    runs            BIGINT NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL
);

-- Node push: what this node has ingested and not yet pushed upstream (daemon role), and
-- on the central side, each node's heartbeat and how far its items have been applied.
CREATE TABLE outbox (
    -- A sequence never hands out a number twice, even once the outbox is empty: the
    -- central side skips numbers it has seen.
    seq         BIGSERIAL PRIMARY KEY,
    kind        TEXT    NOT NULL,
    payload     BYTEA   NOT NULL,
    created_ns  BIGINT NOT NULL
);

CREATE TABLE nodes (
    node_id          TEXT    PRIMARY KEY,
    account_id       TEXT    NOT NULL,
    hostname         TEXT    NOT NULL,
    version          TEXT    NOT NULL,
    applied_through  BIGINT NOT NULL,
    outbox_depth     BIGINT NOT NULL,
    auto_update      BOOLEAN NOT NULL,
    rollback         TEXT    NOT NULL,
    first_seen_ns    BIGINT NOT NULL,
    last_heartbeat_ns BIGINT NOT NULL
);
