//! Hosted agents' secrets at rest: provider keys and bot tokens sealed with AES-256-GCM.
//!
//! A sealed value is text, `sealed:v1:` followed by unpadded URL-safe base64 of
//! nonce (12 random bytes) ‖ ciphertext ‖ tag (16 bytes), so it fits the TEXT columns the
//! plain values used to sit in and says which scheme sealed it. The associated data names
//! the value's [`Slot`] (column and row): a value sealed for one agent's
//! `provider_api_key` does not open as another agent's, or as its bot token.
//!
//! The store and the agents' in-memory settings only ever hold [`Sealed`] values; they are
//! opened where a machine spec is built for a runtime (`agents::live`). Where the key comes
//! from and how a store is checked against it is [`unlock`].

mod key_file;
mod seal_rows;
mod unlock;

use std::{fmt, sync::Arc};

use aes_gcm::{
    Aes256Gcm, KeyInit as _,
    aead::{Aead as _, Nonce, Payload},
};
use base64::{
    Engine as _,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};

pub use key_file::KEY_FILE;
pub use unlock::{KeyRefused, unlock};

/// The prefix of every value sealed by this scheme.
pub const SEALED_PREFIX: &str = "sealed:v1:";
/// Bytes of an AES-256 key.
pub const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;
const TAG_BYTES: usize = 16;

/// The key secrets are sealed with. Cheap to clone; its bytes never leave it (no `Display`,
/// and `Debug` prints nothing of them).
#[derive(Clone)]
pub struct SecretKey(Arc<Aes256Gcm>);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; KEY_BYTES]) -> Self {
        Self(Arc::new(Aes256Gcm::new(bytes.into())))
    }

    /// Parses the text form of `ROOST_SECRET_KEY` and `secret.key`: 32 bytes in standard
    /// base64 (what `openssl rand -base64 32` prints), surrounding whitespace ignored. The
    /// error says what is wrong without quoting the value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| "it is not base64 (make one with `openssl rand -base64 32`)".to_owned())?;
        let bytes: [u8; KEY_BYTES] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            format!("it is {} bytes, not {KEY_BYTES} (make one with `openssl rand -base64 32`)", bytes.len())
        })?;
        Ok(Self::from_bytes(&bytes))
    }

    /// Seals `plain` for `slot`, with a fresh random nonce.
    pub fn seal(&self, plain: &str, slot: Slot<'_>) -> Sealed {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).expect("the OS random number generator failed");
        let aad = slot.associated_data();
        // Encryption fails only for inputs over 64 GiB; secrets are limited to a few KiB.
        let ciphertext = self
            .0
            .encrypt(&Nonce::<Aes256Gcm>::from(nonce), Payload { msg: plain.as_bytes(), aad: &aad })
            .expect("AES-GCM seals any value under 64 GiB");
        let mut raw = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&ciphertext);
        Sealed(format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(raw)))
    }

    /// Opens a value sealed for `slot`. Fails for a value sealed under another key or for
    /// another slot, a damaged one, and a plain (never sealed) one.
    pub fn open(&self, sealed: &Sealed, slot: Slot<'_>) -> Result<String, OpenError> {
        let encoded = sealed.0.strip_prefix(SEALED_PREFIX).ok_or(OpenError::NotSealed)?;
        let raw = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| OpenError::Damaged)?;
        if raw.len() < NONCE_BYTES + TAG_BYTES {
            return Err(OpenError::Damaged);
        }
        let (nonce, ciphertext) = raw.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| OpenError::Damaged)?;
        let aad = slot.associated_data();
        let plain = self
            .0
            .decrypt(&Nonce::<Aes256Gcm>::from(nonce), Payload { msg: ciphertext, aad: &aad })
            .map_err(|_| OpenError::WrongKeyOrSlot)?;
        String::from_utf8(plain).map_err(|_| OpenError::Damaged)
    }
}

/// Where a sealed value belongs: the column and the row (its id). This is the associated
/// data of the seal, so the value opens only there.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    /// `table.column`, such as `instances.provider_api_key`.
    pub column: &'a str,
    /// The row's id.
    pub row: &'a str,
}

impl<'a> Slot<'a> {
    /// An agent's `provider_api_key`.
    pub fn provider_api_key(instance_id: &'a str) -> Self {
        Self { column: "instances.provider_api_key", row: instance_id }
    }

