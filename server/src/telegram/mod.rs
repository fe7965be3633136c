//! Telegram, the messaging channel of hosted agents (DESIGN.md "Telegram"): a typed
//! Bot API client of our own ([`client`]) and how replies are cut to Telegram's message
//! size ([`split`]).

pub mod client;
pub mod split;

pub use client::{BotUser, TelegramClient, TelegramError, Update};
