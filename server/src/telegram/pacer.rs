//! Telegram's sending limits, kept before Telegram has to enforce them with 429s: at most
//! one message a second to a chat and 25 a second from a bot (Telegram documents about 30;
//! the margin leaves room for clock skew and the pairing replies of a busy bot).

use std::{
    collections::{HashMap, VecDeque},
    time::Duration,
};

use tokio::time::Instant;

/// Least time between two messages to one chat.
pub const PER_CHAT: Duration = Duration::from_secs(1);
/// Most messages a bot sends in any second.
pub const PER_BOT_PER_SECOND: usize = 25;

/// One bot's pacing; each bot's channel has its own.
#[derive(Debug, Default)]
pub struct Pacer {
    /// When each chat last got a message.
    chats: HashMap<i64, Instant>,
    /// When the bot's messages of the last second went.
    recent: VecDeque<Instant>,
}

impl Pacer {
    /// How long a message to `chat` must wait from `now` (zero: it may go now).
    fn wait(&mut self, chat: i64, now: Instant) -> Duration {
        let second = Duration::from_secs(1);
        while self.recent.front().is_some_and(|at| now.duration_since(*at) >= second) {
            self.recent.pop_front();
        }
        let chat_free = self.chats.get(&chat).map_or(now, |last| *last + PER_CHAT);
        let bot_free = if self.recent.len() >= PER_BOT_PER_SECOND {
            self.recent.front().map_or(now, |first| *first + second)
        } else {
            now
        };
        chat_free.max(bot_free).saturating_duration_since(now)
    }

    /// Waits until a message to `chat` may go, and counts it as sent.
    pub async fn ready(&mut self, chat: i64) {
        loop {
            let now = Instant::now();
            let wait = self.wait(chat, now);
            if wait.is_zero() {
                if self.chats.len() > 4096 {
                    self.chats.retain(|_, last| now.duration_since(*last) < PER_CHAT);
                }
                self.chats.insert(chat, now);
                self.recent.push_back(now);
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts a message as [`Pacer::ready`] does once the wait is over.
    fn send(pacer: &mut Pacer, chat: i64, now: Instant) {
        pacer.chats.insert(chat, now);
        pacer.recent.push_back(now);
    }

    #[test]
    fn one_message_a_second_per_chat() {
        let mut pacer = Pacer::default();
        let start = Instant::now();
        assert_eq!(pacer.wait(1, start), Duration::ZERO);
        send(&mut pacer, 1, start);
        assert_eq!(pacer.wait(2, start), Duration::ZERO, "different chats do not wait for each other");
        assert_eq!(pacer.wait(1, start), PER_CHAT);
        assert_eq!(pacer.wait(1, start + Duration::from_millis(400)), Duration::from_millis(600));
        assert_eq!(pacer.wait(1, start + PER_CHAT), Duration::ZERO);
    }

    #[test]
    fn twenty_five_a_second_per_bot() {
        let mut pacer = Pacer::default();
        let start = Instant::now();
        for chat in 0..PER_BOT_PER_SECOND as i64 {
            assert_eq!(pacer.wait(chat, start), Duration::ZERO);
            send(&mut pacer, chat, start);
        }
        assert_eq!(pacer.wait(1000, start), Duration::from_secs(1), "the 26th message waits for the window");
        assert_eq!(pacer.wait(1000, start + Duration::from_secs(1)), Duration::ZERO);
    }

    #[tokio::test]
    async fn ready_counts_what_it_lets_go() {
        let mut pacer = Pacer::default();
        pacer.ready(7).await;
        assert!(pacer.wait(7, Instant::now()) > Duration::from_millis(900));
    }
}
