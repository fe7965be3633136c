-- An agent's optional name, given at provision or by config: what people call it on
-- the pages and in the API (the id stays its key). '' when none was given.
ALTER TABLE instances ADD COLUMN name TEXT NOT NULL DEFAULT '';
