//! Generates roost's Rust types and tonic services from `roost/v1/*.proto`.
//!
//! A fresh clone needs only `cargo`: protoc comes from `protoc-bin-vendored`.
//!
//! The generated messages also derive serde, because the REST gateway's JSON bodies *are*
//! these messages: one definition, so REST and gRPC cannot drift. Proto3's own JSON mapping
//! does not fit a REST API (int64 as strings, enum values in SCREAMING_CASE), so this script
//! reads the descriptor set and attaches, field by field:
//! - enums: the lower-case value name without the enum's prefix (`HEALTH_STATUS_OK` → `"ok"`);
//! - `google.protobuf.Timestamp`: an RFC 3339 string;
//! - `google.protobuf.Struct` and `Value`: plain JSON;
//! - request messages (and the few other messages clients send inside them):
//!   `deny_unknown_fields`, so a misspelt field is a 400, not ignored.
//!
//! Missing fields take their proto3 defaults, as over gRPC; the core validates required
//! values once for both protocols.

use std::{
    env,
    error::Error,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use prost::Message as _;
use prost_types::{
    DescriptorProto, FileDescriptorSet,
    field_descriptor_proto::{Label, Type},
};

const PACKAGE: &str = "roost.v1";

// The JSON mapping exceptions, shared with `roost_proto::describe` so the docs and tool
// schemas name fields exactly as serde does.
include!("src/json/mapping.rs");

fn main() -> Result<(), Box<dyn Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let proto_dir = root.join("roost/v1");
    println!("cargo:rerun-if-changed={}", proto_dir.display());

    let mut protos: Vec<PathBuf> =
        fs::read_dir(&proto_dir)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
    protos.retain(|p| p.extension().is_some_and(|e| e == "proto"));
    protos.sort();
    for proto in &protos {
        println!("cargo:rerun-if-changed={}", proto.display());
    }

    let descriptor_path = out.join("roost_descriptor.bin");
    run_protoc(&root, &protos, &descriptor_path)?;
    let fds = FileDescriptorSet::decode(fs::read(&descriptor_path)?.as_slice())?;

    let mut config = tonic_prost_build::configure()
        .btree_map(".")
        .build_client(true)
        .build_server(true)
        .codec_path("crate::codec::RoostCodec");
    let mut enums = String::new();
    let mut inbound = String::new();
    for file in fds.file.iter().filter(|f| f.package() == PACKAGE) {
        for message in &file.message_type {
            write_inbound(&mut inbound, message);
            for attr in message_attributes(message) {
                config = config.message_attribute(format!(".{PACKAGE}.{}", message.name()), attr);
            }
            for (path, attr) in field_attributes(message)? {
                config = config.field_attribute(path, attr);
            }
        }
        for en in &file.enum_type {
            write_json_enum(&mut enums, en);
        }
    }
    fs::write(out.join("roost.v1.json_enums.rs"), enums)?;
    fs::write(out.join("roost.v1.inbound.rs"), inbound)?;
    config.compile_fds(fds)?;
    Ok(())
}

fn run_protoc(root: &Path, protos: &[PathBuf], out: &Path) -> Result<(), Box<dyn Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let well_known = protoc_bin_vendored::include_path()?;
    let status = Command::new(protoc)
        .arg("--include_imports")
        .arg("--include_source_info")
        .arg(format!("--proto_path={}", root.display()))
        .arg(format!("--proto_path={}", well_known.display()))
        .arg(format!("--descriptor_set_out={}", out.display()))
        .args(protos)
        .status()?;
    if !status.success() {
        return Err(format!("protoc failed: {status}").into());
    }
    Ok(())
}

/// Emits `impl Inbound` for one message: requests (`…Request`) come from clients, so the
/// gRPC codec holds them to the API boundary's rules; what roost sends is not checked.
fn write_inbound(out: &mut String, message: &DescriptorProto) {
    let from_clients = message.name().ends_with("Request");
    let _ = writeln!(
        out,
        "impl crate::codec::Inbound for {} {{ const FROM_CLIENTS: bool = {from_clients}; }}",
        message.name()
    );
}

fn message_attributes(message: &DescriptorProto) -> Vec<&'static str> {
    let mut attrs = vec!["#[derive(serde::Serialize, serde::Deserialize)]"];
    // Requests come from clients: refuse what we do not know. Responses are only written.
    // A few messages are parts of requests as well as of answers: a client sends them too.
    const REQUEST_PARTS: [&str; 6] =
        ["Score", "Evaluator", "EvaluatorFilter", "DatasetItem", "CallRef", "ExperimentCheck"];
    if message.name().ends_with("Request") || REQUEST_PARTS.contains(&message.name()) {
        attrs.push("#[serde(default, deny_unknown_fields)]");
    } else {
        attrs.push("#[serde(default)]");
    }
    attrs
}

