-- Rows in the largest raw tables, kept as they change (issue 35). The health page and `/`
-- showed them with COUNT(*), which reads a whole index: 58 ms a page at 10M spans, and
-- growing with the store. Smaller tables (runs, sessions, agents) are still counted.
--
-- Each transaction that adds or deletes such rows (the ingest writer, the turn recorder,
-- retention) inserts one row of what it changed; the counts are the sums. Inserts only,
-- so writers never wait for each other on a counter (PostgreSQL replicas, concurrent
-- turns); retention's pass folds the rows into one.
CREATE TABLE row_counts (
    id BIGSERIAL PRIMARY KEY,
    spans         BIGINT NOT NULL,
    logs          BIGINT NOT NULL,
    metric_points BIGINT NOT NULL,
    events        BIGINT NOT NULL
);
INSERT INTO row_counts (spans, logs, metric_points, events)
SELECT (SELECT COUNT(*) FROM spans), (SELECT COUNT(*) FROM logs), (SELECT COUNT(*) FROM metric_points),
       (SELECT COUNT(*) FROM events);
