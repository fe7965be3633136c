-- Small facts about this store that outlive a process (per-node flags and the like).
CREATE TABLE roost_meta (
    key        TEXT   PRIMARY KEY,
    value      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL -- Unix ms, UTC
);
