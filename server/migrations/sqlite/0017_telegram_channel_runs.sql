-- Each start of an agent's channel counts a run; a run records its state only while it is
-- the latest, so a channel that stopped (config restarts it at once) cannot overwrite the
-- state of the one that replaced it.
ALTER TABLE telegram_channels ADD COLUMN run_seq INTEGER NOT NULL DEFAULT 0;