fn field_attributes(message: &DescriptorProto) -> Result<Vec<(String, String)>, Box<dyn Error>> {
    let is_map_entry = |m: &DescriptorProto| m.options.as_ref().is_some_and(|o| o.map_entry());
    if message.nested_type.iter().any(|m| !is_map_entry(m)) || !message.enum_type.is_empty() {
        // Nested types would need their own module paths below; roost.v1 keeps types flat.
        return Err(format!("{}: roost.v1 keeps messages and enums top-level", message.name()).into());
    }
    if !message.oneof_decl.is_empty() && message.field.iter().any(|f| f.oneof_index.is_some() && !f.proto3_optional()) {
        return Err(format!("{}: oneofs have no JSON mapping here; use optional fields", message.name()).into());
    }
    let mut attrs = Vec::new();
    for field in &message.field {
        let path = format!(".{PACKAGE}.{}.{}", message.name(), field.name());
        let repeated = field.label() == Label::Repeated;
        let optional = field.proto3_optional();
        match (field.r#type(), field.type_name()) {
            (Type::Enum, type_name) => {
                let rust = type_name
                    .strip_prefix(&format!(".{PACKAGE}."))
                    .ok_or_else(|| format!("{path}: enums must come from {PACKAGE}"))?;
                let module = match (repeated, optional) {
                    (false, false) => "one",
                    (true, _) => "many",
                    (false, true) => "maybe",
                };
                attrs.push((
                    path,
                    format!(
                        "#[serde(serialize_with = \"crate::json::enums::{module}::serialize::<{rust}, _>\", \
                         deserialize_with = \"crate::json::enums::{module}::deserialize::<{rust}, _>\")]"
                    ),
                ));
            }
            (Type::Message, ".google.protobuf.Timestamp") if !repeated => {
                attrs.push((path, "#[serde(with = \"crate::json::timestamp\")]".to_owned()))
            }
            (Type::Message, ".google.protobuf.Struct") => {
                let module = if repeated { "objects" } else { "object" };
                attrs.push((path, format!("#[serde(with = \"crate::json::value::{module}\")]")));
            }
            (Type::Message, ".google.protobuf.Value") if !repeated => {
                attrs.push((path, "#[serde(with = \"crate::json::value::any\")]".to_owned()))
            }
            (Type::Message, name) if name.starts_with(".google.protobuf.") => {
                return Err(format!("{path}: {name} has no JSON mapping in build.rs yet").into());
            }
            _ => {}
        }
    }
    for (path, json) in JSON_RENAMES {
        if path.starts_with(&format!(".{PACKAGE}.{}.", message.name())) {
            attrs.push(((*path).to_owned(), format!("#[serde(rename = \"{json}\")]")));
        }
    }
    for path in JSON_BASE64 {
        if path.starts_with(&format!(".{PACKAGE}.{}.", message.name())) {
            attrs.push(((*path).to_owned(), "#[serde(with = \"crate::json::base64\")]".to_owned()));
        }
    }
    for path in JSON_LENIENT_STRINGS {
        if path.starts_with(&format!(".{PACKAGE}.{}.", message.name())) {
            attrs.push(((*path).to_owned(), "#[serde(with = \"crate::json::value::lenient_string\")]".to_owned()));
        }
    }
    for path in JSON_FLATTEN {
        if path.starts_with(&format!(".{PACKAGE}.{}.", message.name())) {
            attrs.push(((*path).to_owned(), "#[serde(flatten)]".to_owned()));
        }
    }
    Ok(attrs)
}

/// Emits `impl JsonEnum` for one enum: value number ↔ JSON name, without the prefix that
/// buf's ENUM_VALUE_PREFIX rule requires (`HEALTH_STATUS_OK` → `"ok"`).
fn write_json_enum(out: &mut String, en: &prost_types::EnumDescriptorProto) {
    let names: Vec<(i32, String)> =
        en.value.iter().map(|v| (v.number(), enum_value_json_name(en.name(), v.name()))).collect();
    let _ = writeln!(out, "impl crate::json::enums::JsonEnum for {} {{", en.name());
    let _ = writeln!(out, "    fn json_name(value: i32) -> Option<&'static str> {{\n        match value {{");
    for (number, name) in &names {
        let _ = writeln!(out, "            {number} => Some({name:?}),");
    }
    let _ = writeln!(out, "            _ => None,\n        }}\n    }}");
    let _ = writeln!(out, "    fn from_json_name(name: &str) -> Option<i32> {{\n        match name {{");
    // The zero value means "not set"; clients leave the field out instead of naming it.
    for (number, name) in names.iter().filter(|(n, _)| *n != 0) {
        let _ = writeln!(out, "            {name:?} => Some({number}),");
    }
    let _ = writeln!(out, "            _ => None,\n        }}\n    }}");
    let names: Vec<&str> = names.iter().filter(|(n, _)| *n != 0).map(|(_, s)| s.as_str()).collect();
    let _ = writeln!(out, "    const JSON_NAMES: &'static [&'static str] = &{names:?};\n}}");
}
