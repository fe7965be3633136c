//! Operator commands on the store: `roost accounts`, `roost keys`, `roost credits`.
//!
//! They open the same store as `roost serve` (same `--data-dir` / `--database-url`) and
//! work while it runs. `--json` prints one JSON value for scripts; errors go to stderr with
//! exit status 1 (2 for bad usage).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_proto::numbers::usd_exact;
use serde_json::{Value, json};

use super::GlobalArgs;
use crate::{
    Error,
    accounts::{NewAccount, PLANS},
    auth,
    billing::money::nanocents_to_cents,
    store::{Store, StoreOptions},
    webapp::users::{NewInvite, normalize_email},
};

/// `roost accounts …`
#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Create an account; prints its first API key once, and with `--email` a one-time
    /// link for that person to set a password and sign in to the web app.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
        /// Starting credits, in cents.
        #[arg(long, default_value_t = 0)]
        credits: i64,
        /// Add a web-app user with this email and print their invite link (valid 7 days).
        #[arg(long)]
        email: Option<String>,
        #[command(flatten)]
        link: LinkBase,
        #[command(flatten)]
        output: Output,
    },
    /// List accounts with their balances.
    List {
        #[command(flatten)]
        output: Output,
    },
    /// Set an account's plan (free, trial, starter, pro, enterprise).
    SetPlan {
        /// The account.
        #[arg(long)]
        account: String,
        /// The plan.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(PLANS))]
        plan: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `roost keys …`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create another API key for an account; prints it once.
    Create {
        /// The account the key acts as.
        #[arg(long)]
        account: String,
        /// A label to recognise the key by.
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// List an account's keys (never their secrets).
    List {
        /// The account.
        #[arg(long)]
        account: String,
        #[command(flatten)]
        output: Output,
    },
    /// Revoke a key: it stops working at once.
    Revoke {
        /// The key id (`key_…`, from `keys list`).
        key_id: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `roost users …`: people who sign in to the web app.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Add a user to an account; prints their one-time invite link (valid 7 days).
    Add {
        /// The account they act for.
        #[arg(long)]
        account: String,
        /// Their email (their sign-in name).
        #[arg(long)]
        email: String,
        #[command(flatten)]
        link: LinkBase,
        #[command(flatten)]
        output: Output,
    },
    /// A new one-time link for an existing user to set a new password (a forgotten one);
    /// setting it ends their sessions.
    Reset {
        /// The user's email.
        #[arg(long)]
        email: String,
        #[command(flatten)]
        link: LinkBase,
        #[command(flatten)]
        output: Output,
    },
    /// List an account's users.
    List {
        /// The account.
        #[arg(long)]
        account: String,
        #[command(flatten)]
        output: Output,
    },
}

/// Where invite links point.
#[derive(Debug, Args)]
pub struct LinkBase {
    /// The web app's address as users reach it (invite links start with it). Default:
    /// the address the last `roost serve` on this store listens on (or its
    /// `--public-url`), else http://127.0.0.1:8900.
    #[arg(long, env = "ROOST_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,
}

/// The link base when no server has recorded one: `roost serve`'s default address.
const DEFAULT_LINK_BASE: &str = "http://127.0.0.1:8900";

impl LinkBase {
    /// The link base: the flag, else what the last `roost serve` recorded in the store.
    async fn resolve(&self, store: &Store) -> String {
        if let Some(url) = self.public_url.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
            return url.trim_end_matches('/').to_owned();
        }
        let recorded = store.meta_get(crate::webapp::service::LINK_BASE_KEY).await.ok().flatten();
        recorded.filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_LINK_BASE.to_owned())
    }
}

fn invite_url(base: &str, token: &str) -> String {
    format!("{base}/invite/{token}")
}

/// `roost credits …`
#[derive(Debug, Subcommand)]
pub enum CreditsCommand {
    /// Add credits to an account.
    Add {
        /// The account.
        #[arg(long)]
        account: String,
        /// Cents to add.
        cents: i64,
        #[command(flatten)]
        output: Output,
    },
}

