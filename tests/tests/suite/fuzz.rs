//! Property tests of the whole API surface: whatever a client sends, roost answers it
//! without a server fault. Every route of the route table (`roost_gateway::sections`, the
//! table the router serves and `/skill.md` documents) and every method of the gRPC
//! descriptor gets generated path ids, query strings, bodies (shaped like its message,
//! with wrongly typed values, NUL characters, odd Unicode, or plain garbage), content
//! types and encodings. A REST answer must be below 500 and, when it is an error, the JSON
//! error body; a gRPC answer must not be INTERNAL, UNKNOWN, UNAVAILABLE or DATA_LOSS.

use std::sync::Arc;

use proptest::{
    prelude::*,
    test_runner::{Config, TestCaseError, TestRunner},
};
use prost::Message as _;
use prost_types::{DescriptorProto, FileDescriptorSet, field_descriptor_proto::Type};
use roost_gateway::api::{Body, Verb};
use roost_proto::describe::{JsonType, contract};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Map, Value, json};

each_backend!(rest_routes_never_answer_a_server_fault, grpc_methods_never_answer_a_server_fault);

/// Generated requests per test and backend: enough to reach every route many times while
/// keeping the suite quick.
const CASES: u32 = 600;

/// A route as the fuzzer drives it.
#[derive(Debug, Clone)]
struct Route {
    verb: Verb,
    path: &'static str,
    params: Vec<&'static str>,
    body: Body,
}

/// Every route but the one that restarts the server under the test.
fn routes() -> Vec<Route> {
    roost_gateway::sections()
        .iter()
        .flat_map(|section| section.endpoints.iter())
        .filter(|e| e.path != "/api/control/restart")
        .map(|e| Route { verb: e.verb, path: e.path, params: e.params.iter().map(|p| p.0).collect(), body: e.body })
        .collect()
}

/// Text a hostile client sends: plain words, any Unicode (NUL included), escapes that do
/// not decode, huge or negative numbers as text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,12}",
        any::<String>(),
        Just("a\u{0}b".to_owned()),
        Just("\u{0}".to_owned()),
        Just("%ff%fe".to_owned()),
        Just("-99999999999999999999".to_owned()),
        Just("1e309".to_owned()),
        "[ -~]{0,40}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!(u64::MAX)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value of roughly the type of a field, or of another one.
fn field_value(ty: &JsonType) -> BoxedStrategy<Value> {
    let right = match ty {
        JsonType::String | JsonType::Timestamp => text().prop_map(Value::from).boxed(),
        JsonType::Integer => {
            prop_oneof![any::<i64>().prop_map(Value::from), (-5i64..600).prop_map(Value::from)].boxed()
        }
        JsonType::Number => any::<f64>().prop_map(|f| json!(f)).boxed(),
        JsonType::Boolean => any::<bool>().prop_map(Value::from).boxed(),
        JsonType::Enum(name) => {
            let names: Vec<String> = contract()
                .enumeration(name)
                .map(|e| e.values.iter().map(|v| v.0.clone()).collect())
                .unwrap_or_default();
            if names.is_empty() {
                text().prop_map(Value::from).boxed()
            } else {
                prop_oneof![prop::sample::select(names).prop_map(Value::from), text().prop_map(Value::from)].boxed()
            }
        }
        _ => json_value().boxed(),
    };
    prop_oneof![4 => right, 1 => json_value()].boxed()
}

/// A JSON body shaped like `message`: some of its fields (by their JSON names), maybe an
/// unknown one.
fn message_body(message: &str) -> BoxedStrategy<Value> {
    let fields: Vec<(String, JsonType)> = contract()
        .message(message)
        .map(|m| m.fields.iter().map(|f| (f.name.clone(), f.json_type.clone())).collect())
        .unwrap_or_default();
    let chosen: Vec<BoxedStrategy<Option<(String, Value)>>> = fields
        .into_iter()
        .map(|(name, ty)| prop::option::of(field_value(&ty).prop_map(move |v| (name.clone(), v))).boxed())
        .collect();
    (chosen, prop::option::weighted(0.1, (text(), json_value())))
        .prop_map(|(fields, extra)| {
            let mut object: Map<String, Value> = fields.into_iter().flatten().collect();
            if let Some((name, value)) = extra {
                object.insert(name, value);
            }
            Value::Object(object)
        })
        .boxed()
}

