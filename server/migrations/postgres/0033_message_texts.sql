-- Each conversation message stored once, by content (issue 48; telemetry::message_texts).
--
-- A model call re-sends the conversation so far: kept in the span's attributes as sent, a
-- conversation's bytes grew with the square of its length, and the transcript and the
-- search index held further copies. Now one row per distinct message holds its text
-- (large texts deflated into `packed`); transcript rows and a call's whole exchange
-- (`spans.message_refs`, an ordered list of text ids) refer to it.
CREATE TABLE message_texts (
    id          BIGSERIAL PRIMARY KEY,
    -- 16 bytes of SHA-256 over role, content and tool calls; NULL for texts migrated from
    -- the messages stored before (each kept as it was).
    hash        BYTEA UNIQUE,
    role        TEXT   NOT NULL,
    -- '' when `packed` holds it.
    content     TEXT   NOT NULL,
    packed      BYTEA,
    tool_calls  TEXT,
    -- The latest time of an item referring to it, up to an hour stale (retention keeps
    -- that margin).
    last_ns     BIGINT NOT NULL
);
-- Retention deletes the texts nothing recent refers to.
CREATE INDEX message_texts_last ON message_texts (last_ns);

-- Every stored message keeps its text, under its own id.
INSERT INTO message_texts (id, hash, role, content, packed, tool_calls, last_ns)
SELECT id, NULL, role, content, NULL, tool_calls, time_ns FROM messages;
SELECT setval(pg_get_serial_sequence('message_texts', 'id'), GREATEST((SELECT MAX(id) FROM message_texts), 1));
ALTER TABLE messages ADD COLUMN text_id BIGINT;
UPDATE messages SET text_id = id;
ALTER TABLE messages DROP COLUMN role;
ALTER TABLE messages DROP COLUMN content;
ALTER TABLE messages DROP COLUMN tool_calls;

-- A model call's exchange: its input as sent, then its output, as text ids
-- (telemetry::message_texts::pack_refs). NULL for spans with no messages, and for calls
-- stored before, whose attributes still hold their messages.
ALTER TABLE spans ADD COLUMN message_refs BYTEA;
