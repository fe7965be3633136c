-- What popular senders report beyond the GenAI basics (see telemetry::attribute_map):
-- prompt-cache tokens and the tool on spans; log records get the GenAI fields too, since
-- coding agents (Claude Code, Codex CLI) report their model calls as log events; daily
-- usage keeps the cache tokens and counts calls of models the price book does not know.

ALTER TABLE spans ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE spans ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE spans ADD COLUMN tool_name TEXT;

-- LogRecord.event_name, else the event.name attribute.
ALTER TABLE logs ADD COLUMN event_name TEXT;
ALTER TABLE logs ADD COLUMN agent_id TEXT;
ALTER TABLE logs ADD COLUMN model TEXT;
ALTER TABLE logs ADD COLUMN input_tokens INTEGER;
ALTER TABLE logs ADD COLUMN output_tokens INTEGER;
ALTER TABLE logs ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE logs ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE logs ADD COLUMN cost_nanocents INTEGER;
ALTER TABLE logs ADD COLUMN tool_name TEXT;

ALTER TABLE usage_daily ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
-- Calls with tokens of a model the price book does not price (their cost is unknown).
ALTER TABLE usage_daily ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