/// One generated REST request.
#[derive(Debug, Clone)]
struct RestCase {
    route: usize,
    ids: Vec<String>,
    query: Vec<(String, String)>,
    body: Vec<u8>,
    content_type: Option<&'static str>,
    encoding: Option<&'static str>,
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn rest_case(routes: Arc<Vec<Route>>, known_ids: Vec<String>) -> impl Strategy<Value = RestCase> {
    (0..routes.len()).prop_flat_map(move |route| {
        let spec = routes[route].clone();
        let id = prop_oneof![
            2 => prop::sample::select(known_ids.clone()),
            3 => text().prop_map(|t| percent_encode(&t)),
            1 => Just("%ff%fe".to_owned()),
        ];
        let param_names = spec.params.clone();
        let query = prop::collection::vec(
            (prop::sample::select(if param_names.is_empty() { vec!["limit"] } else { param_names }), text()),
            0..3,
        )
        .prop_map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_owned(), percent_encode(&v))).collect::<Vec<_>>());
        let body = match spec.body {
            Body::Json(message) => prop_oneof![
                6 => message_body(message).prop_map(|v| v.to_string().into_bytes()),
                1 => json_value().prop_map(|v| v.to_string().into_bytes()),
                1 => prop::collection::vec(any::<u8>(), 0..64),
            ]
            .boxed(),
            _ => prop_oneof![
                json_value().prop_map(|v| v.to_string().into_bytes()),
                prop::collection::vec(any::<u8>(), 0..64),
            ]
            .boxed(),
        };
        let content_type = prop_oneof![
            6 => Just(Some("application/json")),
            1 => Just(None),
            1 => Just(Some("application/x-protobuf")),
            1 => Just(Some("text/plain")),
        ];
        let encoding = prop_oneof![8 => Just(None), 1 => Just(Some("br")), 1 => Just(Some("gzip"))];
        (prop::collection::vec(id, 2), query, body, content_type, encoding).prop_map(
            move |(ids, query, body, content_type, encoding)| RestCase {
                route,
                ids,
                query,
                body,
                content_type,
                encoding,
            },
        )
    })
}

/// The URL of a case: path parameters filled with its ids, then its query string.
fn url(server: &TestServer, route: &Route, case: &RestCase) -> String {
    let mut path = String::new();
    let mut ids = case.ids.iter().cycle();
    let mut rest = route.path;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        path.push_str(&rest[..open]);
        path.push_str(ids.next().map_or("x", String::as_str));
        rest = &rest[close..];
    }
    path.push_str(rest);
    if !case.query.is_empty() {
        let query: Vec<String> = case.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        path = format!("{path}?{}", query.join("&"));
    }
    server.url(&path)
}