/// How a command prints its result.
#[derive(Debug, Args)]
pub(crate) struct Output {
    /// Print one JSON value instead of text.
    #[arg(long)]
    json: bool,
}

impl Output {
    pub(crate) fn print(&self, value: &Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{value}");
        } else {
            println!("{}", text());
        }
    }
}

pub(super) async fn open(global: &GlobalArgs) -> Result<Store, ExitCode> {
    let config = global.serve_config().map_err(|err| {
        eprintln!("roost: {err}");
        ExitCode::from(2)
    })?;
    let options = StoreOptions { max_connections: 2, ..StoreOptions::default() };
    Store::open(&config.database_url, &options).await.map_err(|err| {
        eprintln!("roost: cannot open the store at {}: {err}", config.database_url);
        ExitCode::FAILURE
    })
}

fn fail(err: Error) -> ExitCode {
    match err {
        Error::Api(api) => eprintln!("roost: {}", api.message()),
        other => eprintln!("roost: {other}"),
    }
    ExitCode::FAILURE
}

/// Runs an accounts command.
pub async fn accounts(global: &GlobalArgs, command: AccountsCommand) -> ExitCode {
    let store = match open(global).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        AccountsCommand::Create { name, credits, email, link, output } => {
            let base = link.resolve(&store).await;
            create_account(&store, &name, credits, email.as_deref()).await.map(|(new, invite)| {
                let mut value = json!({
                    "account_id": new.account.id,
                    "api_key": new.api_key.secret,
                    "key_id": new.api_key.id,
                    "name": new.account.name,
                    "balance_cents": nanocents_to_cents(new.account.balance_nanocents),
                    "balance_nanocents": new.account.balance_nanocents,
                });
                let mut text = format!(
                    "created account {} ({}) with {}\nAPI key (shown once, keep it safe): {}",
                    new.account.id,
                    new.account.name,
                    usd_exact(new.account.balance_nanocents),
                    new.api_key.secret
                );
                if let Some(invite) = invite {
                    let url = invite_url(&base, &invite.token);
                    value["user_id"] = json!(invite.user.id);
                    value["email"] = json!(invite.user.email);
                    value["invite_url"] = json!(url);
                    text.push_str(&format!("\ninvite link for {} (one use, 7 days): {url}", invite.user.email));
                }
                output.print(&value, || text);
            })
        }
        AccountsCommand::List { output } => store.list_accounts().await.map(|accounts| {
            let value: Vec<Value> = accounts
                .iter()
                .map(|a| {
                    json!({"account_id": a.id, "name": a.name, "balance_cents": nanocents_to_cents(a.balance_nanocents),
                           "balance_nanocents": a.balance_nanocents, "plan": a.plan})
                })
                .collect();
            output.print(&Value::Array(value), || {
                let lines: Vec<String> = accounts
                    .iter()
                    .map(|a| format!("{}  {:>16}  {:<10}  {}", a.id, usd_exact(a.balance_nanocents), a.plan, a.name))
                    .collect();
                if lines.is_empty() { "no accounts".to_owned() } else { lines.join("\n") }
            });
        }),
        AccountsCommand::SetPlan { account, plan, output } => store.set_plan(&account, &plan).await.map(|()| {
            output.print(&json!({"account_id": account, "plan": plan}), || format!("{account} is on plan {plan}"));
        }),
    };
    store.close().await;
    result.map_or_else(fail, |()| ExitCode::SUCCESS)
}

/// An account, and with an email its first user's invite. The email is checked before the
/// account is made, so a bad or taken one leaves nothing behind.
async fn create_account(
    store: &Store,
    name: &str,
    credits: i64,
    email: Option<&str>,
) -> Result<(NewAccount, Option<NewInvite>), Error> {
    if let Some(email) = email {
        normalize_email(email)?;
        if store.user_by_email(email).await?.is_some() {
            return Err(
                roost_proto::ApiError::invalid_argument(format!("a user with email {email} already exists")).into()
            );
        }
    }
    let new = store.create_account(name, credits).await?;
    let invite = match email {
        Some(email) => Some(store.add_user(&new.account.id, email).await?),
        None => None,
    };
    Ok((new, invite))
}

