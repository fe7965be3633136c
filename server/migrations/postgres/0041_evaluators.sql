-- LLM judges (issue 51): an evaluator samples new model calls that match its filter and
-- has a judge model grade each through the model gateway, charging its own budget.
--
-- `cursor` is the highest `spans.id` it has looked at: it starts at the newest span when
-- the evaluator is created (it judges new calls only) and moves as the worker reads on.
-- Each call it picks is a `judgements` row, unique per (evaluator, call): a call is
-- judged once, whatever restarts or replicas do, and its attempts are counted there.
CREATE TABLE evaluators (
    id               TEXT    PRIMARY KEY NOT NULL,
    name             TEXT    NOT NULL,
    score_name       TEXT    NOT NULL,
    model            TEXT    NOT NULL,
    prompt           TEXT    NOT NULL,
    -- 'number' or 'category'
    output           TEXT    NOT NULL,
    -- a JSON list of strings
    categories       TEXT    NOT NULL,
    min_value        DOUBLE PRECISION NOT NULL,
    max_value        DOUBLE PRECISION NOT NULL,
    sample_rate      DOUBLE PRECISION NOT NULL,
    filter_service   TEXT    NOT NULL,
    filter_model     TEXT    NOT NULL,
    filter_agent     TEXT    NOT NULL,
    filter_session   TEXT    NOT NULL,
    budget_nanocents BIGINT  NOT NULL,
    spent_nanocents  BIGINT  NOT NULL,
    enabled          BOOLEAN NOT NULL DEFAULT TRUE,
    cursor           BIGINT  NOT NULL,
    judged           BIGINT  NOT NULL,
    failed           BIGINT  NOT NULL,
    created_ms       BIGINT  NOT NULL,
    CHECK (spent_nanocents >= 0 AND budget_nanocents >= 0)
);

CREATE TABLE judgements (
    evaluator_id   TEXT   NOT NULL,
    trace_id       TEXT   NOT NULL,
    span_id        TEXT   NOT NULL,
    -- 'pending', 'done' or 'failed'
    status         TEXT   NOT NULL,
    attempts       BIGINT NOT NULL,
    error          TEXT   NOT NULL,
    score_id       TEXT   NOT NULL,
    cost_nanocents BIGINT NOT NULL,
    time_ns        BIGINT NOT NULL,
    PRIMARY KEY (evaluator_id, trace_id, span_id)
);
CREATE INDEX judgements_pending ON judgements (evaluator_id, status, time_ns);
CREATE INDEX judgements_time ON judgements (evaluator_id, time_ns);
