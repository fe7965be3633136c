-- Usage reported by metrics (gen_ai.client.token.usage, claude_code.token.usage,
-- claude_code.cost.usage). Those senders also report each call as a span or log event,
-- which usage_daily counts; so metric usage counts only for services that report no call
-- (services.usage_calls = 0), whichever arrives first: decided when read
-- (telemetry::summaries::USAGE_WITH_METRICS), not when written.

CREATE TABLE metric_usage_daily (
    day                 TEXT   NOT NULL,
    service             TEXT   NOT NULL,
    model               TEXT   NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cache_read_tokens   INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    cost_nanocents      INTEGER NOT NULL,
    PRIMARY KEY (day, service, model)
);

-- The last point of each cumulative usage series (resource, metric, attributes), so a
-- point adds what it grew by since the last one.
CREATE TABLE metric_usage_series (
    series    TEXT   PRIMARY KEY NOT NULL,
    start_ns  INTEGER NOT NULL,
    value     REAL NOT NULL
);

-- Calls with tokens a service reported as spans or log events.
ALTER TABLE services ADD COLUMN usage_calls INTEGER NOT NULL DEFAULT 0;
