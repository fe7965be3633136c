-- Datasets and experiments (issue 51). A dataset is an ordered list of items (input,
-- expected output, metadata); an experiment runs every item of one as a turn against a
-- hosted agent (or a temporary copy of it) and keeps one result row per item.
--
-- `owner` is the account that made a dataset or experiment, or '' for the operator's.
-- A result row is written, with its turn id chosen, before its turn runs: the primary key
-- (experiment, item) means an item is run at most once a run, and the unique turn id that
-- a restart finds the turn the item already had (in `turns`) instead of running another.
CREATE TABLE datasets (
    id            TEXT   PRIMARY KEY NOT NULL,
    owner         TEXT   NOT NULL,
    name          TEXT   NOT NULL,
    description   TEXT   NOT NULL,
    items         BIGINT NOT NULL,
    created_ms    BIGINT NOT NULL,
    UNIQUE (owner, name)
);

CREATE TABLE dataset_items (
    id          TEXT   PRIMARY KEY NOT NULL,
    dataset_id  TEXT   NOT NULL,
    position    BIGINT NOT NULL,
    input       TEXT   NOT NULL,
    expected    TEXT   NOT NULL,
    -- a JSON object
    metadata    TEXT   NOT NULL,
    source      TEXT   NOT NULL,
    created_ms  BIGINT NOT NULL,
    UNIQUE (dataset_id, position)
);

CREATE TABLE experiments (
    id              TEXT   PRIMARY KEY NOT NULL,
    owner           TEXT   NOT NULL,
    -- the agent's account: it pays for the turns
    account_id      TEXT   NOT NULL,
    name            TEXT   NOT NULL,
    dataset_id      TEXT   NOT NULL,
    agent_id        TEXT   NOT NULL,
    on_copy         INTEGER NOT NULL DEFAULT 0,
    brief           TEXT   NOT NULL,
    model           TEXT   NOT NULL,
    copy_id         TEXT   NOT NULL,
    -- JSON lists
    evaluator_ids   TEXT   NOT NULL,
    checks          TEXT   NOT NULL,
    -- 'queued', 'running', 'completed', 'cancelled' or 'failed'
    status          TEXT   NOT NULL,
    status_detail   TEXT   NOT NULL,
    items           BIGINT NOT NULL,
    completed       BIGINT NOT NULL DEFAULT 0,
    failed          BIGINT NOT NULL DEFAULT 0,
    latency_ms      BIGINT NOT NULL DEFAULT 0,
    input_tokens    BIGINT NOT NULL DEFAULT 0,
    output_tokens   BIGINT NOT NULL DEFAULT 0,
    cost_nanocents  BIGINT NOT NULL DEFAULT 0,
    judge_nanocents BIGINT NOT NULL DEFAULT 0,
    created_ms      BIGINT NOT NULL,
    finished_ms     BIGINT
);
CREATE INDEX experiments_status ON experiments (status, created_ms);
CREATE INDEX experiments_dataset ON experiments (dataset_id, created_ms);

CREATE TABLE experiment_results (
    experiment_id   TEXT   NOT NULL,
    item_id         TEXT   NOT NULL,
    position        BIGINT NOT NULL,
    turn_id         TEXT   NOT NULL UNIQUE,
    -- 'running', 'completed' or 'failed'
    status          TEXT   NOT NULL,
    output          TEXT   NOT NULL,
    error           TEXT   NOT NULL,
    latency_ms      BIGINT NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cost_nanocents  BIGINT NOT NULL,
    -- JSON objects: check name → passed, score name → grade, score name → why none
    checks          TEXT   NOT NULL,
    scores          TEXT   NOT NULL,
    score_errors    TEXT   NOT NULL,
    judge_nanocents BIGINT NOT NULL,
    PRIMARY KEY (experiment_id, item_id)
);
CREATE INDEX experiment_results_position ON experiment_results (experiment_id, position);
