//! The q/1 registry: every shape, its arguments and its columns, declared once. The gRPC
//! QueryService, the REST routes, the MCP query tool and the q/1 section of docs/query.md all come
//! from this table (a test keeps that file in step). Evolution is additive only: a new
//! shape, argument or column is fine; renaming or removing one needs q/2.

use super::args::ArgSpec;

/// The contract this registry implements.
pub const CONTRACT: &str = "q/1";

/// How a column's stored value is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColKind {
    /// Text (or null).
    Text,
    /// A whole number.
    Int,
    /// A number.
    Float,
    /// Unix nanoseconds, shown as RFC 3339.
    Time,
    /// Nanocents, shown as US dollars.
    CostUsd,
    /// Nanoseconds, shown as milliseconds.
    DurationMs,
    /// JSON text, shown as JSON.
    Json,
    /// An OTLP status code, shown as "unset", "ok" or "error".
    Status,
    /// [Packed attributes](crate::telemetry::packed_attributes), shown as a JSON object.
    /// Read as the hidden `_packed_attributes`: where a row has them, they are its
    /// `attributes` (rows stored before keep JSON text there).
    Packed,
}

/// One column of a shape's rows.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    /// Its name in a row.
    pub name: &'static str,
    /// The SQL expression it is read from.
    pub sql: &'static str,
    /// How it is shown.
    pub kind: ColKind,
}

const fn col(name: &'static str, sql: &'static str, kind: ColKind) -> Col {
    Col { name, sql, kind }
}

/// How a filter argument narrows the rows.
#[derive(Debug, Clone, Copy)]
pub enum FilterKind {
    /// `sql = arg`.
    Eq,
    /// `sql >= arg`.
    AtLeast,
    /// `sql <= arg`.
    AtMost,
    /// When the boolean argument is true, `sql` (a condition) must hold.
    Flag,
    /// `sql >= the UTC day that many days back` (an integer argument).
    DaysBack,
    /// `sql >= the UTC hour that many hours back` (`YYYY-MM-DDTHH`; an integer argument).
    HoursBack,
    /// `sql` contains the string argument, ignoring case: `LOWER(sql) LIKE LOWER('%arg%')`
    /// with the argument's `%`, `_` and `\` matched literally. The same on both backends
    /// for ASCII letters (SQLite's `LOWER` folds only those; PostgreSQL's folds others too).
    Contains,
    /// `sql` (a condition) holds, with `{arg}` in it standing for the string argument.
    Holds,
    /// The row (its key column is `sql`: `trace_id` or `session_id`) has a score passing
    /// the argument's test ([`super::scores::parse_filter`]).
    Scored,
    /// `sql` (a condition) holds, with `{arg}` in it standing for the LIKE pattern
    /// `%arg%` (its `%`, `_` and `\` escaped as for [`FilterKind::Contains`]).
    HoldsLike,
    /// `sql >= arg` (an integer), or `sql = 0` too when the boolean argument named here is
    /// true: log records whose severity is unset (GenAI events carry none) pass a minimum
    /// the way the log stream passes them, as info.
    AtLeastOrUnset(&'static str),
}

/// One filter of a table shape.
#[derive(Debug, Clone, Copy)]
pub struct Filter {
    /// The argument that drives it.
    pub arg: &'static str,
    /// The column (or condition, for flags).
    pub sql: &'static str,
    /// How it compares.
    pub kind: FilterKind,
}

const fn filter(arg: &'static str, sql: &'static str, kind: FilterKind) -> Filter {
    Filter { arg, sql, kind }
}

/// How a shape gets its rows.
#[derive(Debug, Clone, Copy)]
pub enum Plan {
    /// One SELECT: `columns FROM from WHERE filters ORDER BY order LIMIT limit`.
    Table {
        /// The table.
        from: &'static str,
        /// Filters, applied when their argument is given.
        filters: &'static [Filter],
        /// The ORDER BY clause.
        order: &'static str,
        /// Other orders the `order` argument picks: (its value, the ORDER BY clause).
        orders: &'static [(&'static str, &'static str)],
    },
    /// A session's spans, events and logs merged in time order.
    Transcript,
    /// One span by its key (`trace_id`, `span_id`: the `spans_key` index), then its events
    /// from `span_events` in time order (a second query on the same key, at most
    /// [`MAX_SPAN_EVENTS`]) as the row's `events`.
    Span,
    /// Full-text search over the search documents (`super::search`), with the SQL of the
    /// store's backend (FTS5 or a `tsvector`).
    Search,
    /// Percentiles from the hourly latency histograms (`super::latency`).
    Latency,
    /// Aggregates of the scores (`super::scores`).
    Scores,
}

/// Most events the `span` shape answers for a span (ingest keeps at most 128).
pub const MAX_SPAN_EVENTS: i64 = 1000;

/// A step run on each row of a shape: (row, its arguments, now in Unix ns).
pub type PostStep = fn(&mut serde_json::Map<String, serde_json::Value>, &super::args::Args, i64);

/// A shape of the registry.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Its name.
    pub name: &'static str,
    /// What its rows are.
    pub description: &'static str,
    /// Its arguments.
    pub args: &'static [ArgSpec],
    /// Its columns.
    pub columns: &'static [Col],
    /// How it runs.
    pub plan: Plan,
    /// Fills derived fields of each row (and drops internal `_` columns).
    pub post: Option<PostStep>,
}

use ColKind::{CostUsd, DurationMs, Float, Int, Json, Packed, Status, Text, Time};
use FilterKind::{AtLeast, AtLeastOrUnset, AtMost, Contains, DaysBack, Eq, Flag, Holds, HoldsLike, HoursBack, Scored};

/// The spans of trace `{arg}` (its id): they are keyed by the trace's number (migration
/// 0028), found once through `traces`' key.
pub(super) const TRACE_SPANS: &str = "trace_seq = (SELECT seq FROM traces WHERE trace_id = {arg})";

