-- Messages, log records and span events keyed by their trace's number too (issue 35;
-- spans were in 0028).
--
-- `messages (trace_id, time_ns)` and `logs (trace_id, time_ns)` took each insert at a
-- random page (trace ids are random), three per traced model call: after 0028 they were
-- the largest share of the pages every ingest commit rewrote. Numbered rows land at the
-- end of their index instead.
--
-- A log record can arrive before any span of its trace, when the trace has no number yet:
-- it is stored unnumbered (`trace_seq` NULL), kept in a small index by trace id, and
-- numbered by the writer when the trace's first span arrives. So a trace's rows are those
-- with its number, plus (only while it has no span) the unnumbered ones with its id.
ALTER TABLE messages ADD COLUMN trace_seq BIGINT;
UPDATE messages SET trace_seq = (SELECT seq FROM traces WHERE traces.trace_id = messages.trace_id)
 WHERE trace_id IS NOT NULL;
DROP INDEX messages_trace;
CREATE INDEX messages_trace ON messages (trace_seq, time_ns) WHERE trace_seq IS NOT NULL;
CREATE INDEX messages_trace_unnumbered ON messages (trace_id, time_ns)
 WHERE trace_seq IS NULL AND trace_id IS NOT NULL;

ALTER TABLE logs ADD COLUMN trace_seq BIGINT;
UPDATE logs SET trace_seq = (SELECT seq FROM traces WHERE traces.trace_id = logs.trace_id)
 WHERE trace_id IS NOT NULL;
DROP INDEX logs_trace;
CREATE INDEX logs_trace ON logs (trace_seq, time_ns) WHERE trace_seq IS NOT NULL;
CREATE INDEX logs_trace_unnumbered ON logs (trace_id, time_ns) WHERE trace_seq IS NULL AND trace_id IS NOT NULL;

-- A span event is stored with its span, whose trace always has a number.
ALTER TABLE span_events ADD COLUMN trace_seq BIGINT NOT NULL DEFAULT 0;
UPDATE span_events SET trace_seq = COALESCE((SELECT seq FROM traces WHERE traces.trace_id = span_events.trace_id), 0);
DROP INDEX span_events_span;
CREATE INDEX span_events_span ON span_events (trace_seq, span_id);
