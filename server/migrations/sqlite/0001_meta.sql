-- Small facts about this store that outlive a process (per-node flags and the like).
CREATE TABLE roost_meta (
    key        TEXT    PRIMARY KEY NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL -- Unix ms, UTC
) WITHOUT ROWID;
