//! Which key a start of `roost serve` seals with, and the check that it is the store's.
//!
//! The key is `ROOST_SECRET_KEY` when set, else `<data-dir>/secret.key`, generated on the
//! first start of a store that holds no secrets yet. The store keeps a key check: a
//! constant sealed under the first key used with it (`roost_meta`, key
//! `secrets.key_check`). A start whose key does not open the check, or that has no key
//! while the store holds sealed secrets (a second PostgreSQL replica that did not get
//! `ROOST_SECRET_KEY`, a lost key file), is refused with [`KeyRefused`] rather than sealing
//! new secrets under a second key, which would leave the store's secrets unreadable to
//! every replica but one.
//!
//! Only `roost serve` unlocks: the CLI's store commands never touch secrets, so they
//! neither need the key nor create a key file.

use std::path::{Path, PathBuf};

use tracing::info;

use super::{SEALED_PREFIX, Sealed, SecretKey, Slot, key_file, seal_rows::seal_plain_rows};
use crate::store::{Store, on_reader};

/// The `roost_meta` key of the key check.
const CHECK_META_KEY: &str = "secrets.key_check";
/// What the check seals: any constant; only whether it opens matters.
const CHECK_PLAIN: &str = "roost secret key check";

fn check_slot() -> Slot<'static> {
    Slot { column: "roost_meta.value", row: CHECK_META_KEY }
}

/// A start refused because of the secret key (exit status 2). The message says what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyRefused(String);

/// Where the key of this start came from, for the messages.
enum Origin {
    Env,
    File(PathBuf),
}

/// Finds this start's key (`configured` is `ROOST_SECRET_KEY`), checks it against the
/// store, then seals any secret still stored in plain text. Errors are [`KeyRefused`] when
/// the key is missing, malformed or not the store's; other errors are faults.
pub async fn unlock(store: &Store, configured: Option<SecretKey>, data_dir: &Path) -> anyhow::Result<SecretKey> {
    let path = data_dir.join(key_file::KEY_FILE);
    let (key, origin) = match configured {
        Some(key) => (key, Origin::Env),
        None => match key_file::read(&path).map_err(|why| refused(format!("{why}. {RESTORE_OR_SET}")))? {
            Some(key) => (key, Origin::File(path)),
            None if holds_secrets(store).await? => {
                return Err(refused(format!(
                    "this store holds secrets sealed with a key roost cannot find: ROOST_SECRET_KEY is unset \
                     and {} does not exist. Set ROOST_SECRET_KEY to the key the other replicas use (the \
                     contents of their secret.key), or restore {} from a backup of this data directory",
                    path.display(),
                    path.display()
                )));
            }
            None => (key_file::create(&path).map_err(anyhow::Error::msg)?, Origin::File(path)),
        },
    };

    let check = match store.meta_get(CHECK_META_KEY).await? {
        Some(check) => check,
        None => store.meta_insert_absent(CHECK_META_KEY, key.seal(CHECK_PLAIN, check_slot()).as_str()).await?,
    };
    if key.open(&Sealed::from_stored(check), check_slot()).is_err() {
        return Err(refused(match origin {
            Origin::Env => "ROOST_SECRET_KEY does not open the secrets in this store: they were sealed with another \
                            key. Set ROOST_SECRET_KEY to the key the other replicas (and earlier starts) use"
                .to_owned(),
            Origin::File(path) => format!(
                "the key in {} does not open the secrets in this store: they were sealed with another key \
                 (by another replica, or before this key file was replaced). Set ROOST_SECRET_KEY to the key the \
                 other replicas use, or put that key in {}",
                path.display(),
                path.display()
            ),
        }));
    }
    info!(from = if matches!(origin, Origin::Env) { "ROOST_SECRET_KEY" } else { "key file" }, "secret key unlocked");
    seal_plain_rows(store, &key).await?;
    Ok(key)
}

const RESTORE_OR_SET: &str = "Restore it from a backup, or set ROOST_SECRET_KEY to the key the other replicas use";

fn refused(message: String) -> anyhow::Error {
    KeyRefused(message).into()
}

/// True when the store has a key check or any sealed value: a key was chosen before.
async fn holds_secrets(store: &Store) -> crate::Result<bool> {
    if store.meta_get(CHECK_META_KEY).await?.is_some() {
        return Ok(true);
    }
    let sealed: i64 = on_reader!(store, |pool| {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM instances \
             WHERE substr(provider_api_key, 1, 10) = $1 OR substr(messaging_bot_token, 1, 10) = $1",
        )
        .bind(SEALED_PREFIX)
        .fetch_one(pool)
        .await
    })?;
    Ok(sealed > 0)
}