/// The log records (or messages) of trace `{arg}`: those with its number, and those that
/// arrived before any of its spans and so have none yet (migration 0029: both indexed).
pub(super) const TRACE_ROWS: &str = "(trace_seq = (SELECT seq FROM traces WHERE trace_id = {arg}) \
     OR (trace_seq IS NULL AND trace_id IS NOT NULL AND trace_id = {arg}))";

/// The spans of session `{arg}`: those of its traces (a span's session is its trace's,
/// migration 0032), found through `traces_session` and each trace's number; spans have no
/// index by session of their own (0036). The empty id is no session.
pub(super) const SESSION_SPANS: &str =
    "trace_seq IN (SELECT seq FROM traces WHERE session_id = {arg} AND session_id <> '')";

/// The log records (or messages) of session `{arg}`: those of its traces, and those no
/// trace reaches (sent without one, or before any span of theirs), which alone keep an
/// index by session (migration 0036). `{session_traces}` is written for the backend
/// (`run::for_backend`).
pub(super) const SESSION_ROWS: &str =
    "(trace_seq {session_traces} OR (trace_seq IS NULL AND session_id IS NOT NULL AND session_id = {arg}))";

/// The numbers of session `{arg}`'s traces, the tail of a test of `trace_seq` inside an
/// `OR`, on SQLite: it answers the `OR` with one index lookup per number and the other
/// arm's index.
pub(super) const SESSION_TRACES_SQLITE: &str =
    "IN (SELECT seq FROM traces WHERE session_id = {arg} AND session_id <> '')";

/// The same on PostgreSQL: the numbers read once into an array. With `IN (SELECT …)` it
/// cannot combine the semi-join with the `OR`'s other arm, so it read the table newest
/// first testing every row against the set (a session's transcript took 2 s at 10M
/// spans); against an array it ORs two bitmap index scans.
pub(super) const SESSION_TRACES_POSTGRES: &str =
    "= ANY(ARRAY(SELECT seq FROM traces WHERE session_id = {arg} AND session_id <> ''))";

/// A session has the [labels](crate::telemetry::labels) of its traces and of its log
/// records: `{prefix}` stands for the label's kind (`user:`, `tag:`, `meta:`).
macro_rules! session_label {
    ($prefix:literal) => {
        concat!(
            "session_id IN (SELECT session_id FROM session_labels WHERE label = '",
            $prefix,
            "' || {arg} UNION SELECT t.session_id FROM trace_labels l JOIN traces t ON t.trace_id = l.trace_id \
             WHERE l.label = '",
            $prefix,
            "' || {arg} AND t.session_id <> '')"
        )
    };
}

/// A trace has the labels of its spans.
macro_rules! trace_label {
    ($prefix:literal) => {
        concat!("trace_id IN (SELECT trace_id FROM trace_labels WHERE label = '", $prefix, "' || {arg})")
    };
}

const USER: &str = "only those for this user (user.id, langfuse.user.id, enduser.id, and the like), matched whole";
const TAG: &str = "only those with this tag (tag.tags, langfuse.trace.tags), matched whole";
const METADATA: &str = "only those with this metadata key (`plan`), or key and value (`plan=pro`), matched whole \
     (OpenInference metadata, langfuse.*.metadata.*, traceloop.association.properties.*, ai.telemetry.metadata.*)";

const SCORE_FILTER: &str = "only those with a score of this name (`helpful`), with this category or true/false \
     (`tone=friendly`, `helpful=true`), or with a number compared (`quality>=0.5`; <, <=, > and >= work)";

/// A trace's or session's scores as a JSON object, written for the backend
/// (`run::for_backend`): per name, the mean of its numbers (booleans count 1 and 0), or for
/// categories the greatest label. A trace's include its spans' and turn's; a session's,
/// everything in it.
pub(super) const SCORES_JSON_SQLITE: &str = "(SELECT json_group_object(name, v) FROM (SELECT name, CASE WHEN \
     COUNT(value) > 0 THEN ROUND(AVG(value), 4) ELSE MAX(label) END AS v FROM scores s WHERE s.{key} = {table}.{key} \
     AND s.{key} <> '' GROUP BY name))";

/// The same on PostgreSQL.
pub(super) const SCORES_JSON_POSTGRES: &str = "(SELECT COALESCE(json_object_agg(name, v), '{}')::text FROM \
     (SELECT name, CASE WHEN COUNT(value) > 0 THEN to_json(ROUND(AVG(value)::numeric, 4)) ELSE to_json(MAX(label)) \
     END AS v FROM scores s WHERE s.{key} = {table}.{key} AND s.{key} <> '' GROUP BY name) x)";

const SINCE: &str = "only rows at or after this time";
const UNTIL: &str = "only rows at or before this time";

/// Paging for every table shape: rows skipped before the first one answered (`OFFSET`).
const OFFSET: ArgSpec =
    ArgSpec::integer("offset", "rows to skip before the first one answered, for paging", 0, 0, 10_000);

/// A span's columns, in the `spans` shape and (with more) in the `span` shape.
const SPAN_COLUMNS: &[Col] = &[
    col("trace_id", "trace_id", Text),
    col("span_id", "span_id", Text),
    col("parent_span_id", "parent_span_id", Text),
    col("name", "name", Text),
    col("kind", "kind", Int),
    col("start_time", "start_ns", Time),
    col("end_time", "end_ns", Time),
    col("duration_ms", "end_ns - start_ns", DurationMs),
    col("status", "status_code", Status),
    col("status_message", "status_message", Text),
    col("service", "service", Text),
    col("session_id", "session_id", Text),
    col("agent_id", "agent_id", Text),
    col("operation", "operation", Text),
    col("system", "gen_ai_system", Text),
    col("request_model", "request_model", Text),
    col("response_model", "response_model", Text),
    col("model", "COALESCE(response_model, request_model)", Text),
    col("input_tokens", "input_tokens", Int),
    col("output_tokens", "output_tokens", Int),
    col("cache_read_tokens", "cache_read_tokens", Int),
    col("cache_write_tokens", "cache_write_tokens", Int),
    col("cost_usd", "cost_nanocents", CostUsd),
    col("tool_name", "tool_name", Text),
    col("attributes", "attributes", Json),
    col("_packed_attributes", "packed_attributes", Packed),
];

