-- Search without a second copy of what was said (issue 48; telemetry::search).
--
-- The index was an external-content FTS5 table over `search_docs.text`: deleting a
-- document needed its text again, so every message was kept twice (in `message_texts`
-- and in its document). A contentless index keeps only the words (and deletes by id), so
-- a message document no longer holds its text: its snippet is cut from the messages it
-- was made of (`message_texts`). Other documents (span names, log bodies, events) keep
-- theirs.
CREATE VIRTUAL TABLE search_words USING fts5(
    text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2', detail='none'
);
INSERT INTO search_words (rowid, text) SELECT id, text FROM search_docs;
DROP TRIGGER search_docs_indexed;
DROP TRIGGER search_docs_unindexed;
DROP TABLE search_fts;
-- Retention deletes documents by time; their words go with them.
CREATE TRIGGER search_docs_unindexed AFTER DELETE ON search_docs BEGIN
    DELETE FROM search_words WHERE rowid = old.id;
END;
