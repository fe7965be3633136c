-- q/1 `spans {errors_only}` walks newest-first; errors are a small fraction of spans, so
-- without this it scans the time index past every ok span to fill a page. Partial, so only
-- error spans pay for it at ingest.
CREATE INDEX spans_errors ON spans (start_ns) WHERE status_code = 2;
