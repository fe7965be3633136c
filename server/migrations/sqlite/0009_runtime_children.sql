-- Runtime processes roost started and has not yet seen end (see runtimes::orphans). A
-- roost killed with SIGKILL leaves its rows behind; its next start kills those of its
-- processes still running (the same pid with the same start time, on the same boot), then
-- deletes the rows.
CREATE TABLE runtime_children (
    -- The roost installation (its data directory's id) that started it.
    installation     TEXT    NOT NULL,
    -- /proc/sys/kernel/random/boot_id at the start: pids name nothing across reboots.
    boot_id          TEXT    NOT NULL,
    pid              INTEGER NOT NULL,
    -- /proc/<pid>/stat field 22 (clock ticks since boot): tells a reused pid apart.
    start_time       INTEGER NOT NULL,
    instance_id      TEXT    NOT NULL,
    -- The roost process that started it (pid and start time).
    owner_pid        INTEGER NOT NULL,
    owner_start_time INTEGER NOT NULL,
    started_at       INTEGER NOT NULL, -- Unix ms, UTC
    PRIMARY KEY (installation, boot_id, pid, start_time)
) WITHOUT ROWID;
