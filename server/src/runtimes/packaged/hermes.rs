//! Hermes Agent's configuration for one boot.
//!
//! `HERMES_HOME` is `.hermes/` in the workspace: its `config.yaml` (written as JSON, which
//! YAML reads), `SOUL.md` (the brief, which opens its system prompt), its sessions, memory
//! and logs. Its terminal and file tools work in the workspace (`terminal.cwd`).
//!
//! Hermes keeps a session's system prompt in its state database and reuses it for the
//! rest of the session (for the provider's prompt cache), so a new brief would reach only
//! new sessions. When the brief changed since the last boot, the boot first clears the
//! agent's stored prompt ([`LAUNCHER`], run inside the sandbox with Hermes's own Python,
//! which also keeps the brief's hash in the workspace to compare): Hermes rebuilds it,
//! with the new `SOUL.md`, on the next turn, and the conversation goes on. roost itself
//! reads nothing in the workspace to decide this.
//!
//! Off, because they would reach the internet from the sandbox, where the agent has
//! nothing but roost's model gateway (and what the operator's egress rules let through):
//! each attempt would be a refused connection in the agent's egress, at every boot or
//! turn, for nothing the agent asked for. Each switch is Hermes' own (a `config.yaml` key),
//! documented where it is set: the tirith scanner's download, the tool-search gate's
//! model lookup, the model catalogue refresh and lazy package installs. Hermes' update
//! check (`hermes_cli/banner.py`) needs no switch: only its CLI banner, `hermes version`
//! and its web dashboard call it, and roost runs none of them (Hermes' gateway does not).
//!
//! Off unless the catalogue entry sets `background_model_use = true`, because they spend
//! credits unasked: the skill curator (a periodic model job) and the kanban dispatcher.
//! Telegram stays with roost: it never gets the bot token.

use std::path::Path;

use serde_json::json;

use super::{Boot, ChatApi, Launch, Session, api_token, file};

/// Starts Hermes after clearing the stored system prompt of session
/// `$ROOST_BRIEF_SESSION` unless the brief's hash (`$ROOST_BRIEF_SHA256`) is the one the
/// last boot recorded in `$HERMES_HOME/.roost-brief.sha256` (a missing or unreadable
/// record counts as a change: clearing only costs the provider's prompt cache), then
/// records it, as best it can (the record is the agent's to break).
const LAUNCHER: &str = "import os, sqlite3, sys
session = os.environ.pop('ROOST_BRIEF_SESSION', '')
brief = os.environ.pop('ROOST_BRIEF_SHA256', '')
home = os.environ['HERMES_HOME']
stamp = os.path.join(home, '.roost-brief.sha256')
try:
    with open(stamp) as f:
        before = f.read().strip()
except OSError:
    before = None
db = os.path.join(home, 'state.db')
if before != brief and os.path.exists(db):
    with sqlite3.connect(db, timeout=10) as conn:
        conn.execute('UPDATE sessions SET system_prompt = NULL WHERE id = ?', (session,))
try:
    if os.path.lexists(stamp + '.new'):
        os.unlink(stamp + '.new')
    fd = os.open(stamp + '.new', os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(brief)
    os.replace(stamp + '.new', stamp)
except OSError as err:
    print('roost: cannot record the brief: %s' % err, file=sys.stderr)
os.execv(sys.argv[1], sys.argv[1:])
";

pub(super) fn prepare(install: &Path, boot: &Boot<'_>) -> Launch {
    use sha2::{Digest as _, Sha256};
    let home = boot.workspace.join(".hermes");
    let token = api_token();
    let session = format!("roost-{}", boot.instance_id);
    let brief_hash = hex::encode(Sha256::digest(boot.brief.as_bytes()));
    let config = json!({
        "model": {
            "default": boot.model,
            "provider": "custom",
            "base_url": boot.gateway_url,
            "api_key": boot.agent_token,
        },
        "terminal": { "backend": "local", "cwd": boot.workspace.display().to_string() },
        "curator": { "enabled": boot.background },
        "kanban": { "dispatch_in_gateway": boot.background },
        // The model picker's catalogue refresh, from Hermes' servers.
        "model_catalog": { "enabled": false },
        "security": {
            // Installs of optional backends' packages from PyPI when first used: roost runs
            // only what its lock pinned and checked.
            "allow_lazy_installs": false,
            // At boot, when it is missing, Hermes' gateway downloads the tirith command scanner's
            // *latest* release from GitHub (`tools/tirith_security.py`; after a failure,
            // again a day later): an unpinned binary roost's lock does not cover, which the
            // sandbox's egress usually refuses anyway (it then fails open, scanning
            // nothing). Hermes' own dangerous-command detection and approvals still apply.
            "tirith_enabled": false,
        },
        // Tool search defers MCP and plugin tools behind a search tool once their schemas
        // pass a share of the model's context window. roost configures no MCP servers, so
        // there is nothing to defer; but on "auto", the first turn after each boot looks
        // the model's window up without its endpoint, which for a model Hermes cannot place
        // means fetching OpenRouter's model list (`agent/model_metadata.py`).
        // `model.context_length` would skip that too, but would fix one window for whatever
        // model the agent is given.
        "tools": { "tool_search": { "enabled": "off" } },
    });
    let files = vec![
        file(home.join("config.yaml"), serde_json::to_string_pretty(&config).unwrap_or_default()),
        file(home.join("SOUL.md"), boot.brief),
    ];

    let env = [
        ("HERMES_HOME", home.display().to_string()),
        ("API_SERVER_ENABLED", "true".to_owned()),
        ("API_SERVER_KEY", token.clone()),
        ("API_SERVER_HOST", "127.0.0.1".to_owned()),
        ("API_SERVER_PORT", boot.port.to_string()),
        ("ROOST_BRIEF_SESSION", session.clone()),
        ("ROOST_BRIEF_SHA256", brief_hash),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    Launch {
        argv: vec![
            install.join("venv/bin/python").display().to_string(),
            "-c".into(),
            LAUNCHER.into(),
            install.join("venv/bin/hermes").display().to_string(),
            "gateway".into(),
            "run".into(),
            "--external-supervisor".into(),
        ],
        env,
        files,
        api: ChatApi {
            ready_path: "/health",
            token,
            model: "hermes-agent",
            session: Session::Header("X-Hermes-Session-Id", session),
        },
    }
}
