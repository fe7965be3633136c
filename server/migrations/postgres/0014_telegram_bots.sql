-- The Telegram bot an agent's MESSAGING_BOT_TOKEN belongs to (getMe, checked when the
-- token is configured): one bot serves one live agent, enforced here as well as in code.
ALTER TABLE instances ADD COLUMN telegram_bot_id BIGINT;
ALTER TABLE instances ADD COLUMN telegram_username TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX instances_one_bot ON instances (telegram_bot_id)
    WHERE destroyed_at IS NULL AND telegram_bot_id IS NOT NULL;
