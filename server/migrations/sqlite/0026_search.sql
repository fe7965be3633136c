-- Full-text search over what agents said and did (telemetry::search): one document per
-- span with conversation content (its messages, a tool call's arguments and result), per
-- log record with a body, per custom-run or turn event with data, and per trace and
-- ingest batch for its spans' names and failures. Written in the transaction that stores
-- the rows they come from, and only while content capture is on.
CREATE TABLE search_docs (
    id          INTEGER PRIMARY KEY,
    time_ns     INTEGER NOT NULL,
    -- 'message', 'tool', 'span', 'log' or 'event'.
    source      TEXT    NOT NULL,
    -- '' when the item has none.
    session_id  TEXT    NOT NULL,
    trace_id    TEXT    NOT NULL,
    span_id     TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    service     TEXT    NOT NULL,
    text        TEXT    NOT NULL
);
-- Retention deletes the oldest first.
CREATE INDEX search_docs_time ON search_docs (time_ns);
-- The index of the documents' words: Unicode letters and digits, case and diacritics
-- folded. `detail=none` keeps only which documents hold a word (no positions: the
-- smallest index; search matches words, not phrases).
CREATE VIRTUAL TABLE search_fts USING fts5(
    text, content='search_docs', content_rowid='id', tokenize='unicode61 remove_diacritics 2', detail='none'
);
CREATE TRIGGER search_docs_indexed AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER search_docs_unindexed AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- Messages stored before search existed are indexed by `roost serve` in the background,
-- newest first, down from this id (telemetry::search::backfill); 0 once done.
INSERT INTO roost_meta (key, value, updated_at)
SELECT 'search_backfill_messages', CAST(COALESCE(MAX(id), 0) AS TEXT), 0 FROM messages;