async fn send(server: &TestServer, key: &str, route: &Route, case: &RestCase) -> Result<(), TestCaseError> {
    let url = url(server, route, case);
    let method = match route.verb {
        Verb::Get => reqwest::Method::GET,
        Verb::Post => reqwest::Method::POST,
        Verb::Delete => reqwest::Method::DELETE,
    };
    let mut request = server.http.request(method.clone(), &url).bearer_auth(key);
    if method != reqwest::Method::GET {
        request = request.body(case.body.clone());
    }
    if let Some(content_type) = case.content_type {
        request = request.header("content-type", content_type);
    }
    if let Some(encoding) = case.encoding {
        request = request.header("content-encoding", encoding);
    }
    if route.path == "/mcp" {
        request = request.header("accept", "application/json, text/event-stream");
    }
    let response = request.send().await.map_err(|e| TestCaseError::fail(format!("{method} {url}: {e}")))?;
    let status = response.status();
    let streams = response
        .headers()
        .get("content-type")
        .is_some_and(|ct| ct.to_str().unwrap_or_default().starts_with("text/event-stream"));
    if status.is_success() && streams {
        return Ok(()); // a stream opened; dropping the response hangs up
    }
    let protobuf = response
        .headers()
        .get("content-type")
        .is_some_and(|ct| ct.to_str().unwrap_or_default().starts_with("application/x-protobuf"));
    let body = response.bytes().await.unwrap_or_default();
    prop_assert!(status.as_u16() < 500, "{method} {url} answered {status}: {}", String::from_utf8_lossy(&body));
    // Errors to protobuf requests (OTLP, node push) are a protobuf google.rpc.Status.
    if status.is_client_error() && !protobuf {
        let error: Value = serde_json::from_slice(&body).unwrap_or_default();
        prop_assert!(
            error["code"].is_string() && error["error"].is_string(),
            "{method} {url} answered {status} without the JSON error body: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}

/// A server with something to hit: an account with a running echo agent, a cron, a run and
/// an alert rule, whose ids the cases mix in.
async fn target(backend: Backend) -> (TestServer, String, Vec<String>) {
    let server = TestServer::start(backend).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let agent = api.provision("echo", "fuzzed").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;
    let cron = api.post("/api/crons", json!({"instance_id": agent, "schedule": "@yearly", "message": "hi"})).await.ok();
    let run = api.post("/api/v1/runs", json!({"runtime": "fuzz"})).await.ok();
    let rule = api.post("/api/alerts", json!({"kind": "cost_per_day", "threshold": 1.0})).await.ok();
    let ids = vec![
        agent,
        cron["id"].as_str().unwrap().to_owned(),
        run["run_id"].as_str().unwrap().to_owned(),
        rule["id"].as_str().unwrap().to_owned(),
    ];
    (server, account.key, ids)
}

/// Runs `cases` of `strategy` through `check` on a blocking thread (proptest's runner is
/// synchronous), each case on the test's runtime.
async fn run_property<S, F, Fut>(strategy: S, check: F)
where
    S: Strategy + Send + 'static,
    S::Value: Send,
    F: Fn(S::Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), TestCaseError>>,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let config = Config { cases: CASES, failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new(config);
        if let Err(failure) = runner.run(&strategy, |case| handle.block_on(check(case))) {
            panic!("{failure}");
        }
    })
    .await
    .expect("property");
}

async fn rest_routes_never_answer_a_server_fault(backend: Backend) {
    let (server, key, ids) = target(backend).await;
    let routes = Arc::new(routes());
    assert!(routes.len() > 40, "{} routes", routes.len());
    let server = Arc::new(server);
    let strategy = rest_case(routes.clone(), ids);
    run_property(strategy, move |case| {
        let (server, key, routes) = (server.clone(), key.clone(), routes.clone());
        async move { send(&server, &key, &routes[case.route], &case).await }
    })
    .await;
}

/// The messages and methods of the served gRPC services, from the descriptor set.
struct Grpc {
    messages: std::collections::HashMap<String, DescriptorProto>,
    /// Path and request message type of every method.
    methods: Vec<(String, String)>,
}

fn grpc() -> Grpc {
    let set = FileDescriptorSet::decode(roost_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut messages = std::collections::HashMap::new();
    let mut methods = Vec::new();
    for file in &set.file {
        for message in &file.message_type {
            messages.insert(format!(".{}.{}", file.package(), message.name()), message.clone());
        }
        if file.package() == "roost.v1" {
            for service in &file.service {
                // Restart would restart the server under the test.
                for method in service.method.iter().filter(|m| m.name() != "Restart") {
                    methods.push((
                        format!("/roost.v1.{}/{}", service.name(), method.name()),
                        method.input_type().to_owned(),
                    ));
                }
            }
        }
    }
    Grpc { messages, methods }
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Protobuf bytes of a random value of message `name`, field by field (`seed` drives the
/// choices), nested messages to a small depth.
fn encode_random(
    grpc: &Grpc,
    name: &str,
    seed: &mut impl Iterator<Item = u64>,
    texts: &[String],
    depth: u32,
) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(message) = grpc.messages.get(name) else { return out };
    for field in &message.field {
        let pick = seed.next().unwrap_or(0);
        if pick.is_multiple_of(3) {
            continue;
        }
        let number = u64::from(field.number() as u32);
        match field.r#type() {
            Type::String | Type::Bytes => {
                let text = texts[(pick as usize / 3) % texts.len()].as_bytes();
                varint(number << 3 | 2, &mut out);
                varint(text.len() as u64, &mut out);
                out.extend_from_slice(text);
            }
            Type::Message if depth < 3 => {
                let inner = encode_random(grpc, field.type_name(), seed, texts, depth + 1);
                varint(number << 3 | 2, &mut out);
                varint(inner.len() as u64, &mut out);
                out.extend_from_slice(&inner);
            }
            Type::Double | Type::Fixed64 | Type::Sfixed64 => {
                varint(number << 3 | 1, &mut out);
                out.extend_from_slice(&seed.next().unwrap_or(0).to_le_bytes());
            }
            Type::Float | Type::Fixed32 | Type::Sfixed32 => {
                varint(number << 3 | 5, &mut out);
                out.extend_from_slice(&(seed.next().unwrap_or(0) as u32).to_le_bytes());
            }
            Type::Message => {}
            _ => {
                varint(number << 3, &mut out);
                varint(seed.next().unwrap_or(0) >> (pick % 64), &mut out);
            }
        }
    }
    out
}

async fn grpc_methods_never_answer_a_server_fault(backend: Backend) {
    let (server, key, ids) = target(backend).await;
    let grpc = Arc::new(grpc());
    assert!(grpc.methods.len() > 40);
    let http2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let server = Arc::new(server);
    let strategy = (
        0..grpc.methods.len(),
        prop::collection::vec(any::<u64>(), 64),
        prop::collection::vec(prop_oneof![3 => text(), 1 => prop::sample::select(ids)], 1..4),
        prop::option::weighted(0.2, prop::collection::vec(any::<u8>(), 0..48)),
    );
    run_property(strategy, move |(method, seed, texts, garbage)| {
        let (server, key, grpc, http2) = (server.clone(), key.clone(), grpc.clone(), http2.clone());
        async move {
            let (path, input) = &grpc.methods[method];
            let payload =
                garbage.unwrap_or_else(|| encode_random(&grpc, input, &mut seed.into_iter().cycle(), &texts, 0));
            let mut frame = vec![0u8];
            frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            frame.extend_from_slice(&payload);
            let response = http2
                .post(server.url(path))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .bearer_auth(&key)
                .body(frame)
                .send()
                .await
                .map_err(|e| TestCaseError::fail(format!("{path}: {e}")))?;
            // Errors are trailers-only answers: their status is in the headers.
            let status = response.headers().get("grpc-status").and_then(|s| s.to_str().ok()).unwrap_or("0").to_owned();
            let message =
                response.headers().get("grpc-message").and_then(|s| s.to_str().ok()).unwrap_or_default().to_owned();
            prop_assert!(!matches!(status.as_str(), "2" | "13" | "14" | "15"), "{path} answered {status} {message}");
            Ok(())
        }
    })
    .await;
}
