-- Each hosted agent runs on one replica at a time: the one holding its lease. As with
-- leader_leases, times are the database's (Unix ms) and the epoch grows with each new
-- holder; writes of a running agent commit only while their writer holds the lease at the
-- epoch it booted the agent under (fencing), so a replica paused past its TTL gets nothing in.
CREATE TABLE agent_leases (
    instance_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX agent_leases_owner ON agent_leases (owner);

-- The replicas serving this store: where their internal gRPC API is reached (turns and
-- lifecycle calls are forwarded to an agent's owner) and when each was last heard from.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    addr TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL
);
