-- The Telegram channel roost runs for an agent's bot (DESIGN.md "Telegram"). Times are
-- Unix ms (UTC).

-- Each update read from the bot, stored in the same transaction that moves the poll's
-- offset past it: a restart neither loses nor repeats a message. `turn_id` is chosen when
-- the update is stored, so after a crash the turn it became (if it ran) is found, not run
-- again. Done rows are kept a day, then pruned.
CREATE TABLE telegram_updates (
    instance_id TEXT    NOT NULL,
    update_id   BIGINT  NOT NULL,
    chat_id     BIGINT  NOT NULL,
    -- NULL for a message that is not text (a photo, a sticker).
    text        TEXT,
    turn_id     TEXT    NOT NULL,
    -- 'queued' until it is answered, then 'done'.
    state       TEXT    NOT NULL,
    received_at BIGINT  NOT NULL,
    done_at     BIGINT,
    PRIMARY KEY (instance_id, update_id)
);
CREATE INDEX telegram_updates_queued ON telegram_updates (instance_id, update_id) WHERE state = 'queued';
CREATE INDEX telegram_updates_done ON telegram_updates (done_at) WHERE state = 'done';

-- Per agent: where polling resumes (the offset belongs to one bot: a new bot starts over),
-- what the channel is doing, traffic counters and the last error, for /api/channels.
CREATE TABLE telegram_channels (
    instance_id    TEXT    PRIMARY KEY,
    bot_id         BIGINT  NOT NULL,
    update_offset  BIGINT  NOT NULL DEFAULT 0,
    -- 'polling' or 'webhook'.
    mode           TEXT    NOT NULL DEFAULT 'polling',
    -- 'receiving', 'backing_off' or 'stopped'.
    state          TEXT    NOT NULL DEFAULT 'stopped',
    last_update_at BIGINT,
    messages_in    BIGINT  NOT NULL DEFAULT 0,
    messages_out   BIGINT  NOT NULL DEFAULT 0,
    last_error     TEXT    NOT NULL DEFAULT '',
    last_error_at  BIGINT
);

-- Strangers' chats waiting for the owner to approve their one-time code (valid an hour; at
-- most three pending per agent, enforced in code). One pending code per chat.
CREATE TABLE telegram_pairings (
    instance_id TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    chat_id     BIGINT  NOT NULL,
    created_at  BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL,
    PRIMARY KEY (instance_id, code)
);
CREATE UNIQUE INDEX telegram_pairings_chat ON telegram_pairings (instance_id, chat_id);

-- Chats that blocked the bot (sendMessage answered 403): nothing is sent to them until
-- they write again.
CREATE TABLE telegram_blocked_chats (
    instance_id TEXT    NOT NULL,
    chat_id     BIGINT  NOT NULL,
    blocked_at  BIGINT  NOT NULL,
    PRIMARY KEY (instance_id, chat_id)
);

-- The Telegram chat a turn came from (source 'telegram'); NULL otherwise.
ALTER TABLE turns ADD COLUMN chat_id BIGINT;
