-- Who a conversation was for, its tags and metadata, and how long model calls took.
--
-- Labels are what the Sessions and Traces filters match: `user:<id>`, `tag:<tag>`,
-- `meta:<key>` and `meta:<key>=<value>`, read at ingest from the attributes senders use
-- (`telemetry::labels`). A span's labels belong to its trace; a session has its traces'
-- labels, and its log records' (which have no trace) are kept on the session. Keyed by
-- the label first: a filter looks up one label. `time_ns` is the newest item that
-- carried it, for retention. Without a rowid, a row is stored once, in its key's order
-- (with one, SQLite kept the key a second time in an index: 24 bytes a span, not 12).
CREATE TABLE trace_labels (
    label    TEXT   NOT NULL,
    trace_id TEXT   NOT NULL,
    time_ns  BIGINT NOT NULL,
    PRIMARY KEY (label, trace_id)
) WITHOUT ROWID;
CREATE INDEX trace_labels_time ON trace_labels (time_ns);

CREATE TABLE session_labels (
    label      TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    time_ns    BIGINT NOT NULL,
    PRIMARY KEY (label, session_id)
) WITHOUT ROWID;
CREATE INDEX session_labels_time ON session_labels (time_ns);

-- Model call latency per UTC hour, model, service and agent: a histogram of durations
-- (measure 0) and of times to first token (measure 1), in buckets of 1/16 of a doubling of
-- microseconds (`telemetry::latency`), with the exact total for the mean. Percentiles are
-- read from the buckets, to within 2.2 %.
CREATE TABLE latency_hourly (
    -- 'YYYY-MM-DDTHH'
    hour     TEXT   NOT NULL,
    model    TEXT   NOT NULL,
    service  TEXT   NOT NULL,
    agent_id TEXT   NOT NULL,
    measure  BIGINT NOT NULL,
    bucket   BIGINT NOT NULL,
    calls    BIGINT NOT NULL,
    total_ns BIGINT NOT NULL,
    PRIMARY KEY (hour, model, service, agent_id, measure, bucket)
) WITHOUT ROWID;
