-- A session's traced rows are found through its traces (issue 48).
--
-- A row's session is its trace's (migration 0032), so `traces_session` already lists a
-- session's traces, and each trace's spans, messages and log records sit together under
-- their trace's number (0028, 0029). Indexes of spans, messages and log records by session
-- id duplicated that, and cost the most of any: sessions run side by side, so each
-- trace's rows went to as many scattered index pages as the session indexes, every
-- commit rewriting one page a session it touched. They now hold only the rows no trace
-- reaches: log records and messages sent without a trace, or whose trace has no span yet
-- (`trace_seq` NULL); those are few and are numbered, leaving the index, when a span of
-- their trace arrives.
DROP INDEX spans_session;
DROP INDEX messages_session;
CREATE INDEX messages_session ON messages (session_id, time_ns) WHERE session_id IS NOT NULL AND trace_seq IS NULL;
DROP INDEX logs_session;
CREATE INDEX logs_session ON logs (session_id, time_ns) WHERE session_id IS NOT NULL AND trace_seq IS NULL;
