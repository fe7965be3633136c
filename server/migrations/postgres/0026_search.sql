-- Full-text search over what agents said and did (telemetry::search): one document per
-- span with conversation content (its messages, a tool call's arguments and result), per
-- log record with a body, per custom-run or turn event with data, and per trace and
-- ingest batch for its spans' names and failures. Written in the transaction that stores
-- the rows they come from, and only while content capture is on.
CREATE TABLE search_docs (
    id          BIGSERIAL PRIMARY KEY,
    time_ns     BIGINT NOT NULL,
    -- 'message', 'tool', 'span', 'log' or 'event'.
    source      TEXT   NOT NULL,
    -- '' when the item has none.
    session_id  TEXT   NOT NULL,
    trace_id    TEXT   NOT NULL,
    span_id     TEXT   NOT NULL,
    run_id      TEXT   NOT NULL,
    service     TEXT   NOT NULL,
    text        TEXT   NOT NULL,
    -- The text's words as roost splits and folds them (telemetry::search::words), so both
    -- backends match the same words: Unicode letters and digits, case and diacritics
    -- folded.
    words       TSVECTOR NOT NULL
);
-- Retention deletes the oldest first.
CREATE INDEX search_docs_time ON search_docs (time_ns);
CREATE INDEX search_docs_words ON search_docs USING GIN (words);
-- Messages stored before search existed are indexed by `roost serve` in the background,
-- newest first, down from this id (telemetry::search::backfill); 0 once done.
INSERT INTO roost_meta (key, value, updated_at)
SELECT 'search_backfill_messages', CAST(COALESCE(MAX(id), 0) AS TEXT), 0 FROM messages;
