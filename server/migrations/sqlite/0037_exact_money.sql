-- Money in nanocents (10⁻⁹ cent), exact below a cent (issue 49; `billing::money`).
--
-- Balances, ledger amounts, holds and what turns and model calls were charged were whole
-- cents, with metered usage's fractions carried on the account until they made a cent: a
-- $0.00023 call showed as charged $0.00 and the balance moved a cent at a time. Now every
-- amount is kept in nanocents, the unit the price book and telemetry's costs already use,
-- so a call is charged exactly what it cost when it settles. The `*_cents` fields of the
-- API are derived from these.
--
-- The new bound on a balance is ±$10,000,000 (10⁹ cents = 10¹⁸ nanocents, inside 64 bits
-- with room for one movement of the same size); amounts beyond it (only ever made by
-- tests of the old $10 billion bound) are clamped to it.

ALTER TABLE ledger ADD COLUMN amount_nanocents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN balance_after_nanocents INTEGER NOT NULL DEFAULT 0;
UPDATE ledger SET
    amount_nanocents = MAX(MIN(amount_cents, 1000000000), -1000000000) * 1000000000,
    balance_after_nanocents = MAX(MIN(balance_after_cents, 1000000000), -1000000000) * 1000000000;

-- The exact balance is the whole cents less the usage carried (owed, not yet charged).
ALTER TABLE accounts ADD COLUMN balance_nanocents INTEGER NOT NULL DEFAULT 0;
UPDATE accounts SET balance_nanocents =
    MAX(MIN(balance_cents, 1000000000), -1000000000) * 1000000000 - usage_carry_nanocents;
-- The carry is charged now, as a usage row, so the ledger still sums to the balance.
INSERT INTO ledger (id, account_id, instance_id, kind, amount_cents, balance_after_cents, description, created_at,
                    amount_nanocents, balance_after_nanocents)
SELECT 'chg_carry_' || id, id, NULL, 'usage', 0, 0,
       'metered usage below a cent, carried until now, charged exactly',
       CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
       -usage_carry_nanocents, balance_nanocents
  FROM accounts WHERE usage_carry_nanocents <> 0;

ALTER TABLE accounts DROP COLUMN balance_cents;
ALTER TABLE accounts DROP COLUMN usage_carry_nanocents;
ALTER TABLE ledger DROP COLUMN amount_cents;
ALTER TABLE ledger DROP COLUMN balance_after_cents;

ALTER TABLE turns ADD COLUMN charged_nanocents INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET charged_nanocents = MIN(charged_cents, 1000000000) * 1000000000;
ALTER TABLE turns DROP COLUMN charged_cents;

-- A call is now charged its cost exactly: the calls charged before keep the whole cents
-- they moved.
ALTER TABLE model_calls ADD COLUMN charged_nanocents INTEGER NOT NULL DEFAULT 0;
UPDATE model_calls SET charged_nanocents = MIN(charged_cents, 1000000000) * 1000000000;
ALTER TABLE model_calls DROP COLUMN charged_cents;

ALTER TABLE credit_holds ADD COLUMN nanocents INTEGER NOT NULL DEFAULT 0;
UPDATE credit_holds SET nanocents = MIN(cents, 1000000000) * 1000000000;
ALTER TABLE credit_holds DROP COLUMN cents;
