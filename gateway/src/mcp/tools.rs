//! The MCP tools: one per core rpc, named as in the seed, taking the rpc's request message
//! as arguments (its JSON schema comes from the proto descriptor, comments included) and
//! answering the REST body as structured content.
//!
//! Lists answer their gRPC response (`{"runtimes": […]}`, `{"instances": […]}`) where REST
//! answers a bare array, because MCP structured content is always an object.

use roost_proto::{
    ApiError, ErrorReason,
    describe::contract,
    numbers::usd_exact,
    v1::{
        AddDatasetItemsRequest, CancelExperimentRequest, ConfigureRequest, CreateDatasetRequest,
        CreateExperimentRequest, DestroyRequest, GetActivityRequest, GetChannelRequest, GetDatasetRequest,
        GetExperimentRequest, GetInstanceRequest, ListDatasetsRequest, ListExperimentsRequest, ListFilesRequest,
        ListInstancesRequest, ListRuntimesRequest, ListSessionsRequest, ListShapesRequest, ListShapesResponse,
        PairChannelRequest, PauseRequest, ProvisionRequest, QueryRequest, RateTurnRequest, ReadFileRequest,
        ResumeRequest, SendMessageRequest,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

use crate::{
    Call, Core,
    api::Endpoint,
    routes::{agent_files, agents, experiments, query},
};

/// One tool, as `tools/list` and the skill file show it.
#[derive(Debug, Clone, Copy)]
pub struct ToolDef {
    /// The tool's name.
    pub name: &'static str,
    /// A short title.
    pub title: &'static str,
    /// What it does and when to use it, for the model choosing tools.
    pub description: &'static str,
    /// The `roost.v1` message its arguments are.
    pub request: &'static str,
    /// The `roost.v1` message its structured content is.
    pub answer: &'static str,
    /// The REST route that does the same: the tool answers as it does, with its error codes.
    pub rest: &'static Endpoint,
    /// It only reads.
    pub read_only: bool,
    /// It can destroy something (destroy, pause).
    pub destructive: bool,
    /// It reads the observed store, which only dashboard callers may (see
    /// [`crate::access::DashboardAccess`]).
    pub dashboard: bool,
}

const fn tool(
    name: &'static str,
    title: &'static str,
    request: &'static str,
    answer: &'static str,
    rest: &'static Endpoint,
) -> ToolDef {
    ToolDef {
        name,
        title,
        description: "",
        request,
        answer,
        rest,
        read_only: true,
        destructive: false,
        dashboard: false,
    }
}

impl ToolDef {
    const fn describe(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    const fn writes(mut self, destructive: bool) -> Self {
        self.read_only = false;
        self.destructive = destructive;
        self
    }

    /// The error codes it can report: its route's, and invalid_argument and
    /// unauthenticated, which every tool can.
    pub fn errors(&self) -> Vec<ErrorReason> {
        let mut errors = self.rest.errors.to_vec();
        errors.extend([ErrorReason::InvalidArgument, ErrorReason::Unauthenticated]);
        errors.sort_by_key(|r| (r.http_status().as_u16(), r.code()));
        errors.dedup();
        errors
    }

    const fn dashboard(mut self) -> Self {
        self.dashboard = true;
        self
    }
}

/// Every tool, in the order a client lists them.
pub const TOOLS: &[ToolDef] = &[
    tool("list_runtimes", "List runtimes", "ListRuntimesRequest", "ListRuntimesResponse", &agents::RUNTIMES).describe(
        "List the runtime catalogue: each runtime's id (what create_agent takes as `runtime`), monthly price in \
         cents, supported messaging channels, and whether it works on the included metered model.",
    ),
    tool("create_agent", "Create an agent", "ProvisionRequest", "ProvisionResponse", &agents::PROVISION)
        .describe(
            "Create an always-on agent from a runtime with a standing brief (its memory) and an optional `name`. Debits the first 30-day \
             period from the account's credits (the first agent is free). The agent boots asynchronously: call \
             get_agent until `status` is `running` before send_message. Only one deploy per account settles at a \
             time (deploy_settling otherwise).",
        )
        .writes(false),
    tool("list_agents", "List agents", "ListInstancesRequest", "ListInstancesResponse", &agents::INSTANCES)
        .describe("List the account's agents, newest first, with status, brief and config flags."),
    tool("get_agent", "Get an agent", "GetInstanceRequest", "Instance", &agents::INSTANCE).describe(
        "Get one agent: its status (`running` is the only state that accepts messages), brief, model and which \
             secrets are set.",
    ),
    tool("send_message", "Message an agent", "SendMessageRequest", "SendMessageResponse", &agents::MESSAGES)
        .describe(
            "Send a message to a running agent and wait for its reply (one synchronous turn). Turns to one agent run \
             one at a time in arrival order; a turn is capped at 900 seconds. Progress notifications report the \
             wait while the turn queues or runs.",
        )
        .writes(false),
    tool("rate_turn", "Rate a reply", "RateTurnRequest", "RateTurnResponse", &agents::RATING)
        .describe(
            "Rate one of an agent's replies for the account holder: `turn_id` (from send_message or get_activity) \
             and `value` true or false (thumbs up or down) or a number from 1 to 5, with an optional `comment`. \
             Kept as a human score on the turn; rating the same turn again replaces it.",
        )
        .writes(false),
    tool("create_dataset", "Create a dataset", "CreateDatasetRequest", "CreateDatasetResponse", &experiments::CREATE_DATASET)
        .describe(
            "Create a dataset of test cases for experiments: `name`, optional `description`, and optional `items` \
             (as add_dataset_items takes them). Datasets are the account's own.",
        )
        .writes(false),
    tool("add_dataset_items", "Add dataset items", "AddDatasetItemsRequest", "AddDatasetItemsResponse", &experiments::ADD_ITEMS)
        .describe(
            "Append items to a dataset (`dataset_id`), all or none: `items` ([{input, expected, metadata}]), \
             `jsonl` (one {\"input\", \"expected\"} object a line), `csv` (a header row naming input and expected), \
             `turn_ids` (the account's agents' turns: message as input, reply as expected) or `session_id` (an agent \
             id: all its answered turns).",
        )
        .writes(false),
    tool("list_datasets", "List datasets", "ListDatasetsRequest", "ListDatasetsResponse", &experiments::LIST_DATASETS)
        .describe("List the account's datasets, newest first, with their item counts."),
    tool("get_dataset", "Get a dataset", "GetDatasetRequest", "GetDatasetResponse", &experiments::GET_DATASET)
        .describe("Get a dataset (`id`) and its items in order."),
    tool("run_experiment", "Run an experiment", "CreateExperimentRequest", "CreateExperimentResponse", &experiments::CREATE_EXPERIMENT)
        .describe(
            "Run every item of a dataset (`dataset_id`) as a turn against one of the account's agents (`agent_id`), \
             or against a temporary copy of it with another `brief` or `model` (destroyed after). Each answer gets \
             `checks` ([{kind: exact|contains, value?, ignore_case?}]; default exact match when items have expected \
             outputs). Turns are billed like any turn. Runs in the background: poll get_experiment.",
        )
        .writes(false),
    tool("get_experiment", "Get an experiment", "GetExperimentRequest", "GetExperimentResponse", &experiments::GET_EXPERIMENT)
        .describe(
            "Get an experiment (`id`): its status, aggregates (latency, tokens, cost, check pass rates) and each \
             item's answer and checks. Compare two runs of one dataset item by item.",
        ),
    tool("list_experiments", "List experiments", "ListExperimentsRequest", "ListExperimentsResponse", &experiments::LIST_EXPERIMENTS)
        .describe("List the account's experiments, newest first (`dataset_id` narrows to one dataset's runs)."),
    tool("cancel_experiment", "Cancel an experiment", "CancelExperimentRequest", "CancelExperimentResponse", &experiments::CANCEL_EXPERIMENT)
        .describe("Cancel a queued or running experiment (`id`): it stops after its current item and its copy is destroyed.")
        .writes(true),
    tool("list_files", "List an agent's files", "ListFilesRequest", "ListFilesResponse", &agent_files::FILES).describe(
        "List one folder of an agent's workspace (`path`, relative; empty for the workspace itself): each file's          path, kind, size and modification time. With the workspace itself, `memory` names the runtime's memory          files (SOUL.md, MEMORY.md, Hermes' memories) first. Read one with read_file.",
    ),
    tool("read_file", "Read an agent's file", "ReadFileRequest", "ReadFileResponse", &agent_files::FILE).describe(
        "Read one file of an agent's workspace (`path`, relative, as list_files gives it; at most 2 MiB). The          text is the answer; structured content has the bytes as base64.",
    ),
    tool("get_activity", "Get activity", "GetActivityRequest", "GetActivityResponse", &agents::ACTIVITY).describe(
        "Get an agent's recent turns (message, reply, status, tokens, cost) and credit charges, newest first. \
             Works after destroy, so the refund can be seen.",
    ),
    tool("configure_agent", "Configure an agent", "ConfigureRequest", "ConfigureResponse", &agents::CONFIG)
        .describe(
            "Change an agent's name (`name`; renaming restarts nothing), brief (`agent_brief`), model, model-provider key (`PROVIDER_API_KEY`, for byok), \
             chat bot token (`MESSAGING_BOT_TOKEN`, connects a Telegram bot; checked with Telegram first) or the \
             chats it answers (`MESSAGING_ALLOWED_CHAT_IDS`, comma-separated chat ids). Only fields given change; \
             an empty key or token removes it. A running agent restarts to apply it.",
        )
        .writes(false),
    tool("pause_agent", "Pause an agent", "PauseRequest", "PauseResponse", &agents::PAUSE)
        .describe("Pause a running agent (it stops accepting messages until resumed).")
        .writes(true),
    tool("resume_agent", "Resume an agent", "ResumeRequest", "ResumeResponse", &agents::RESUME)
        .describe(
            "Resume a paused or failed agent; it boots again (poll get_agent until `running`). A suspended agent \
             first pays its renewal.",
        )
        .writes(false),
    tool("destroy_agent", "Destroy an agent", "DestroyRequest", "DestroyResponse", &agents::DESTROY)
        .describe("Destroy an agent for good and refund the unused part of its paid period. Cannot be undone.")
        .writes(true),
    tool("get_channel", "Get an agent's chat bot", "GetChannelRequest", "TelegramChannel", &agents::CHANNEL).describe(
        "Get an agent's Telegram channel: the bot's username, the allowed chats, chats waiting for their pairing \
         code to be approved, messages in and out, and the last error.",
    ),
    tool("pair_channel", "Approve a chat", "PairChannelRequest", "PairChannelResponse", &agents::PAIR)
        .describe(
            "Approve a pairing code: when a chat that is not allowed writes to the agent's bot, the bot answers with \
             a one-time code (valid one hour). Give that `code` here and the chat joins the allowed chats \
             (MESSAGING_ALLOWED_CHAT_IDS). Only approve codes from people you know.",
        )
        .writes(false),
    tool("query", "Query activity", "QueryRequest", "QueryResponse", &query::QUERY)
        .describe(
            "Query observed agent activity with the versioned q/1 contract: pick a `shape` (sessions, spans, traces, \
             …) and give its `args`. Limits out of range are clamped. Dashboard callers only.",
        )
        .dashboard(),
    tool("list_sessions", "List sessions", "ListSessionsRequest", "ListSessionsResponse", &query::SESSIONS)
        .describe("List the most recent observed sessions with their cost and token totals. Dashboard callers only.")
        .dashboard(),
];

/// The tool of a name.
pub fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The input schema of a tool: its request message's schema, with the `query` tool's
/// `shape` and `args` spelled out from the registry.
pub fn input_schema(tool: &ToolDef, registry: &ListShapesResponse) -> Map<String, Value> {
    let mut schema = contract().input_schema(tool.request);
    if tool.name == "query"
        && let Some(Value::Object(properties)) = schema.get_mut("properties")
    {
        properties.insert("shape".into(), shape_schema(registry));
        properties.insert("args".into(), args_schema(registry));
        schema.insert("required".into(), json!(["shape"]));
    }
    schema
}

/// `shape`: one of the registry's names, each described with its arguments.
fn shape_schema(registry: &ListShapesResponse) -> Value {
    let mut description = String::from("The q/1 shape to run. Shapes:");
    for shape in &registry.shapes {
        let args: Vec<&str> = shape.args.iter().map(|a| a.name.as_str()).collect();
        description.push_str(&format!(" `{}`: {} (args: {});", shape.name, shape.description, args.join(", ")));
    }
    json!({ "type": "string", "enum": registry.allowed_shapes, "description": description })
}

/// `args`: every argument any shape takes, typed, with the shapes that take it. (A flat
/// object rather than one schema per shape: clients reject `oneOf` at the top of a tool.)
fn args_schema(registry: &ListShapesResponse) -> Value {
    let mut properties: Map<String, Value> = Map::new();
    for shape in &registry.shapes {
        for arg in &shape.args {
            let entry = properties.entry(arg.name.clone()).or_insert_with(|| {
                let mut schema = match arg.r#type.as_str() {
                    "integer" => json!({ "type": "integer" }),
                    "boolean" => json!({ "type": "boolean" }),
                    "time" => json!({ "type": ["string", "integer"] }),
                    _ => json!({ "type": "string" }),
                };
                schema["description"] = Value::String(format!("{} Shapes:", arg.description));
                schema
            });
            if let Some(Value::String(description)) = entry.get_mut("description") {
                description.push_str(&format!(" {}", shape.name));
                if arg.max > 0 {
                    description.push_str(&format!(" ({}..={})", arg.min, arg.max));
                }
                if let Some(default) = arg.default.as_ref().map(roost_proto::json::value::to_json)
                    && !default.is_null()
                {
                    let value = default;
                    description.push_str(&format!(" (default {value})"));
                }
                description.push(',');
            }
        }
    }
    for value in properties.values_mut() {
        if let Some(Value::String(description)) = value.get_mut("description") {
            description.pop();
            description.push('.');
        }
    }
    json!({
        "type": "object",
        "description": "The shape's arguments; each shape takes only its own (others are refused).",
        "properties": properties,
    })
}

/// Runs a tool through the core. `Ok` is the structured content.
pub(crate) async fn run(core: &Core, call: Call, name: &str, args: Map<String, Value>) -> Result<Value, ApiError> {
    let a = &core.agents;
    let e = &core.experiments;
    match name {
        "list_runtimes" => answer(a.list_runtimes(call.request(parse::<ListRuntimesRequest>(args)?)).await),
        "create_agent" => answer(a.provision(call.request(parse::<ProvisionRequest>(args)?)).await),
        "list_agents" => answer(a.list_instances(call.request(parse::<ListInstancesRequest>(args)?)).await),
        "get_agent" => {
            let reply = a.get_instance(call.request(parse::<GetInstanceRequest>(args)?)).await;
            answer(reply.map(|r| r.map(|r| r.instance.unwrap_or_default())))
        }
        "send_message" => answer(a.send_message(call.request(parse::<SendMessageRequest>(args)?)).await),
        "rate_turn" => answer(a.rate_turn(call.request(parse::<RateTurnRequest>(args)?)).await),
        "create_dataset" => answer(e.create_dataset(call.request(parse::<CreateDatasetRequest>(args)?)).await),
        "add_dataset_items" => answer(e.add_dataset_items(call.request(parse::<AddDatasetItemsRequest>(args)?)).await),
        "list_datasets" => answer(e.list_datasets(call.request(parse::<ListDatasetsRequest>(args)?)).await),
        "get_dataset" => answer(e.get_dataset(call.request(parse::<GetDatasetRequest>(args)?)).await),
        "run_experiment" => answer(e.create_experiment(call.request(parse::<CreateExperimentRequest>(args)?)).await),
        "get_experiment" => answer(e.get_experiment(call.request(parse::<GetExperimentRequest>(args)?)).await),
        "list_experiments" => answer(e.list_experiments(call.request(parse::<ListExperimentsRequest>(args)?)).await),
        "cancel_experiment" => answer(e.cancel_experiment(call.request(parse::<CancelExperimentRequest>(args)?)).await),
        "list_files" => answer(a.list_files(call.request(parse::<ListFilesRequest>(args)?)).await),
        "read_file" => answer(a.read_file(call.request(parse::<ReadFileRequest>(args)?)).await),
        "get_activity" => answer(a.get_activity(call.request(parse::<GetActivityRequest>(args)?)).await),
        "configure_agent" => answer(a.configure(call.request(parse::<ConfigureRequest>(args)?)).await),
        "pause_agent" => answer(a.pause(call.request(parse::<PauseRequest>(args)?)).await),
        "resume_agent" => answer(a.resume(call.request(parse::<ResumeRequest>(args)?)).await),
        "destroy_agent" => answer(a.destroy(call.request(parse::<DestroyRequest>(args)?)).await),
        "get_channel" => {
            let reply = a.get_channel(call.request(parse::<GetChannelRequest>(args)?)).await;
            answer(reply.map(|r| r.map(|r| r.channel.unwrap_or_default())))
        }
        "pair_channel" => answer(a.pair_channel(call.request(parse::<PairChannelRequest>(args)?)).await),
        "query" => answer(core.query.query(call.request(parse::<QueryRequest>(args)?)).await),
        "list_sessions" => answer(core.query.list_sessions(call.request(parse::<ListSessionsRequest>(args)?)).await),
        other => Err(ApiError::new(ErrorReason::NotFound, format!("no tool named {other}"))),
    }
}

/// The registry, for the `query` tool's schema.
pub(crate) async fn registry(core: &Core) -> ListShapesResponse {
    let reply = core.query.list_shapes(tonic::Request::new(ListShapesRequest {})).await;
    reply.map(tonic::Response::into_inner).unwrap_or_default()
}

/// Tool arguments as the rpc's request: the same strict serde as a REST body, so a
/// misspelt or unknown argument, or text holding a NUL, is `invalid_argument` naming it.
pub(crate) fn parse<T: DeserializeOwned + Serialize>(args: Map<String, Value>) -> Result<T, ApiError> {
    let args: T = serde_json::from_value(Value::Object(args))
        .map_err(|e| ApiError::invalid_argument(format!("invalid arguments: {e}")))?;
    match roost_proto::nul::nul_field(&args) {
        Some(field) => Err(roost_proto::codec::nul_refused(&field)),
        None => Ok(args),
    }
}

fn answer<T: Serialize>(reply: Result<tonic::Response<T>, tonic::Status>) -> Result<Value, ApiError> {
    let message = reply.map_err(|status| ApiError::from_status(&status))?.into_inner();
    serde_json::to_value(message).map_err(|e| ApiError::new(ErrorReason::Internal, format!("unencodable answer: {e}")))
}

/// The readable text of a tool's answer: what a person (or a model) reads first.
pub fn summary(name: &str, content: &Value) -> String {
    let text = |key: &str| content.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let dollars = |key: &str| usd_exact(content.get(key).and_then(Value::as_i64).unwrap_or_default());
    let count = |key: &str| content.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    match name {
        "send_message" => text("reply"),
        "rate_turn" => {
            let score = content.get("score").cloned().unwrap_or_default();
            let get = |key: &str| score.get(key).cloned().unwrap_or_default();
            format!(
                "Rated turn {}: {} = {}.",
                get("turn_id").as_str().unwrap_or_default(),
                get("name").as_str().unwrap_or_default(),
                get("value")
            )
        }
        "create_agent" => format!(
            "Created agent {} ({}), status {}; charged {}, balance {}. It boots in the background: call get_agent \
             until its status is running.",
            text("id"),
            text("runtime"),
            text("status"),
            dollars("charged_nanocents"),
            dollars("balance_nanocents"),
        ),
        "configure_agent" | "pause_agent" | "resume_agent" => {
            format!("Agent {} is now {}.", text("id"), text("status"))
        }
        "destroy_agent" => format!(
            "Destroyed agent {}; refunded {}, balance {}.",
            text("id"),
            dollars("refunded_nanocents"),
            dollars("balance_nanocents")
        ),
        "get_agent" => {
            format!("Agent {} ({}) is {}. Brief: {}", text("id"), text("runtime"), text("status"), text("brief"))
        }
        "list_agents" => format!("{} agents.\n{}", count("instances"), pretty(content)),
        "list_runtimes" => format!("{} runtimes.\n{}", count("runtimes"), pretty(content)),
        "get_activity" => format!("{} turns, {} charges.\n{}", count("turns"), count("charges"), pretty(content)),
        "list_files" => {
            let lines = |key: &str| {
                let entries = content.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
                entries.iter().map(file_line).collect::<Vec<_>>().join("\n")
            };
            let mut out = format!("{} entries in /{}.", count("files"), text("path"));
            if count("memory") > 0 {
                out.push_str(&format!("\nMemory files:\n{}", lines("memory")));
            }
            if count("files") > 0 {
                out.push_str(&format!("\nFiles:\n{}", lines("files")));
            }
            if content.get("truncated").and_then(Value::as_bool) == Some(true) {
                out.push_str("\n(more entries than listed)");
            }
            out
        }
        "read_file" => {
            let file = content.get("file").cloned().unwrap_or_default();
            let path = file.get("path").and_then(Value::as_str).unwrap_or_default().to_owned();
            let bytes = file.get("size_bytes").and_then(Value::as_i64).unwrap_or_default();
            let body = content.get("content").and_then(Value::as_str).unwrap_or_default();
            let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, body).unwrap_or_default();
            match String::from_utf8(decoded) {
                Ok(text) if content.get("text").and_then(Value::as_bool) == Some(true) => text,
                _ => format!("{path} is {bytes} bytes of binary data (base64 in the structured content)."),
            }
        }
        "pair_channel" => format!(
            "Chat {} may now talk to agent {}.",
            content.get("chat_id").and_then(Value::as_i64).unwrap_or_default(),
            text("id")
        ),
        _ => pretty(content),
    }
}

/// One workspace entry as a line: `path  (kind, size)`.
fn file_line(entry: &Value) -> String {
    let get = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default();
    let size = entry.get("size_bytes").and_then(Value::as_i64).unwrap_or_default();
    match get("kind") {
        "folder" => format!("{}/", get("path")),
        kind => format!("{}  ({kind}, {size} bytes)", get("path")),
    }
}

fn pretty(content: &Value) -> String {
    serde_json::to_string_pretty(content).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_names_described_messages_and_a_rest_route() {
        for tool in TOOLS {
            assert!(contract().message(tool.request).is_some(), "{}: {}", tool.name, tool.request);
            assert!(contract().message(tool.answer).is_some(), "{}: {}", tool.name, tool.answer);
            assert!(!tool.description.is_empty(), "{}", tool.name);
        }
        let seed = [
            "list_runtimes",
            "create_agent",
            "send_message",
            "get_activity",
            "configure_agent",
            "pause_agent",
            "resume_agent",
            "destroy_agent",
        ];
        for name in seed {
            assert!(find(name).is_some(), "{name}");
        }
    }

    #[test]
    fn arguments_are_parsed_strictly() {
        let ok: SendMessageRequest =
            parse(json!({"instance_id": "i", "text": "hi"}).as_object().cloned().unwrap_or_default()).unwrap();
        assert_eq!(ok.text, "hi");
        let err = parse::<SendMessageRequest>(
            json!({"instance_id": "i", "txt": "hi"}).as_object().cloned().unwrap_or_default(),
        )
        .unwrap_err();
        assert_eq!(err.reason(), ErrorReason::InvalidArgument);
        assert!(err.message().contains("txt"), "{}", err.message());
    }
}