/// What the `span` shape adds to [`SPAN_COLUMNS`]. `events` is filled by the plan's second
/// query ([`Plan::Span`]).
const SPAN_DETAIL: [Col; 3] = [
    col("scope", "scope", Text),
    col("resource", "COALESCE((SELECT r.attributes FROM resources r WHERE r.id = spans.resource_id), '{}')", Json),
    col("events", "'[]'", Json),
];

/// `a` then `b`, in a constant.
const fn concat<const N: usize>(a: &[Col], b: &[Col]) -> [Col; N] {
    assert!(a.len() + b.len() == N);
    let mut out = [col("", "", Text); N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

const SPAN_DETAIL_COLUMNS: [Col; SPAN_COLUMNS.len() + SPAN_DETAIL.len()] = concat(SPAN_COLUMNS, &SPAN_DETAIL);

/// Every shape, in the order `?` lists them.
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "sessions",
        description: "Sessions (grouped by session.id / gen_ai.conversation.id, or a run's session), most recently active first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 50, 1, 500),
            OFFSET,
            ArgSpec::string("session_id", "only this session (its totals)"),
            ArgSpec::string("agent_id", "only this agent's sessions"),
            ArgSpec::string("service", "only sessions last seen from this service"),
            ArgSpec::string("model", "only sessions whose last model is this one"),
            ArgSpec::string("search", "only sessions whose id contains this text, ignoring case"),
            ArgSpec::time("since", "only sessions active at or after this time"),
            ArgSpec::time("until", "only sessions that began at or before this time"),
            ArgSpec::string(
                "service_contains",
                "only sessions last seen from a service whose name contains this text, ignoring case",
            ),
            ArgSpec::string(
                "model_contains",
                "only sessions whose last model contains this text, ignoring case (a family: gpt-4o-mini finds \
                 gpt-4o-mini-2024-07-18); only the last model is matched, not every model the session used",
            ),
            ArgSpec::choice(
                "order",
                "the rows' order: last_seen (most recently active first, the default), tokens (most tokens in and \
                 out first) or cost (most expensive first)",
                &["last_seen", "tokens", "cost"],
            ),
            ArgSpec::string("user", USER),
            ArgSpec::string("tag", TAG),
            ArgSpec::string("metadata", METADATA),
            ArgSpec::checked("score", SCORE_FILTER, super::scores::check_filter),
        ],
        columns: &[
            col("session_id", "session_id", Text),
            col("agent_id", "agent_id", Text),
            col("service", "service", Text),
            col("first_seen", "first_ns", Time),
            col("last_seen", "last_ns", Time),
            col("spans", "spans", Int),
            col("events", "events", Int),
            col("logs", "logs", Int),
            col("errors", "errors", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("last_model", "last_model", Text),
            col("unpriced_calls", "unpriced_calls", Int),
            col("agent_name", "COALESCE((SELECT i.name FROM instances i WHERE i.id = sessions.agent_id), '')", Text),
            col("scores", "{session_scores}", Json),
        ],
        plan: Plan::Table {
            from: "sessions",
            filters: &[
                filter("session_id", "session_id", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("service", "service", Eq),
                filter("model", "last_model", Eq),
                filter("search", "session_id", Contains),
                filter("since", "last_ns", AtLeast),
                filter("until", "first_ns", AtMost),
                filter("service_contains", "service", Contains),
                filter("model_contains", "COALESCE(last_model, '')", Contains),
                filter("user", session_label!("user:"), Holds),
                filter("tag", session_label!("tag:"), Holds),
                filter("metadata", session_label!("meta:"), Holds),
                filter("score", "session_id", Scored),
            ],
            order: "last_ns DESC, session_id",
            orders: &[
                ("tokens", "COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) DESC, last_ns DESC, session_id"),
                ("cost", "COALESCE(cost_nanocents, 0) DESC, last_ns DESC, session_id"),
            ],
        },
        post: None,
    },
    Shape {
        name: "events",
        description: "Custom-run events (and hosted agents' turns), newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("session_id", "only this session's events"),
            ArgSpec::string("run_id", "only this run's events"),
            ArgSpec::string("agent_id", "only this agent's events"),
            ArgSpec::string("event_type", "only events of this type"),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
        ],
        columns: &[
            col("id", "id", Text),
            col("run_id", "run_id", Text),
            col("ts", "ts_ns", Time),
            col("event_type", "event_type", Text),
            col("session_id", "session_id", Text),
            col("agent_id", "agent_id", Text),
            col("tool_name", "tool_name", Text),
            col("model", "model", Text),
            col("role", "role", Text),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("data", "data", Json),
        ],
        plan: Plan::Table {
            from: "events",
            filters: &[
                filter("session_id", "session_id", Eq),
                filter("run_id", "run_id", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("event_type", "event_type", Eq),
                filter("since", "ts_ns", AtLeast),
                filter("until", "ts_ns", AtMost),
            ],
            order: "ts_ns DESC, seq DESC",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "runs",
        description: "Custom runs with their counts, newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 50, 1, 500),
            OFFSET,
            ArgSpec::string("session_id", "only this session's runs"),
            ArgSpec::string("agent_id", "only this agent's runs"),
            ArgSpec::string("runtime", "only runs of this runtime"),
            ArgSpec::string("status", "running, completed, failed or cancelled"),
            ArgSpec::time("since", "only runs started at or after this time"),
            ArgSpec::time("until", "only runs started at or before this time"),
        ],
        columns: &[
            col("run_id", "id", Text),
            col("runtime", "runtime", Text),
            col("session_id", "session_id", Text),
            col("agent_id", "agent_id", Text),
            col("status", "status", Text),
            col("started_at", "started_ns", Time),
            col("ended_at", "ended_ns", Time),
            col("events", "events", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("metadata", "metadata", Json),
        ],
        plan: Plan::Table {
            from: "runs",
            filters: &[
                filter("session_id", "session_id", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("runtime", "runtime", Eq),
                filter("status", "status", Eq),
                filter("since", "started_ns", AtLeast),
                filter("until", "started_ns", AtMost),
            ],
            order: "started_ns DESC, id",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "spans",
        description: "Spans with their GenAI fields, newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("trace_id", "only this trace's spans (hex)"),
            ArgSpec::string("session_id", "only this session's spans"),
            ArgSpec::string("service", "only spans of this service"),
            ArgSpec::string("agent_id", "only this agent's spans"),
            ArgSpec::boolean("errors_only", "only spans with an error status"),
            ArgSpec::time("since", "only spans started at or after this time"),
            ArgSpec::time("until", "only spans started at or before this time"),
        ],
        columns: SPAN_COLUMNS,
        plan: Plan::Table {
            from: "spans",
            filters: &[
                // Spans are keyed by their trace's number (migration 0028).
                filter("trace_id", TRACE_SPANS, Holds),
                filter("session_id", SESSION_SPANS, Holds),
                filter("service", "service", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("errors_only", "status_code = 2", Flag),
                filter("since", "start_ns", AtLeast),
                filter("until", "start_ns", AtMost),
            ],
            order: "start_ns DESC, id DESC",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "traces",
        description: "Traces summarised (root span, span and error counts, tokens, cost), newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 50, 1, 500),
            OFFSET,
            ArgSpec::string("trace_id", "only this trace (hex): its totals"),
            ArgSpec::string("session_id", "only this session's traces"),
            ArgSpec::string("service", "only traces whose root is in this service"),
            ArgSpec::string("model", "only traces with a span of this model"),
            ArgSpec::boolean("errors_only", "only traces with an error span"),
            ArgSpec::boolean(
                "sessionless",
                "only conversations without a session: traces that hold a model call and no session id (the official \
                 OpenAI instrumentation sends none)",
            ),
            ArgSpec::time("since", "only traces started at or after this time"),
            ArgSpec::time("until", "only traces started at or before this time"),
            ArgSpec::string("service_contains", "only traces whose root's service contains this text, ignoring case"),
            ArgSpec::string(
                "model_contains",
                "only traces with a span whose request or response model contains this text, ignoring case (a \
                 family: gpt-4o-mini finds gpt-4o-mini-2024-07-18)",
            ),
            ArgSpec::string("session_contains", "only traces whose session id contains this text, ignoring case"),
            ArgSpec::choice(
                "order",
                "the rows' order: start (newest first, the default), duration (longest first), tokens (most tokens \
                 in and out first) or cost (most expensive first)",
                &["start", "duration", "tokens", "cost"],
            ),
            ArgSpec::string("user", USER),
            ArgSpec::string("tag", TAG),
            ArgSpec::string("metadata", METADATA),
            ArgSpec::checked("score", SCORE_FILTER, super::scores::check_filter),
        ],
        columns: &[
            col("trace_id", "trace_id", Text),
            col("root_name", "root_name", Text),
            col("service", "service", Text),
            col("session_id", "session_id", Text),
            col("start_time", "start_ns", Time),
            col("end_time", "end_ns", Time),
            col("duration_ms", "end_ns - start_ns", DurationMs),
            col("spans", "spans", Int),
            col("errors", "errors", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("model_calls", "model_calls", Int),
            col("unpriced_calls", "unpriced_calls", Int),
            col("scores", "{trace_scores}", Json),
        ],
        plan: Plan::Table {
            from: "traces",
            filters: &[
                filter("trace_id", "trace_id", Eq),
                filter("session_id", "session_id", Eq),
                filter("service", "service", Eq),
                // `LIMIT 1 OFFSET 0` keeps PostgreSQL from turning the EXISTS into a
                // join: its statistics cannot say how many spans a model filter holds,
                // and at 10M spans it once guessed few and read them all (31 s)
                // where walking the newest traces and probing each took 3 ms.
                filter(
                    "model",
                    "EXISTS (SELECT 1 FROM spans s WHERE s.trace_seq = traces.seq \
                     AND COALESCE(s.response_model, s.request_model) = {arg} LIMIT 1 OFFSET 0)",
                    Holds,
                ),
                filter("errors_only", "errors > 0", Flag),
                filter("sessionless", "session_id = '' AND model_calls > 0", Flag),
                filter("since", "start_ns", AtLeast),
                filter("until", "start_ns", AtMost),
                filter("service_contains", "service", Contains),
                filter(
                    "model_contains",
                    "EXISTS (SELECT 1 FROM spans s WHERE s.trace_seq = traces.seq \
                     AND (LOWER(COALESCE(s.response_model, '')) LIKE LOWER({arg}) ESCAPE '\\' \
                     OR LOWER(COALESCE(s.request_model, '')) LIKE LOWER({arg}) ESCAPE '\\') LIMIT 1 OFFSET 0)",
                    HoldsLike,
                ),
                filter("session_contains", "session_id", Contains),
                filter("user", trace_label!("user:"), Holds),
                filter("tag", trace_label!("tag:"), Holds),
                filter("metadata", trace_label!("meta:"), Holds),
                filter("score", "trace_id", Scored),
            ],
            order: "start_ns DESC, trace_id",
            orders: &[
                ("duration", "(end_ns - start_ns) DESC, start_ns DESC, trace_id"),
                ("tokens", "COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) DESC, start_ns DESC, trace_id"),
                ("cost", "COALESCE(cost_nanocents, 0) DESC, start_ns DESC, trace_id"),
            ],
        },
        post: None,
    },
    Shape {
        name: "logs",
        description: "Log records, newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("session_id", "only this session's records"),
            ArgSpec::string("trace_id", "only this trace's records (hex)"),
            ArgSpec::string("event_name", "only events of this name (e.g. claude_code.api_request)"),
            ArgSpec::string("service", "only this service's records"),
            ArgSpec::integer(
                "min_severity",
                "only records at or above this OTLP severity number (9 info, 13 warn, 17 error)",
                0,
                0,
                24,
            ),
            ArgSpec::boolean(
                "unset_severity",
                "with min_severity, also records whose severity is unset (0), as the log stream \
                 counts them: info",
            ),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
        ],
        columns: &[
            col("time", "time_ns", Time),
            col("severity_number", "severity_number", Int),
            col("severity", "severity_text", Text),
            col("body", "body", Text),
            col("service", "service", Text),
            col("trace_id", "trace_id", Text),
            col("span_id", "span_id", Text),
            col("session_id", "session_id", Text),
            col("event_name", "event_name", Text),
            col("agent_id", "agent_id", Text),
            col("model", "model", Text),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cache_read_tokens", "cache_read_tokens", Int),
            col("cache_write_tokens", "cache_write_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("tool_name", "tool_name", Text),
            col("attributes", "attributes", Json),
        ],
        plan: Plan::Table {
            from: "logs",
            filters: &[
                filter("event_name", "event_name", Eq),
                filter("session_id", SESSION_ROWS, Holds),
                filter("trace_id", TRACE_ROWS, Holds),
                filter("service", "service", Eq),
                filter("min_severity", "severity_number", AtLeastOrUnset("unset_severity")),
                filter("since", "time_ns", AtLeast),
                filter("until", "time_ns", AtMost),
            ],
            order: "time_ns DESC, id DESC",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "metrics",
        description: "Metric data points, newest first.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("name", "only this metric"),
            ArgSpec::string("service", "only this service's points"),
            ArgSpec::string("session_id", "only points whose attributes name this session"),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
        ],
        columns: &[
            col("name", "name", Text),
            col("kind", "kind", Text),
            col("unit", "unit", Text),
            col("service", "service", Text),
            col("time", "time_ns", Time),
            col("value", "value", Float),
            col("count", "count", Int),
            col("detail", "detail", Json),
            col("attributes", "attributes", Json),
        ],
        plan: Plan::Table {
            from: "metric_points",
            filters: &[
                filter("name", "name", Eq),
                filter("service", "service", Eq),
                filter("session_id", "session_id", Eq),
                filter("since", "time_ns", AtLeast),
                filter("until", "time_ns", AtMost),
            ],
            order: "time_ns DESC, id DESC",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "models",
        description: "Tokens, calls and cost per model per UTC day (spans, events and log events; metrics for services that report no calls), newest day first.",
        args: &[
            ArgSpec::integer("days", "how many days back, today included", 30, 1, 3660),
            ArgSpec::string("model", "only this model"),
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
        ],
        columns: &[
            col("day", "day", Text),
            col("model", "model", Text),
            col("calls", "calls", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
        ],
        plan: Plan::Table {
            from: crate::telemetry::summaries::USAGE_WITH_METRICS,
            filters: &[filter("days", "day", DaysBack), filter("model", "model", Eq)],
            order: "day DESC, cost_nanocents DESC, model",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "usage_hourly",
        description: "Tokens, calls and cost per model per UTC hour (spans, events and log events; usage that services report as metrics is daily only, see models), newest hour first. What the usage page charts for a range of a day.",
        args: &[
            ArgSpec::integer("hours", "how many hours back, this one included", 24, 1, 2160),
            ArgSpec::string("model", "only this model"),
            ArgSpec::integer("limit", "most rows", 500, 1, 5000),
            OFFSET,
        ],
        columns: &[
            col("hour", "hour", Text),
            col("model", "model", Text),
            col("calls", "calls", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("unpriced_calls", "unpriced_calls", Int),
        ],
        plan: Plan::Table {
            from: "usage_hourly",
            filters: &[filter("hours", "hour", HoursBack), filter("model", "model", Eq)],
            order: "hour DESC, cost_nanocents DESC, model",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "latency",
        description: "Model call latency per model, service or agent over the last hours: calls, mean and p50/p95/p99 \
            duration, and the same for the time to first token where senders report it (ttft_calls of them); \
            busiest first. Percentiles are read from hourly histograms kept at ingest, within 2.2 % of the exact \
            value (nearest rank); the group's other two fields are null.",
        args: &[
            ArgSpec::integer("hours", "how many hours back, this one included", 24, 1, 2160),
            ArgSpec::choice(
                "group",
                "what a row is: model (the default), service or agent",
                &["model", "service", "agent"],
            ),
            ArgSpec::string("model", "only calls of this model"),
            ArgSpec::string("service", "only calls from this service"),
            ArgSpec::string("agent_id", "only calls of this agent"),
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
        ],
        columns: &[
            col("model", "", Text),
            col("service", "", Text),
            col("agent_id", "", Text),
            col("calls", "", Int),
            col("mean_ms", "", Float),
            col("p50_ms", "", Float),
            col("p95_ms", "", Float),
            col("p99_ms", "", Float),
            col("ttft_calls", "", Int),
            col("ttft_mean_ms", "", Float),
            col("ttft_p50_ms", "", Float),
            col("ttft_p95_ms", "", Float),
            col("ttft_p99_ms", "", Float),
        ],
        plan: Plan::Latency,
        post: None,
    },
    Shape {
        name: "scores",
        description: "Scores per name (and kind), and per model, agent, service, source, UTC day or hour when \
            `group` says: how many, the mean, min and max of numbers (booleans count 1 and 0; true_count is how \
            many were true) and each category's count; in name order, then the group's. The other group fields \
            are null.",
        args: &[
            ArgSpec::integer("days", "how many days back (ignored when since is given)", 30, 1, 3660),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
            ArgSpec::choice(
                "group",
                "what else a row is per, besides the name: model, agent, service, source, day or hour",
                &["model", "agent", "service", "source", "day", "hour"],
            ),
            ArgSpec::string("name", "only scores with this name"),
            ArgSpec::choice("source", "only scores from api, human or eval", &["api", "human", "eval"]),
            ArgSpec::choice(
                "kind",
                "only numeric, boolean or categorical scores",
                &["numeric", "boolean", "categorical"],
            ),
            ArgSpec::string("model", "only scores of calls of this model"),
            ArgSpec::string("agent_id", "only scores of this agent's work"),
            ArgSpec::string("service", "only scores of this service's work"),
            ArgSpec::string("evaluator_id", "only scores this evaluator gave"),
            ArgSpec::integer("limit", "most rows", 500, 1, 5000),
            OFFSET,
        ],
        columns: &[
            col("name", "", Text),
            col("kind", "", Text),
            col("model", "", Text),
            col("agent_id", "", Text),
            col("service", "", Text),
            col("source", "", Text),
            col("day", "", Text),
            col("hour", "", Text),
            col("scores", "", Int),
            col("mean", "", Float),
            col("min", "", Float),
            col("max", "", Float),
            col("true_count", "", Int),
            col("categories", "", Json),
        ],
        plan: Plan::Scores,
        post: None,
    },
    Shape {
        name: "score_list",
        description: "Scores one by one, newest first: their value (a number, true/false or a category), target \
            and the context roost found for it.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("name", "only scores with this name"),
            ArgSpec::choice("source", "only scores from api, human or eval", &["api", "human", "eval"]),
            ArgSpec::choice(
                "target",
                "only scores of a trace, span, session or turn",
                &["trace", "span", "session", "turn"],
            ),
            ArgSpec::string("trace_id", "only scores on this trace (its spans and turn included)"),
            ArgSpec::string("session_id", "only scores on this session (everything in it included)"),
            ArgSpec::string("turn_id", "only scores on this hosted turn"),
            ArgSpec::string("model", "only scores of calls of this model"),
            ArgSpec::string("agent_id", "only scores of this agent's work"),
            ArgSpec::string("evaluator_id", "only scores this evaluator gave"),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
        ],
        columns: &[
            col("id", "id", Text),
            col("time", "time_ns", Time),
            col("name", "name", Text),
            col("kind", "kind", Text),
            col("value", "value", Float),
            col("comment", "comment", Text),
            col("source", "source", Text),
            col("target", "target", Text),
            col("trace_id", "trace_id", Text),
            col("span_id", "span_id", Text),
            col("session_id", "session_id", Text),
            col("turn_id", "turn_id", Text),
            col("model", "model", Text),
            col("agent_id", "agent_id", Text),
            col("service", "service", Text),
            col("evaluator_id", "evaluator_id", Text),
            col("author", "author", Text),
            col("_kind", "kind", Text),
            col("_label", "label", Text),
        ],
        plan: Plan::Table {
            from: "scores",
            filters: &[
                filter("name", "name", Eq),
                filter("source", "source", Eq),
                filter("target", "target", Eq),
                // `<> ''`: the scores' indexes by target leave out scores not on one.
                filter("trace_id", "(trace_id = {arg} AND trace_id <> '')", Holds),
                filter("session_id", "(session_id = {arg} AND session_id <> '')", Holds),
                filter("turn_id", "(turn_id = {arg} AND turn_id <> '')", Holds),
                filter("model", "model", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("evaluator_id", "evaluator_id", Eq),
                filter("since", "time_ns", AtLeast),
                filter("until", "time_ns", AtMost),
            ],
            order: "time_ns DESC, id",
            orders: &[],
        },
        post: Some(super::scores::list_row),
    },
    Shape {
        name: "experiments",
        description: "Experiments (runs of a dataset against a hosted agent, docs/evaluating.md), newest first: \
            status, items answered and failed, mean turn latency, tokens, what the turns cost and what the judge \
            calls cost. An experiment's items are the `experiment_results` shape.",
        args: &[
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
            ArgSpec::string("dataset_id", "only runs of this dataset"),
            ArgSpec::string("agent_id", "only runs against this agent (or a copy of it)"),
            ArgSpec::string("account_id", "only runs billed to this account"),
            ArgSpec::choice(
                "status",
                "only runs in this state",
                &["queued", "running", "completed", "cancelled", "failed"],
            ),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
        ],
        columns: &[
            col("id", "id", Text),
            col("time", "created_ms * 1000000", Time),
            col("name", "name", Text),
            col("dataset_id", "dataset_id", Text),
            col("agent_id", "agent_id", Text),
            col("copy", "CASE WHEN on_copy THEN 1 ELSE 0 END", Int),
            col("brief", "brief", Text),
            col("model", "model", Text),
            col("account_id", "account_id", Text),
            col("status", "status", Text),
            col("status_detail", "status_detail", Text),
            col("items", "items", Int),
            col("completed", "completed", Int),
            col("failed", "failed", Int),
            col("latency_mean_ms", "CAST(latency_ms AS REAL) / NULLIF(completed, 0)", Float),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("judge_cost_usd", "judge_nanocents", CostUsd),
            col("finished", "finished_ms * 1000000", Time),
        ],
        plan: Plan::Table {
            from: "experiments",
            filters: &[
                filter("dataset_id", "dataset_id", Eq),
                filter("agent_id", "agent_id", Eq),
                filter("account_id", "account_id", Eq),
                filter("status", "status", Eq),
                filter("since", "created_ms * 1000000", AtLeast),
                filter("until", "created_ms * 1000000", AtMost),
            ],
            order: "created_ms DESC, id",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "experiment_results",
        description: "One experiment's results in dataset order: each item's answer, status, latency, tokens, \
            cost, checks passed (an object of check name to true or false) and grades (score name to number or \
            category).",
        args: &[
            ArgSpec::required_string("experiment_id", "the experiment"),
            ArgSpec::choice("status", "only results in this state", &["running", "completed", "failed"]),
            ArgSpec::integer("limit", "most rows", 1000, 1, 10000),
            OFFSET,
        ],
        columns: &[
            col("position", "position", Int),
            col("item_id", "item_id", Text),
            col("turn_id", "turn_id", Text),
            col("status", "status", Text),
            col("output", "output", Text),
            col("error", "error", Text),
            col("latency_ms", "latency_ms", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("checks", "checks", Json),
            col("scores", "scores", Json),
            col("score_errors", "score_errors", Json),
        ],
        plan: Plan::Table {
            from: "experiment_results",
            filters: &[filter("experiment_id", "experiment_id", Eq), filter("status", "status", Eq)],
            order: "position",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "aggregates",
        description: "Activity per UTC day: spans, errors, logs, metric points, events, runs, tokens, cost; newest first.",
        args: &[
            ArgSpec::integer("days", "how many days back, today included", 30, 1, 3660),
            ArgSpec::integer("limit", "most rows", 366, 1, 3660),
            OFFSET,
        ],
        columns: &[
            col("day", "day", Text),
            col("spans", "spans", Int),
            col("span_errors", "span_errors", Int),
            col("logs", "logs", Int),
            col("log_errors", "log_errors", Int),
            col("metric_points", "metric_points", Int),
            col("events", "events", Int),
            col("runs", "runs", Int),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
        ],
        plan: Plan::Table {
            from: "activity_daily",
            filters: &[filter("days", "day", DaysBack)],
            order: "day DESC",
            orders: &[],
        },
        post: None,
    },
    Shape {
        name: "health",
        description: "Per service: when it was last heard from, its volume and error rate, and a verdict (ok, erroring, stale).",
        args: &[
            ArgSpec::integer("stale_after_secs", "silence after which a service is stale", 300, 10, 604_800),
            ArgSpec::integer("limit", "most rows", 100, 1, 1000),
            OFFSET,
        ],
        columns: &[
            col("service", "service", Text),
            col("first_seen", "first_ns", Time),
            col("last_seen", "last_ns", Time),
            col("spans", "spans", Int),
            col("errors", "errors", Int),
            col("logs", "logs", Int),
            col("log_errors", "log_errors", Int),
            col("metric_points", "metric_points", Int),
            col("error_rate", "CAST(errors AS DOUBLE PRECISION) / CASE WHEN spans > 0 THEN spans ELSE 1 END", Float),
            col("status", "''", Text),
            col("_last_ns", "last_ns", Int),
        ],
        plan: Plan::Table { from: "services", filters: &[], order: "last_ns DESC, service", orders: &[] },
        post: Some(health_verdict),
    },
    Shape {
        name: "transcript",
        description: "One session's or one trace's conversation in time order, oldest first: its messages (kind \"message\": role, text, tool_calls), spans (with their status: a failed model call is an error), events (and hosted turns) and other log records (a hosted agent's runtime output, event roost.runtime.output, left out: see the logs shape).",
        args: &[
            ArgSpec::one_of("conversation", "session_id", "the session"),
            ArgSpec::one_of("conversation", "trace_id", "the trace (hex), for senders that send no session"),
            ArgSpec::integer("limit", "most rows", 500, 1, 5000),
            ArgSpec::time("since", SINCE),
        ],
        columns: &[
            col("time", "t", Time),
            col("source", "source", Text),
            col("kind", "kind", Text),
            col("role", "role", Text),
            col("model", "model", Text),
            col("text", "text", Text),
            col("tool_name", "tool_name", Text),
            col("tool_calls", "tool_calls", Json),
            col("input_tokens", "input_tokens", Int),
            col("output_tokens", "output_tokens", Int),
            col("cost_usd", "cost_nanocents", CostUsd),
            col("trace_id", "trace_id", Text),
            col("span_id", "span_id", Text),
            col("run_id", "run_id", Text),
            col("id", "id", Text),
            col("status", "status", Status),
            col("status_message", "status_message", Text),
            // Read here, not answered: the message's text (`message_texts`).
            col("_text_id", "text_id", Int),
        ],
        plan: Plan::Transcript,
        post: None,
    },
    Shape {
        name: "span",
        description: "One span by its trace and span id (no row when there is none): the spans shape's fields, its instrumentation scope, its resource's attributes, its events (oldest first, at most 1000) and, for a model call, its whole exchange as sent and answered (messages: role, text, tool_calls, and new: false for what its input repeats of the conversation).",
        args: &[
            ArgSpec::required_string("trace_id", "the span's trace (hex)"),
            ArgSpec::required_string("span_id", "the span (hex)"),
        ],
        columns: &SPAN_DETAIL_COLUMNS,
        plan: Plan::Span,
        post: None,
    },
    Shape {
        name: "search",
        description: "Full-text search over what agents said and did: messages (prompts, replies, tool calls), tool calls' arguments and results, span names and failures, log bodies, run and turn events; newest first. Every word must match, whole, ignoring case and accents; the last word also matches as a prefix from 3 characters (when the whole words find fewer hits than the limit). source is message, tool, span (a trace's span names), log or event; snippet is the text around the first match. Nothing is indexed while roost runs with --capture-content off.",
        args: &[
            ArgSpec::required_string("text", "the words to find"),
            ArgSpec::integer("limit", "most rows", 50, 1, 500),
            ArgSpec::choice(
                "group",
                "hit (one row per match, the default), conversation (one per session, or per trace for conversations \
                 without one) or trace (one per trace); a group's row is its newest hit, with hits counting the hits \
                 read (up to 2000)",
                &["hit", "conversation", "trace"],
            ),
            ArgSpec::time("since", SINCE),
            ArgSpec::time("until", UNTIL),
            ArgSpec::string("session_id", "only this session's hits"),
            ArgSpec::string("trace_id", "only this trace's hits"),
            ArgSpec::choice("source", "only hits of this source", &["message", "tool", "span", "log", "event"]),
            ArgSpec::string(
                "service_contains",
                "only hits from a service whose name contains this text, ignoring case",
            ),
        ],
        columns: &[
            col("time", "d.time_ns", Time),
            col("source", "d.source", Text),
            col("session_id", "d.session_id", Text),
            col("trace_id", "d.trace_id", Text),
            col("span_id", "d.span_id", Text),
            col("run_id", "d.run_id", Text),
            col("service", "d.service", Text),
            col("hits", "1", Int),
            col("snippet", "''", Text),
        ],
        plan: Plan::Search,
        post: None,
    },
];

/// The health verdict: stale when silent longer than `stale_after_secs`, erroring when
/// over 5% of its spans (or any of its logs) are errors, else ok.
fn health_verdict(row: &mut serde_json::Map<String, serde_json::Value>, args: &super::args::Args, now_ns: i64) {
    let last_ns = row.remove("_last_ns").and_then(|v| v.as_i64()).unwrap_or(0);
    let stale_ns = args.integer("stale_after_secs").saturating_mul(1_000_000_000);
    let count = |name: &str| row.get(name).and_then(serde_json::Value::as_i64).unwrap_or(0);
    let verdict = if now_ns.saturating_sub(last_ns) > stale_ns {
        "stale"
    } else if count("errors") * 20 > count("spans") || count("log_errors") > 0 {
        "erroring"
    } else {
        "ok"
    };
    row.insert("status".to_owned(), verdict.into());
}

/// A shape by name.
pub fn shape(name: &str) -> Option<&'static Shape> {
    SHAPES.iter().find(|s| s.name == name)
}

/// The names of every shape.
pub fn names() -> Vec<&'static str> {
    SHAPES.iter().map(|s| s.name).collect()
}

/// The columns a shape's rows show (internal ones start with `_`).
pub fn visible(shape: &Shape) -> impl Iterator<Item = &Col> {
    shape.columns.iter().filter(|c| !c.name.starts_with('_'))
}

/// docs/query.md's q/1 section, generated from the registry.
pub fn markdown() -> String {
    let mut out = String::from("| shape | arguments | row fields |\n| --- | --- | --- |\n");
    for shape in SHAPES {
        let args: Vec<String> = shape
            .args
            .iter()
            .map(|a| {
                let mut text = format!("`{}` {}", a.name, a.ty.name());
                if a.required {
                    text.push_str(", required");
                }
                if let Some(group) = a.one_of {
                    let others: Vec<&str> = shape
                        .args
                        .iter()
                        .filter(|o| o.one_of == Some(group) && o.name != a.name)
                        .map(|o| o.name)
                        .collect();
                    text.push_str(&format!(", required unless `{}` is given", others.join("`, `")));
                }
                if !a.choices.is_empty() {
                    text.push_str(&format!(", one of `{}`", a.choices.join("`, `")));
                }
                if let (Some(default), Some((min, max))) = (a.default, a.range) {
                    text.push_str(&format!(" (default {default}, clamped to {min}..{max})"));
                }
                text
            })
            .collect();
        let columns: Vec<String> = visible(shape).map(|c| format!("`{}`", c.name)).collect();
        out.push_str(&format!("| `{}` | {} | {} |\n", shape.name, args.join("; "), columns.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- q/1 shapes: generated from server/src/query/registry.rs -->\n";
    const END: &str = "<!-- end of q/1 shapes -->";

    /// docs/query.md's q/1 table is the registry's. `ROOST_UPDATE_DOCS=1 cargo test` rewrites it.
    #[test]
    fn the_query_docs_document_every_shape() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/query.md");
        let docs = std::fs::read_to_string(path).unwrap();
        let (start, end) =
            (docs.find(BEGIN).expect("docs/query.md has the q/1 markers") + BEGIN.len(), docs.find(END).unwrap());
        let expected = markdown();
        if std::env::var_os("ROOST_UPDATE_DOCS").is_some() {
            std::fs::write(path, format!("{}{expected}{}", &docs[..start], &docs[end..])).unwrap();
            return;
        }
        assert_eq!(
            &docs[start..end],
            expected,
            "docs/query.md's q/1 table drifted; run ROOST_UPDATE_DOCS=1 cargo test -p roost-server --lib registry"
        );
    }

    #[test]
    fn shapes_are_unique_and_every_list_shape_has_a_limit() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SHAPES.len());
        for shape in SHAPES {
            if matches!(shape.plan, Plan::Span) {
                // One row at most.
                assert!(shape.args.iter().all(|a| a.name != "limit"), "{}", shape.name);
                continue;
            }
            let limit = shape.args.iter().find(|a| a.name == "limit").expect(shape.name);
            assert!(limit.range.is_some() && limit.default.is_some(), "{}", shape.name);
        }
    }

    #[test]
    fn every_order_choice_is_an_order() {
        for shape in SHAPES {
            let Plan::Table { orders, .. } = shape.plan else { continue };
            let Some(order) = shape.args.iter().find(|a| a.name == "order") else {
                assert!(orders.is_empty(), "{}", shape.name);
                continue;
            };
            // The first choice is the default order; the others are `orders`, in order.
            let names: Vec<&str> = orders.iter().map(|o| o.0).collect();
            assert_eq!(order.choices[1..], names[..], "{}", shape.name);
        }
    }

    #[test]
    fn every_table_shape_pages_with_an_offset() {
        for shape in SHAPES.iter().filter(|s| matches!(s.plan, Plan::Table { .. })) {
            let offset = shape.args.iter().find(|a| a.name == "offset").expect(shape.name);
            assert_eq!((offset.default, offset.range), (Some(0), Some((0, 10_000))), "{}", shape.name);
        }
    }

    #[test]
    fn the_span_shape_has_every_spans_column_and_more() {
        let names = |name: &str| shape(name).unwrap().columns.iter().map(|c| c.name).collect::<Vec<_>>();
        let (spans, span) = (names("spans"), names("span"));
        assert_eq!(&span[..spans.len()], &spans[..]);
        assert_eq!(&span[spans.len()..], ["scope", "resource", "events"]);
        let args: Vec<_> = shape("span").unwrap().args.iter().filter(|a| a.required).map(|a| a.name).collect();
        assert_eq!(args, ["trace_id", "span_id"]);
    }
}
