//! Conversation messages stored once, by content (migration 0033).
//!
//! A model call's input repeats the conversation so far: the 30th call of a conversation
//! sends the 29 exchanges before it again. Kept as sent, a conversation's bytes grow with
//! the square of its length (a 30-turn conversation took 20 times its distinct messages'
//! bytes), and past the attribute size limit its last calls were cut. So:
//!
//! - **One row per distinct message** in `message_texts`, found by a hash of its role,
//!   content and tool calls ([`Message::key`]). Every later copy is a reference to it.
//! - **A call's whole exchange** (its input as sent, then its output) is an ordered list
//!   of references on its span (`spans.message_refs`, [`pack_refs`]): a call that re-sends
//!   40 earlier messages adds 40 references of a few bytes each, not 40 copies. The span's
//!   attributes no longer carry the conversation (`messages::is_message_key`).
//! - **The transcript** (`messages`) keeps one row per message where it first appears in
//!   a conversation (a call's new part, see `telemetry::messages`), pointing at its text.
//! - **Large texts are compressed**: from [`PACK_FROM`] bytes, deflated into `packed`
//!   (`content` is then ''). Readers go through [`Text::content`].
//! - **Retention** deletes a text once nothing newer than the cutoff refers to it:
//!   `last_ns` is the latest time of an item referring to it, refreshed when a newer item
//!   refers to it and it is more than [`REFRESH_NS`] old, so retention keeps that much
//!   margin ([`REFRESH_NS`] before the cutoff).
//!
//! Texts migrated from stores made before this have no hash (each kept as it was, one per
//! earlier message row); they are read the same way and never matched by new messages.

use std::{
    collections::HashMap,
    io::{Read as _, Write as _},
};

use flate2::{Compression, read::DeflateDecoder, write::DeflateEncoder};
use sha2::{Digest as _, Sha256};

use super::{messages::Message, varint};
use crate::{
    Result,
    store::{Store, impl_for_connections, on_reader},
};

/// Texts of this many bytes or more are stored compressed.
pub const PACK_FROM: usize = 1024;

/// How stale a text's `last_ns` may be before a newer reference refreshes it (an hour):
/// a conversation re-sends the same messages on every call, and rewriting each of their
/// rows every time would cost a write per reference.
pub const REFRESH_NS: i64 = 3_600 * 1_000_000_000;

/// Hashes looked up (and texts inserted) per statement.
const CHUNK: usize = 500;

/// The format byte of [`pack_refs`]' lists.
const REFS_V1: u8 = 1;

impl Message {
    /// What identifies this message's content: a hash of its role, content and tool calls
    /// (16 bytes of SHA-256, with separators no text can forge).
    pub fn key(&self) -> [u8; 16] {
        let mut hash = Sha256::new();
        for part in
            [self.role.as_bytes(), self.content.as_bytes(), self.tool_calls.as_deref().unwrap_or("\0").as_bytes()]
        {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        let digest = hash.finalize();
        let mut key = [0; 16];
        key.copy_from_slice(&digest[..16]);
        key
    }
}

/// A stored text as read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text {
    pub role: String,
    /// The content as stored: '' when `packed` holds it.
    pub stored: String,
    /// The content deflated, for large texts.
    pub packed: Option<Vec<u8>>,
    pub tool_calls: Option<String>,
}

impl Text {
    /// The message's content, unpacked when it was stored compressed.
    pub fn content(&self) -> String {
        match &self.packed {
            Some(packed) => unpack(packed),
            None => self.stored.clone(),
        }
    }
}

/// `content` as stored: (`content` column, `packed` column).
fn pack(content: &str) -> (&str, Option<Vec<u8>>) {
    if content.len() < PACK_FROM {
        return (content, None);
    }
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(content.len() / 3), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(content.as_bytes());
    match encoder.finish() {
        Ok(packed) if packed.len() < content.len() => ("", Some(packed)),
        _ => (content, None),
    }
}

/// A packed content; a damaged one reads as what could be recovered, marked.
fn unpack(packed: &[u8]) -> String {
    let mut out = String::new();
    match DeflateDecoder::new(packed).read_to_string(&mut out) {
        Ok(_) => out,
        Err(_) => format!("{out}…[unreadable stored text]"),
    }
}

/// A call's exchange as a list of text ids, with where its new part starts (the messages
/// the transcript shows): a format byte, then LEB128 varints, `new_from` first.
pub fn pack_refs(new_from: usize, ids: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + ids.len() * 3);
    out.push(REFS_V1);
    for value in std::iter::once(new_from as u64).chain(ids.iter().map(|&id| id.max(0) as u64)) {
        varint::put(&mut out, value);
    }
    out
}

