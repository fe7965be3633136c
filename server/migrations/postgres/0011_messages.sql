-- Conversation messages in one shape (see telemetry::messages), from spans' attributes
-- and events and from log events, for the q/1 transcript of a session or a trace. A
-- span's messages are written once, with the span (a re-sent span adds none).

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    time_ns     BIGINT NOT NULL,
    -- Order within the span or log record it came from.
    seq         BIGINT NOT NULL,
    session_id  TEXT,
    trace_id    TEXT,
    span_id     TEXT,
    -- 'span' or 'log'.
    source      TEXT    NOT NULL,
    role        TEXT    NOT NULL,
    content     TEXT    NOT NULL,
    -- JSON array of {name, arguments}, or NULL.
    tool_calls  TEXT,
    model       TEXT,
    service     TEXT    NOT NULL,
    node_id     TEXT    NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, time_ns) WHERE session_id IS NOT NULL;
CREATE INDEX messages_trace ON messages (trace_id, time_ns) WHERE trace_id IS NOT NULL;
-- Retention deletes the oldest first.
CREATE INDEX messages_time ON messages (time_ns);
-- 1 when a log record's content is conversation messages: the transcript shows the
-- messages, not the record.
ALTER TABLE logs ADD COLUMN messages BIGINT NOT NULL DEFAULT 0;
-- The transcript of a trace reads its log records too.
CREATE INDEX logs_trace ON logs (trace_id, time_ns) WHERE trace_id IS NOT NULL;
