//! Telegram, the messaging channel of hosted agents (docs/architecture.md#telegram): a typed
//! Bot API client of our own ([`client`]), the channel's store ([`inbox`], [`pairing`]),
//! how replies are cut to Telegram's message size ([`split`]) and paced to its rate limits
//! ([`pacer`]), and the channel's API view ([`view`]). The channel itself runs with the
//! agent it belongs to: [`crate::agents::channel`].

pub mod client;
pub mod inbox;
pub mod pacer;
pub mod pairing;
pub mod split;
pub mod view;

pub use client::{BotUser, TelegramClient, TelegramError, Update};
