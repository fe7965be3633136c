-- Hosted agents: accounts with credits, API keys, instances, the credit ledger, turns.
-- Money is integer cents; times are Unix ms (UTC).

CREATE TABLE accounts (
    id                     TEXT    PRIMARY KEY NOT NULL,
    name                   TEXT    NOT NULL,
    balance_cents          INTEGER NOT NULL DEFAULT 0,
    -- Metered usage not yet charged, in billionths of a cent (nanocents) (see billing::metering).
    usage_carry_nanocents INTEGER NOT NULL DEFAULT 0,
    plan                   TEXT    NOT NULL DEFAULT 'free',
    -- Set when the first-ever agent is provisioned: its first period was the free one.
    first_agent_at         INTEGER,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id         TEXT    PRIMARY KEY NOT NULL,
    account_id TEXT    NOT NULL REFERENCES accounts (id),
    name       TEXT    NOT NULL DEFAULT '',
    -- The first characters of the key, to recognise it in `roost keys list`.
    prefix     TEXT    NOT NULL,
    -- SHA-256 of the whole key, hex. Keys are random 200-bit secrets, so a fast hash is
    -- enough; the key itself is never stored.
    key_hash   TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE instances (
    id                  TEXT    PRIMARY KEY NOT NULL,
    account_id          TEXT    NOT NULL REFERENCES accounts (id),
    runtime             TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    status_detail       TEXT    NOT NULL DEFAULT '',
    brief               TEXT    NOT NULL,
    model_mode          TEXT    NOT NULL,
    model               TEXT    NOT NULL DEFAULT '',
    -- Secrets the runtime needs at boot. Never returned by the API.
    provider_api_key    TEXT,
    messaging_bot_token TEXT,
    price_cents_month   INTEGER NOT NULL,
    -- The current paid period and what was paid for it (0 for the free first period),
    -- which is what a destroy refunds pro rata.
    period_start        INTEGER NOT NULL,
    paid_through        INTEGER NOT NULL,
    period_price_cents  INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    -- Destroyed instances keep their row so their activity (and refund) stays readable.
    destroyed_at        INTEGER
);
CREATE INDEX instances_account ON instances (account_id, created_at) WHERE destroyed_at IS NULL;
CREATE INDEX instances_due ON instances (paid_through) WHERE destroyed_at IS NULL;

CREATE TABLE ledger (
    -- Assigned by the database, strictly increasing: orders entries made in one millisecond.
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
    account_id          TEXT    NOT NULL REFERENCES accounts (id),
    instance_id         TEXT,
    kind                TEXT    NOT NULL,
    amount_cents        INTEGER NOT NULL,
    balance_after_cents INTEGER NOT NULL,
    description         TEXT    NOT NULL,
    created_at          INTEGER NOT NULL
);
CREATE INDEX ledger_account ON ledger (account_id, seq);
CREATE INDEX ledger_instance ON ledger (instance_id, seq);

CREATE TABLE turns (
    id             TEXT    PRIMARY KEY NOT NULL,
    instance_id    TEXT    NOT NULL,
    account_id     TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    text           TEXT    NOT NULL,
    reply          TEXT    NOT NULL,
    error          TEXT    NOT NULL,
    queued_at      INTEGER NOT NULL,
    started_at     INTEGER NOT NULL,
    duration_ms    INTEGER NOT NULL,
    input_tokens   INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    model          TEXT    NOT NULL,
    charged_cents  INTEGER NOT NULL
);
CREATE INDEX turns_instance ON turns (instance_id, queued_at);

-- The conversation of an assistant agent, one exchange per row: its memory across turns
-- and restarts. Turns of one agent never overlap, so created_at orders them.
CREATE TABLE assistant_exchanges (
    id          TEXT    PRIMARY KEY NOT NULL,
    instance_id TEXT    NOT NULL,
    user_text   TEXT    NOT NULL,
    reply       TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX assistant_exchanges_instance ON assistant_exchanges (instance_id, created_at);