/// Runs a users command.
pub async fn users(global: &GlobalArgs, command: UsersCommand) -> ExitCode {
    let store = match open(global).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        UsersCommand::Add { account, email, link, output } => {
            let base = link.resolve(&store).await;
            store.add_user(&account, &email).await.map(|invite| {
            let url = invite_url(&base, &invite.token);
            let value = json!({"user_id": invite.user.id, "account_id": account, "email": invite.user.email, "invite_url": url});
            output.print(&value, || format!("added {} to {account}\ninvite link (one use, 7 days): {url}", invite.user.email));
        })
        }
        UsersCommand::Reset { email, link, output } => {
            let base = link.resolve(&store).await;
            store.reinvite_user(&email).await.map(|invite| {
                let url = invite_url(&base, &invite.token);
                let value = json!({"user_id": invite.user.id, "email": invite.user.email, "invite_url": url});
                output.print(&value, || {
                    format!("password reset link for {} (one use, 7 days): {url}", invite.user.email)
                });
            })
        }
        UsersCommand::List { account, output } => store.list_users(&account).await.map(|users| {
            let value: Vec<Value> = users
                .iter()
                .map(|u| json!({"user_id": u.id, "email": u.email, "password_set": u.password_hash.is_some()}))
                .collect();
            output.print(&Value::Array(value), || {
                let lines: Vec<String> = users
                    .iter()
                    .map(|u| {
                        format!("{}  {}{}", u.id, u.email, if u.password_hash.is_some() { "" } else { "  (invited)" })
                    })
                    .collect();
                if lines.is_empty() { "no users".to_owned() } else { lines.join("\n") }
            });
        }),
    };
    store.close().await;
    result.map_or_else(fail, |()| ExitCode::SUCCESS)
}

/// Runs a keys command.
pub async fn keys(global: &GlobalArgs, command: KeysCommand) -> ExitCode {
    let store = match open(global).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        KeysCommand::Create { account, name, output } => store.create_key(&account, &name).await.map(|key| {
            let value = json!({"key_id": key.id, "account_id": key.account_id, "api_key": key.secret});
            output.print(&value, || {
                format!("API key {} for {} (shown once, keep it safe): {}", key.id, key.account_id, key.secret)
            });
        }),
        KeysCommand::List { account, output } => store.list_keys(&account).await.map(|keys| {
            let value = serde_json::to_value(&keys).unwrap_or_default();
            output.print(&value, || {
                let lines: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        let state = if k.revoked_at.is_some() { "revoked" } else { "active" };
                        format!("{}  {}…  {:<8}  {}", k.id, k.prefix, state, k.name)
                    })
                    .collect();
                if lines.is_empty() { "no keys".to_owned() } else { lines.join("\n") }
            });
        }),
        KeysCommand::Revoke { key_id, output } => store.revoke_key(&key_id).await.map(|key| {
            // Servers on this data directory drop the keys they remember at once.
            let announced =
                global.data_dir().map_err(std::io::Error::other).and_then(|dir| auth::announce_revocation(&dir));
            if let Err(err) = announced {
                eprintln!(
                    "roost: warning: could not tell running servers ({err}); the key stops working within a second"
                );
            }
            let value = serde_json::to_value(&key).unwrap_or_default();
            output.print(&value, || format!("revoked {}", key.id));
        }),
    };
    store.close().await;
    result.map_or_else(fail, |()| ExitCode::SUCCESS)
}

/// Runs a credits command.
pub async fn credits(global: &GlobalArgs, command: CreditsCommand) -> ExitCode {
    let store = match open(global).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        CreditsCommand::Add { account, cents, output } => store.add_credits(&account, cents).await.map(|balance| {
            let value = json!({"account_id": account, "balance_cents": nanocents_to_cents(balance),
                               "balance_nanocents": balance});
            output.print(&value, || format!("{account}: balance {}", usd_exact(balance)));
        }),
    };
    store.close().await;
    result.map_or_else(fail, |()| ExitCode::SUCCESS)
}
