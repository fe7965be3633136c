-- What the dashboard needs to trust a total and to reach every conversation:
-- how many of a session's or trace's model calls have no price (their cost is left out
-- of the total, which the pages then mark as partial), and how many model calls a trace
-- holds (a trace with calls and no session id is a conversation of its own: the official
-- OpenAI instrumentation sends no session).
ALTER TABLE sessions ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN model_calls INTEGER NOT NULL DEFAULT 0;
-- Traces stored before this migration: count their calls once (spans naming a model).
UPDATE traces SET model_calls = (
    SELECT COUNT(*) FROM spans
     WHERE spans.trace_id = traces.trace_id
       AND (spans.request_model IS NOT NULL OR spans.response_model IS NOT NULL)
) WHERE session_id = '';
CREATE INDEX traces_sessionless ON traces (start_ns) WHERE session_id = '' AND model_calls > 0;