/// The list [`pack_refs`] made: (`new_from`, ids); `None` for anything else.
pub fn unpack_refs(bytes: &[u8]) -> Option<(usize, Vec<i64>)> {
    let (&format, mut rest) = bytes.split_first()?;
    if format != REFS_V1 {
        return None;
    }
    let mut values = Vec::new();
    while !rest.is_empty() {
        values.push(varint::take(&mut rest)? as i64);
    }
    let (&new_from, ids) = values.split_first()?;
    Some((new_from as usize, ids.to_vec()))
}

/// The texts of these ids, read outside any transaction (what queries answer).
pub async fn read(store: &Store, ids: &[i64]) -> Result<HashMap<i64, Text>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    on_reader!(store, |pool| {
        let mut conn = pool.acquire().await?;
        conn.read_texts(ids).await
    })
}

/// The whole exchange of a model call stored with references (`spans.message_refs`), in
/// order, with where its new part starts; `None` when the span has none (no messages, or
/// stored before messages were kept once: its attributes hold them). A text retention
/// deleted is left out.
pub async fn call(store: &Store, trace_id: &str, span_id: &str) -> Result<Option<(usize, Vec<Text>)>> {
    let refs: Option<Option<Vec<u8>>> = on_reader!(store, |pool| {
        sqlx::query_scalar(
            "SELECT message_refs FROM spans WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = $1) \
             AND span_id = $2",
        )
        .bind(trace_id)
        .bind(span_id)
        .fetch_optional(pool)
        .await
    })?;
    let Some((new_from, ids)) = refs.flatten().as_deref().and_then(unpack_refs) else {
        return Ok(None);
    };
    let texts = read(store, &ids).await?;
    let kept_before = ids[..new_from.min(ids.len())].iter().filter(|id| texts.contains_key(id)).count();
    Ok(Some((kept_before, ids.iter().filter_map(|id| texts.get(id).cloned()).collect())))
}

/// One message to store, with its [`Message::key`] and the time of the item it came from.
#[derive(Debug, Clone, Copy)]
pub struct Said<'a> {
    pub key: [u8; 16],
    pub message: &'a Message,
    pub time_ns: i64,
}

/// Storing texts inside the ingest transaction.
pub(crate) trait TextsTx {
    /// The ids of these messages' texts, inserting those not stored yet; keyed by
    /// [`Message::key`].
    async fn intern_texts(&mut self, said: &[Said<'_>]) -> Result<HashMap<[u8; 16], i64>>;
    /// The texts of these ids (those still stored).
    async fn read_texts(&mut self, ids: &[i64]) -> Result<HashMap<i64, Text>>;
}

/// A `message_texts` row: id, role, content, packed, tool calls.
type TextRow = (i64, String, String, Option<Vec<u8>>, Option<String>);

/// One distinct message of a batch: the latest time it was said.
struct Distinct<'a> {
    message: &'a Message,
    time_ns: i64,
}

fn distinct<'a>(said: &[Said<'a>]) -> Vec<([u8; 16], Distinct<'a>)> {
    let mut by_key: HashMap<[u8; 16], Distinct<'a>> = HashMap::with_capacity(said.len());
    for s in said {
        let entry = by_key.entry(s.key).or_insert(Distinct { message: s.message, time_ns: s.time_ns });
        entry.time_ns = entry.time_ns.max(s.time_ns);
    }
    let mut list: Vec<_> = by_key.into_iter().collect();
    // One order for every writer: PostgreSQL replicas inserting the same texts lock them
    // in the same order, so they wait for each other instead of deadlocking.
    list.sort_unstable_by_key(|(key, _)| *key);
    list
}

