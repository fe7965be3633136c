-- Scores: judgements of observed work (issue 51). A score is a number, a yes/no (stored
-- as 1 or 0 in `value`, with 'true'/'false' in `label`) or a category (`label`, no
-- `value`), named, on one target: a trace, a span of it, a session or a hosted turn.
-- The target's ids are kept with the context roost found for it (the session a trace is
-- in, the model of a call, the agent), so a trace's scores include its spans' and a
-- session's include everything in it, and aggregates per model or agent need no join.
-- Ids are the client's when it gives one (a score given again under its id replaces the
-- old one), else drawn; OTLP evaluation events get ids from their content, so an exporter
-- resending them adds nothing.
CREATE TABLE scores (
    id           TEXT   PRIMARY KEY NOT NULL,
    name         TEXT   NOT NULL,
    -- 'numeric', 'boolean' or 'categorical'
    kind         TEXT   NOT NULL,
    value        DOUBLE PRECISION,
    label        TEXT   NOT NULL,
    comment      TEXT   NOT NULL,
    -- 'api', 'human' or 'eval'
    source       TEXT   NOT NULL,
    -- 'trace', 'span', 'session' or 'turn'
    target       TEXT   NOT NULL,
    trace_id     TEXT   NOT NULL,
    span_id      TEXT   NOT NULL,
    session_id   TEXT   NOT NULL,
    turn_id      TEXT   NOT NULL,
    model        TEXT   NOT NULL,
    agent_id     TEXT   NOT NULL,
    service      TEXT   NOT NULL,
    evaluator_id TEXT   NOT NULL,
    author       TEXT   NOT NULL,
    time_ns      BIGINT NOT NULL,
    node_id      TEXT   NOT NULL
);
CREATE INDEX scores_trace ON scores (trace_id, time_ns) WHERE trace_id <> '';
CREATE INDEX scores_session ON scores (session_id, time_ns) WHERE session_id <> '';
CREATE INDEX scores_turn ON scores (turn_id) WHERE turn_id <> '';
CREATE INDEX scores_name ON scores (name, time_ns);
CREATE INDEX scores_time ON scores (time_ns);
