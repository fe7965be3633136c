-- Turns running longer than a moment, written while they run and deleted in the
-- transaction that records them. A row still here when another replica (or the next
-- start on SQLite) takes the agent's lease belongs to a turn whose runner died: the new
-- owner records it as an `interrupted` turn, not charged.
CREATE TABLE turns_in_flight (
    id TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL,
    account_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    queued_at BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    model TEXT NOT NULL,
    chat_id BIGINT,
    lease_epoch BIGINT NOT NULL
);
CREATE INDEX turns_in_flight_instance ON turns_in_flight (instance_id);
