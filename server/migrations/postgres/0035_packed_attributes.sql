-- Span attributes packed (issue 48; `telemetry::packed_attributes`): keys from a built-in
-- dictionary, typed values, no JSON punctuation. New rows keep '' in `attributes`; the
-- rows stored before keep their JSON text there and no packed form, and readers take
-- whichever a row has. Nothing is rewritten: a store of millions of spans upgrades at once.
ALTER TABLE spans ADD COLUMN packed_attributes BYTEA;
