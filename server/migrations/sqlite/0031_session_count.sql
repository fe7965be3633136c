-- The sessions' count joins the kept row counts (issue 35). `/` and the health page
-- counted `sessions` with COUNT(*): on PostgreSQL every ingest commit rewrites the session
-- rows it touches, so at 10M spans the table held 20,400 live rows among 2.1M dead
-- versions (73 MB) and the count alone took 32 ms of the page.
--
-- The ingest writer and the turn recorder add the sessions their upsert inserted
-- (PostgreSQL: `RETURNING (xmax = 0)`; SQLite, one writer at a time: the ids not there
-- before it), retention subtracts the ones it deletes.
ALTER TABLE row_counts ADD COLUMN sessions BIGINT NOT NULL DEFAULT 0;
INSERT INTO row_counts (spans, logs, metric_points, events, sessions)
SELECT 0, 0, 0, 0, (SELECT COUNT(*) FROM sessions);
