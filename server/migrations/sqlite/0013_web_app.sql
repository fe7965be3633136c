-- The hosted web app: people who sign in, their browser sessions, operator invites, and
-- credits bought through Stripe Checkout. Times are Unix ms (UTC), money integer cents.

-- A person who signs in; belongs to one account. The password is an argon2id PHC string;
-- NULL until an invited user sets one.
CREATE TABLE users (
    id            TEXT    PRIMARY KEY NOT NULL,
    account_id    TEXT    NOT NULL REFERENCES accounts (id),
    -- Lower-cased and trimmed, so one person cannot hold two users by case.
    email         TEXT    NOT NULL UNIQUE,
    password_hash TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX users_account ON users (account_id);

-- A signed-in browser. Only the SHA-256 of the cookie's random token is kept; a session
-- idle for 30 days is over (last_seen_at is refreshed at most every few minutes).
CREATE TABLE web_sessions (
    token_hash   TEXT    PRIMARY KEY NOT NULL,
    user_id      TEXT    NOT NULL REFERENCES users (id),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_idle ON web_sessions (last_seen_at);

-- An operator's one-time link /invite/{token} for a user to set their password.
CREATE TABLE invites (
    token_hash TEXT    PRIMARY KEY NOT NULL,
    user_id    TEXT    NOT NULL REFERENCES users (id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);

-- A Stripe Checkout Session roost created: pending until the webhook says it was paid.
CREATE TABLE top_ups (
    id                TEXT    PRIMARY KEY NOT NULL,
    account_id        TEXT    NOT NULL REFERENCES accounts (id),
    -- Set once Stripe has made the Checkout Session (the row is written before asking).
    stripe_session_id TEXT    UNIQUE,
    amount_cents      INTEGER NOT NULL,
    -- pending, paid, failed, expired
    status            TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX top_ups_account ON top_ups (account_id, created_at);

-- Every Stripe event applied, so a replayed delivery changes nothing.
CREATE TABLE stripe_events (
    id          TEXT    PRIMARY KEY NOT NULL,
    type        TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);

-- The top-up a top_up ledger entry credits: at most one credit per top-up, enforced here.
ALTER TABLE ledger ADD COLUMN top_up_id TEXT;
CREATE UNIQUE INDEX ledger_one_top_up ON ledger (top_up_id) WHERE kind = 'top_up';

-- What /developers shows of a key besides its prefix.
ALTER TABLE api_keys ADD COLUMN last4 TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
