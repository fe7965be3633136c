-- Cluster-wide workers (billing renewals, retention, crons, alerts, guard) run on one
-- replica at a time: the one holding this lease. Times are the database's, in Unix ms, so
-- replicas with skewed clocks agree on who holds it; the epoch grows with each new holder.
CREATE TABLE leader_leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