    /// An agent's `messaging_bot_token`.
    pub fn messaging_bot_token(instance_id: &'a str) -> Self {
        Self { column: "instances.messaging_bot_token", row: instance_id }
    }

    /// The scheme, column and row, NUL-separated (neither holds a NUL).
    fn associated_data(self) -> Vec<u8> {
        [SEALED_PREFIX, self.column, self.row].join("\0").into_bytes()
    }
}

/// A sealed value, as stored. Holding one says nothing of the plain value; only
/// [`SecretKey::open`] gets it back.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed(String);

impl Sealed {
    /// A value read from the store. It is not checked here: [`SecretKey::open`] refuses
    /// anything not sealed for its slot.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The stored text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when `text` is in the sealed form (the start-up step seals anything else).
    pub fn is_sealed(text: &str) -> bool {
        text.starts_with(SEALED_PREFIX)
    }
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Ciphertext is safe to print, but a plain value read from an unsealed row is not.
        f.write_str(if Self::is_sealed(&self.0) { "Sealed(..)" } else { "Sealed(<not sealed>)" })
    }
}

/// Why a sealed value did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The stored text lacks the sealed prefix.
    #[error("it is not sealed")]
    NotSealed,
    /// The stored text is not a well-formed sealed value.
    #[error("it is damaged")]
    Damaged,
    /// Authentication failed: another key, or sealed for another row or column.
    #[error("it was sealed with another key or for another agent")]
    WrongKeyOrSlot,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(byte: u8) -> SecretKey {
        SecretKey::from_bytes(&[byte; KEY_BYTES])
    }

    #[test]
    fn seals_and_opens_in_its_slot() {
        let key = key(7);
        let sealed = key.seal("sk-live-123", Slot::provider_api_key("ins_a"));
        assert!(sealed.as_str().starts_with(SEALED_PREFIX));
        assert!(!sealed.as_str().contains("sk-live-123"));
        assert_eq!(key.open(&sealed, Slot::provider_api_key("ins_a")).unwrap(), "sk-live-123");
        // A fresh nonce each time: the same value seals differently.
        assert_ne!(sealed, key.seal("sk-live-123", Slot::provider_api_key("ins_a")));
    }

    #[test]
    fn does_not_open_for_another_agent_column_or_key() {
        let sealed = key(7).seal("sk-live-123", Slot::provider_api_key("ins_a"));
        assert_eq!(key(7).open(&sealed, Slot::provider_api_key("ins_b")), Err(OpenError::WrongKeyOrSlot));
        assert_eq!(key(7).open(&sealed, Slot::messaging_bot_token("ins_a")), Err(OpenError::WrongKeyOrSlot));
        assert_eq!(key(8).open(&sealed, Slot::provider_api_key("ins_a")), Err(OpenError::WrongKeyOrSlot));
    }

    #[test]
    fn refuses_plain_and_damaged_values() {
        let slot = Slot::provider_api_key("ins_a");
        let open = |text: &str| key(7).open(&Sealed::from_stored(text.to_owned()), slot);
        assert_eq!(open("sk-plain"), Err(OpenError::NotSealed));
        assert_eq!(open("sealed:v1:!!"), Err(OpenError::Damaged));
        assert_eq!(open("sealed:v1:AAAA"), Err(OpenError::Damaged));
        let mut tampered = key(7).seal("sk-live-123", slot).as_str().to_owned();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        assert_eq!(open(&tampered), Err(OpenError::WrongKeyOrSlot));
    }

    #[test]
    fn parses_the_base64_text_form() {
        let text = STANDARD.encode([9u8; KEY_BYTES]);
        let parsed = SecretKey::parse(&format!("  {text}\n")).unwrap();
        let sealed = key(9).seal("x", Slot::provider_api_key("i"));
        assert_eq!(parsed.open(&sealed, Slot::provider_api_key("i")).unwrap(), "x");
        assert!(SecretKey::parse("not base64 at all!").unwrap_err().contains("not base64"));
        assert!(SecretKey::parse(&STANDARD.encode([1u8; 16])).unwrap_err().contains("16 bytes, not 32"));
    }

    #[test]
    fn debug_shows_no_key_and_no_plain_value() {
        assert_eq!(format!("{:?}", key(7)), "SecretKey(..)");
        assert_eq!(format!("{:?}", Sealed::from_stored("sk-plain".into())), "Sealed(<not sealed>)");
        assert_eq!(format!("{:?}", key(7).seal("sk", Slot::provider_api_key("i"))), "Sealed(..)");
    }
}
