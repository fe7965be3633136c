-- Spans keyed by their trace's number, not by its random id (issue 35).
--
-- Trace ids are random (exporters draw them), so an index led by trace_id takes every
-- span's insert at a random page: with a store larger than the page cache each commit
-- rewrote thousands of scattered index pages, and ingest fell to a sixth of its speed
-- with sequential ids. A trace's number (`traces.seq`) is drawn when roost first sees the
-- trace, so numbers grow with time and the spans of recent traces land at the end of the
-- index. The random lookup is paid once per trace (`traces`' own key) instead of once per
-- span.
ALTER TABLE traces ADD COLUMN seq INTEGER;
UPDATE traces SET seq = rowid;
CREATE UNIQUE INDEX traces_seq ON traces (seq);

ALTER TABLE spans ADD COLUMN trace_seq INTEGER NOT NULL DEFAULT 0;
-- A span whose trace has no summary row (none should have: retention deletes a trace only
-- with its spans) keeps a key of its own, so it stays stored and listed.
UPDATE spans SET trace_seq = COALESCE((SELECT seq FROM traces WHERE traces.trace_id = spans.trace_id), -id);
-- Also what makes a re-sent span (an exporter's retry) a no-op, and how a trace's spans
-- are found (from its number: `traces.seq`).
DROP INDEX spans_key;
CREATE UNIQUE INDEX spans_key ON spans (trace_seq, span_id);
