-- A session is a property of the trace (issue 48; telemetry::trace_sessions).
--
-- A trace belongs to the session named by its root span, else by the earliest of its spans
-- and log records that names one, whatever order they arrive in: every span, log record,
-- message and search document of the trace carries that session, and the session's totals
-- count all of them. `session_rank` is how the trace's session was chosen, so a later
-- export can tell whether its claim is better: the root's is the smallest BIGINT, any
-- other item's is its start time, and a trace no item has named a session for keeps the
-- largest (its `session_id` is '').
ALTER TABLE traces ADD COLUMN session_rank BIGINT NOT NULL DEFAULT 9223372036854775807;
-- Traces stored before are attributed again by `roost serve` in the background, newest
-- first, down from this trace number (telemetry::trace_sessions::backfill); 0 once done.
INSERT INTO roost_meta (key, value, updated_at)
SELECT 'session_backfill_traces', CAST(COALESCE(MAX(seq), 0) AS TEXT), 0 FROM traces;