impl_for_connections! {
    impl TextsTx {
        async fn intern_texts(&mut self, said: &[Said<'_>]) -> Result<HashMap<[u8; 16], i64>> {
            let wanted = distinct(said);
            let mut ids = HashMap::with_capacity(wanted.len());
            let mut stale = Vec::new();
            for chunk in wanted.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new("SELECT hash, id, last_ns FROM message_texts WHERE hash IN (");
                let mut list = q.separated(", ");
                for (key, _) in chunk {
                    list.push_bind(key.to_vec());
                }
                q.push(")");
                let found: Vec<(Vec<u8>, i64, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
                for (hash, id, last_ns) in found {
                    let Ok(key) = <[u8; 16]>::try_from(hash.as_slice()) else { continue };
                    if let Some((_, d)) = chunk.iter().find(|(k, _)| *k == key)
                        && d.time_ns > last_ns.saturating_add(REFRESH_NS)
                    {
                        stale.push((id, d.time_ns));
                    }
                    ids.insert(key, id);
                }
            }
            // In id order, so replicas refreshing the same texts wait instead of deadlocking.
            stale.sort_unstable();
            for (id, time_ns) in stale {
                sqlx::query("UPDATE message_texts SET last_ns = $2 WHERE id = $1 AND last_ns < $2")
                    .bind(id)
                    .bind(time_ns)
                    .execute(&mut *self)
                    .await?;
            }
            let missing: Vec<&([u8; 16], Distinct<'_>)> = wanted.iter().filter(|(key, _)| !ids.contains_key(key)).collect();
            for chunk in missing.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new("INSERT INTO message_texts (hash, role, content, packed, tool_calls, last_ns) ");
                q.push_values(chunk, |mut row, (key, d)| {
                    let (content, packed) = pack(&d.message.content);
                    row.push_bind(key.to_vec())
                        .push_bind(d.message.role.clone())
                        .push_bind(content.to_owned())
                        .push_bind(packed)
                        .push_bind(d.message.tool_calls.clone())
                        .push_bind(d.time_ns);
                });
                // Another replica may have stored one since the lookup.
                q.push(
                    " ON CONFLICT (hash) DO UPDATE SET last_ns = CASE WHEN excluded.last_ns > message_texts.last_ns \
                     THEN excluded.last_ns ELSE message_texts.last_ns END RETURNING hash, id",
                );
                let inserted: Vec<(Vec<u8>, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
                for (hash, id) in inserted {
                    if let Ok(key) = <[u8; 16]>::try_from(hash.as_slice()) {
                        ids.insert(key, id);
                    }
                }
            }
            Ok(ids)
        }

        async fn read_texts(&mut self, ids: &[i64]) -> Result<HashMap<i64, Text>> {
            let mut texts = HashMap::with_capacity(ids.len());
            let mut sorted = ids.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            for chunk in sorted.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new("SELECT id, role, content, packed, tool_calls FROM message_texts WHERE id IN (");
                let mut list = q.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                q.push(")");
                let rows: Vec<TextRow> = q.build_query_as().fetch_all(&mut *self).await?;
                for (id, role, stored, packed, tool_calls) in rows {
                    texts.insert(id, Text { role, stored, packed, tool_calls });
                }
            }
            Ok(texts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(role: &str, content: &str, tool_calls: Option<&str>) -> Message {
        Message { role: role.into(), content: content.into(), tool_calls: tool_calls.map(Into::into) }
    }

    #[test]
    fn a_key_tells_role_content_and_tool_calls_apart() {
        let a = said("user", "yes", None);
        assert_eq!(a.key(), said("user", "yes", None).key());
        assert_ne!(a.key(), said("assistant", "yes", None).key());
        assert_ne!(a.key(), said("user", "yes", Some("[]")).key());
        // No separator trick makes two messages one.
        assert_ne!(said("user", "ab", None).key(), said("usera", "b", None).key());
        assert_ne!(said("user", "", Some("")).key(), said("user", "", None).key());
    }

    #[test]
    fn large_texts_are_packed_and_read_back_whole() {
        let small = "short";
        assert_eq!(pack(small), (small, None));
        let long = "the same paragraph again and again. ".repeat(2_000);
        let (stored, packed) = pack(&long);
        assert_eq!(stored, "");
        let packed = packed.unwrap();
        assert!(packed.len() * 10 < long.len(), "{} bytes for {}", packed.len(), long.len());
        let text = Text { role: "system".into(), stored: String::new(), packed: Some(packed), tool_calls: None };
        assert_eq!(text.content(), long);
    }

    #[test]
    fn refs_round_trip_and_refuse_garbage() {
        let ids = [1, 127, 128, 300, 16_384, 9_000_000_000];
        let packed = pack_refs(3, &ids);
        assert_eq!(packed.len(), 1 + 1 + 1 + 1 + 2 + 2 + 3 + 5);
        assert_eq!(unpack_refs(&packed), Some((3, ids.to_vec())));
        assert_eq!(unpack_refs(&pack_refs(0, &[])), Some((0, Vec::new())));
        assert_eq!(unpack_refs(&[]), None);
        assert_eq!(unpack_refs(&[9, 1]), None, "unknown format");
        assert_eq!(unpack_refs(&[REFS_V1, 0x80]), None, "cut varint");
    }
}
