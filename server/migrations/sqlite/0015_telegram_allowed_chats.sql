-- MESSAGING_ALLOWED_CHAT_IDS: the Telegram chats an agent's bot talks to, as configured
-- (comma-separated chat ids, canonical: sorted, no duplicates; '' for none).
ALTER TABLE instances ADD COLUMN telegram_allowed_chats TEXT NOT NULL DEFAULT '';
