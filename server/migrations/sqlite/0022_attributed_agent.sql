-- The hosted agent roost itself attributed a row to: spans a runtime sent with its own
-- agent token, and the turn events roost writes. '' for everything else, whatever session
-- or agent id the telemetry claims: the guard (and anything else that acts on an agent)
-- counts only attributed rows, so another account cannot make an agent look expensive.
ALTER TABLE spans ADD COLUMN agent_instance TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN agent_instance TEXT NOT NULL DEFAULT '';
CREATE INDEX spans_agent_instance ON spans (agent_instance, start_ns) WHERE agent_instance <> '';
CREATE INDEX events_agent_instance ON events (agent_instance, ts_ns) WHERE agent_instance <> '';
