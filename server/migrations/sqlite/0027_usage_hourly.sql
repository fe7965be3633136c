-- Usage per UTC hour and model, kept like usage_daily in the ingest transaction: what the
-- usage page charts for a range of a day or less (one daily point says nothing). Model
-- calls and run events only; usage that services report as metrics stays daily. Small
-- (24 rows a day per model) and kept as history, as the daily aggregates are.
CREATE TABLE usage_hourly (
    -- 'YYYY-MM-DDTHH'
    hour            TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    calls           INTEGER NOT NULL,
    input_tokens    INTEGER NOT NULL,
    output_tokens   INTEGER NOT NULL,
    cost_nanocents  INTEGER NOT NULL,
    unpriced_calls  INTEGER NOT NULL,
    PRIMARY KEY (hour, model)
);
