-- Search without a second copy of what was said (issue 48; telemetry::search). The index
-- is the `words` column alone: a message document no longer holds its text, whose snippet
-- is cut from the messages it was made of (`message_texts`).
COMMENT ON COLUMN search_docs.text IS
    'What the snippet is cut from; empty for message documents, whose text is in message_texts';
