-- Money moves at most once per reason, enforced by the store and not only by code:
-- one provision charge and one refund per instance, one renewal per instance and paid
-- period, one usage charge per metered turn. A second attempt (two destroys racing, a
-- retried renewal) fails on these indexes instead of moving money twice.

-- The paid period a provision or renewal charge pays for (its start, Unix ms).
ALTER TABLE ledger ADD COLUMN period_start BIGINT;
-- The metered turn a usage charge is for.
ALTER TABLE ledger ADD COLUMN turn_id TEXT;

-- Earlier builds could refund a destroyed instance more than once (racing destroys). That
-- money was credited, so its rows stay (the ledger keeps adding up to the balance), but
-- every refund after an instance's first is relabelled a credit so the index below holds.
UPDATE ledger
SET kind = 'credit',
    description = 'repeated refund credited by an earlier roost: ' || description
WHERE kind = 'refund'
  AND instance_id IS NOT NULL
  AND seq NOT IN (SELECT MIN(seq) FROM ledger WHERE kind = 'refund' AND instance_id IS NOT NULL GROUP BY instance_id);

CREATE UNIQUE INDEX ledger_one_provision ON ledger (instance_id) WHERE kind = 'provision';
CREATE UNIQUE INDEX ledger_one_refund ON ledger (instance_id) WHERE kind = 'refund';
CREATE UNIQUE INDEX ledger_one_renewal_per_period ON ledger (instance_id, period_start) WHERE kind = 'renewal';
CREATE UNIQUE INDEX ledger_one_usage_per_turn ON ledger (turn_id) WHERE kind = 'usage';
