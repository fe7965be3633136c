-- Credits set aside for metered model calls in flight (billing::holds). A metered call is
-- admitted only while the account's balance less its live holds is above zero; its hold is
-- deleted in the transaction that charges the call's exact cost (or records it failed). A
-- hold whose runner died stops counting at expires_at.
CREATE TABLE credit_holds (
    turn_id     TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    cents       BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX credit_holds_account ON credit_holds (account_id, expires_at);
