//! The contract described from its own descriptor set: every `roost.v1` message with its
//! fields' JSON names, JSON types and proto comments, every enum with its JSON value names.
//!
//! The skill file's API reference and the MCP tools' input schemas are built from this, so
//! what they document is what serde reads and writes: the same renames, flattened fields,
//! enum spellings and timestamp strings that `build.rs` attaches to the generated types.
//!
//! One convention makes schemas precise: a field whose comment says `Required.` (or
//! `Required, …`) is listed as required. The core checks those values itself; the schema
//! tells a client up front.

use std::{collections::BTreeMap, sync::LazyLock};

use prost::Message as _;
use prost_types::{
    DescriptorProto, FileDescriptorProto, FileDescriptorSet, SourceCodeInfo,
    field_descriptor_proto::{Label, Type},
};
use serde_json::{Map, Value, json};

use crate::json::mapping::{JSON_FLATTEN, JSON_RENAMES, enum_value_json_name};

const PACKAGE: &str = "roost.v1";

/// The JSON type of a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonType {
    /// A string.
    String,
    /// A whole number (every proto integer; 64-bit ones too, as plain JSON numbers).
    Integer,
    /// A float.
    Number,
    /// `true` or `false`.
    Boolean,
    /// One of a `roost.v1` enum's lower-case value names.
    Enum(String),
    /// A `roost.v1` message, as an object.
    Message(String),
    /// An RFC 3339 timestamp string.
    Timestamp,
    /// Any JSON object (`google.protobuf.Struct`).
    Object,
    /// Any JSON value (`google.protobuf.Value`).
    Any,
    /// An object whose values have the given type (a proto map).
    Map(Box<JsonType>),
}

impl JsonType {
    /// How the skill file names the type, such as `string`, `InstanceStatus` or `Turn`.
    pub fn label(&self) -> String {
        match self {
            Self::String => "string".into(),
            Self::Integer => "integer".into(),
            Self::Number => "number".into(),
            Self::Boolean => "boolean".into(),
            Self::Enum(name) | Self::Message(name) => name.clone(),
            Self::Timestamp => "timestamp".into(),
            Self::Object => "object".into(),
            Self::Any => "any".into(),
            Self::Map(value) => format!("map of {}", value.label()),
        }
    }
}

/// One field of a message, as JSON sees it.
#[derive(Debug, Clone)]
pub struct FieldDoc {
    /// The JSON key.
    pub name: String,
    /// Its type.
    pub json_type: JsonType,
    /// A JSON array of that type.
    pub repeated: bool,
    /// Its comment in the proto file.
    pub doc: String,
    /// The comment says `Required.`.
    pub required: bool,
    /// Inlined into the parent object instead of nested under `name`.
    pub flattened: bool,
    /// May be `null`: a message or timestamp field that is unset (serde writes `null`), or
    /// a proto3 `optional` scalar. serde reads `null` for these too.
    pub nullable: bool,
}

/// One message.
#[derive(Debug, Clone)]
pub struct MessageDoc {
    /// Its name without the package, such as `ProvisionRequest`.
    pub name: String,
    /// Its comment in the proto file.
    pub doc: String,
    /// Its fields, in proto order.
    pub fields: Vec<FieldDoc>,
}

/// One enum.
#[derive(Debug, Clone)]
pub struct EnumDoc {
    /// Its name without the package.
    pub name: String,
    /// Its comment.
    pub doc: String,
    /// JSON value names (the zero "unspecified" value left out) with their comments.
    pub values: Vec<(String, String)>,
}

/// The described `roost.v1` package.
#[derive(Debug, Default)]
pub struct Contract {
    messages: BTreeMap<String, MessageDoc>,
    enums: BTreeMap<String, EnumDoc>,
}

/// The contract of this build, read once from [`crate::FILE_DESCRIPTOR_SET`].
pub fn contract() -> &'static Contract {
    static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
        // The set is produced by protoc at build time; an undecodable one describes nothing
        // rather than taking the server down.
        let set = FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET).unwrap_or_default();
        Contract::from_set(&set)
    });
    &CONTRACT
}

impl Contract {
    fn from_set(set: &FileDescriptorSet) -> Self {
        let mut contract = Self::default();
        for file in set.file.iter().filter(|f| f.package() == PACKAGE) {
            contract.add_file(file);
        }
        contract
    }

    fn add_file(&mut self, file: &FileDescriptorProto) {
        let comments = Comments::of(file.source_code_info.as_ref());
        for (m, message) in file.message_type.iter().enumerate() {
            let path = [4, m as i32];
            let fields = message
                .field
                .iter()
                .enumerate()
                .map(|(f, field)| {
                    let full = format!(".{PACKAGE}.{}.{}", message.name(), field.name());
                    let doc = comments.get(&[4, m as i32, 2, f as i32]);
                    let name = JSON_RENAMES
                        .iter()
                        .find(|(path, _)| *path == full)
                        .map_or_else(|| field.name().to_owned(), |(_, json)| (*json).to_owned());
                    let map_entry = map_entry(message, field.type_name());
                    let is_map = map_entry.is_some();
                    let (json_type, repeated) = match map_entry {
                        Some(entry) => {
                            let value =
                                entry.field.get(1).map_or(JsonType::Any, |v| json_type(v.r#type(), v.type_name()));
                            (JsonType::Map(Box::new(value)), false)
                        }
                        None => (json_type(field.r#type(), field.type_name()), field.label() == Label::Repeated),
                    };
                    FieldDoc {
                        name,
                        json_type,
                        repeated,
                        required: says_required(&doc),
                        doc,
                        flattened: JSON_FLATTEN.contains(&full.as_str()),
                        nullable: !repeated
                            && !is_map
                            && (field.proto3_optional() || matches!(field.r#type(), Type::Message | Type::Group)),
                    }
                })
                .collect();
            let doc = comments.get(&path);
            self.messages
                .insert(message.name().to_owned(), MessageDoc { name: message.name().to_owned(), doc, fields });
        }
        for (e, en) in file.enum_type.iter().enumerate() {
            let values = en
                .value
                .iter()
                .enumerate()
                .filter(|(_, v)| v.number() != 0)
                .map(|(v, value)| {
                    (enum_value_json_name(en.name(), value.name()), comments.get(&[5, e as i32, 2, v as i32]))
                })
                .collect();
            let doc = comments.get(&[5, e as i32]);
            self.enums.insert(en.name().to_owned(), EnumDoc { name: en.name().to_owned(), doc, values });
        }
    }

    /// A message by name (without the package).
    pub fn message(&self, name: &str) -> Option<&MessageDoc> {
        self.messages.get(name)
    }

    /// An enum by name (without the package).
    pub fn enumeration(&self, name: &str) -> Option<&EnumDoc> {
        self.enums.get(name)
    }

    /// The JSON schema of a message as a request body: an object of its fields with their
    /// comments as descriptions, `Required.` fields required, unknown fields refused (as
    /// serde refuses them for every `…Request`). An unknown name gives an open object.
    pub fn input_schema(&self, message: &str) -> Map<String, Value> {
        let mut schema = self.object_schema(message, 0);
        if message.ends_with("Request") {
            schema.insert("additionalProperties".into(), Value::Bool(false));
        }
        schema
    }

    fn object_schema(&self, message: &str, depth: usize) -> Map<String, Value> {
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        let Some(doc) = self.messages.get(message) else { return schema };
        let mut properties = Map::new();
        let mut required = Vec::new();
        for field in &doc.fields {
            let mut property = self.type_schema(&field.json_type, depth);
            if field.repeated {
                property = json!({ "type": "array", "items": property });
            }
            if field.nullable {
                nullable(&mut property);
            }
            if let Value::Object(object) = &mut property
                && !field.doc.is_empty()
            {
                object.insert("description".into(), Value::String(field.doc.clone()));
            }
            if field.required {
                required.push(Value::String(field.name.clone()));
            }
            properties.insert(field.name.clone(), property);
        }
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema
    }

    fn type_schema(&self, json_type: &JsonType, depth: usize) -> Value {
        match json_type {
            JsonType::String => json!({ "type": "string" }),
            JsonType::Integer => json!({ "type": "integer" }),
            JsonType::Number => json!({ "type": "number" }),
            JsonType::Boolean => json!({ "type": "boolean" }),
            JsonType::Timestamp => json!({ "type": "string", "format": "date-time" }),
            JsonType::Object => json!({ "type": "object" }),
            JsonType::Any => json!({}),
            JsonType::Enum(name) => {
                let values: Vec<&str> = self
                    .enums
                    .get(name)
                    .map(|e| e.values.iter().map(|(v, _)| v.as_str()).collect())
                    .unwrap_or_default();
                json!({ "type": "string", "enum": values })
            }
            // Messages nest a few levels at most; the bound keeps a future recursive message
            // from recursing forever.
            JsonType::Message(name) if depth < 4 => Value::Object(self.object_schema(name, depth + 1)),
            JsonType::Message(_) => json!({ "type": "object" }),
            JsonType::Map(value) => json!({ "type": "object", "additionalProperties": self.type_schema(value, depth) }),
        }
    }
}

/// Lets `schema` also take `null`: its type gains "null" (and its enum, if any, the value);
/// a schema without a type (any value) already takes it.
fn nullable(schema: &mut Value) {
    let Value::Object(object) = schema else { return };
    if let Some(Value::String(ty)) = object.get("type") {
        let ty = ty.clone();
        object.insert("type".into(), json!([ty, "null"]));
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.push(Value::Null);
    }
}

/// The JSON type of a non-map field.
fn json_type(ty: Type, type_name: &str) -> JsonType {
    match ty {
        Type::String | Type::Bytes => JsonType::String,
        Type::Bool => JsonType::Boolean,
        Type::Double | Type::Float => JsonType::Number,
        Type::Enum => JsonType::Enum(short_name(type_name)),
        Type::Message | Type::Group => match type_name {
            ".google.protobuf.Timestamp" => JsonType::Timestamp,
            ".google.protobuf.Struct" => JsonType::Object,
            ".google.protobuf.Value" => JsonType::Any,
            name => JsonType::Message(short_name(name)),
        },
        _ => JsonType::Integer,
    }
}

/// A comment sentence that begins `Required.` or `Required,` (not "Required for …", which
/// is conditional).
fn says_required(doc: &str) -> bool {
    doc.contains("Required.") || doc.contains("Required,")
}

/// The map-entry type a field refers to, when the field is a proto map.
fn map_entry<'a>(message: &'a DescriptorProto, type_name: &str) -> Option<&'a DescriptorProto> {
    let entry = type_name.rsplit('.').next()?;
    message.nested_type.iter().find(|n| n.name() == entry && n.options.as_ref().is_some_and(|o| o.map_entry()))
}

fn short_name(type_name: &str) -> String {
    type_name.strip_prefix(&format!(".{PACKAGE}.")).unwrap_or(type_name).to_owned()
}

/// The leading comments of a file's declarations, by descriptor path.
struct Comments(BTreeMap<Vec<i32>, String>);

impl Comments {
    fn of(info: Option<&SourceCodeInfo>) -> Self {
        let locations = info.map(|i| i.location.as_slice()).unwrap_or_default();
        Self(
            locations
                .iter()
                .filter_map(|l| {
                    let text = l.leading_comments.as_deref()?;
                    let joined = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
                    Some((l.path.clone(), joined))
                })
                .collect(),
        )
    }

    fn get(&self, path: &[i32]) -> String {
        self.0.get(path).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_json_names_types_and_comments() {
        let configure = contract().message("ConfigureRequest").expect("ConfigureRequest is described");
        let names: Vec<&str> = configure.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "instance_id",
                "agent_brief",
                "PROVIDER_API_KEY",
                "MESSAGING_BOT_TOKEN",
                "model",
                "MESSAGING_ALLOWED_CHAT_IDS",
                "name",
            ]
        );
        assert!(configure.fields[0].required);
        assert!(!configure.fields[1].required);
        assert!(configure.doc.contains("Only fields present change"));

        let instance = contract().message("Instance").expect("Instance is described");
        let status = instance.fields.iter().find(|f| f.name == "status").expect("status");
        assert_eq!(status.json_type, JsonType::Enum("InstanceStatus".into()));
        let paid = instance.fields.iter().find(|f| f.name == "paid_through").expect("paid_through");
        assert_eq!(paid.json_type, JsonType::Timestamp);

        let provision = contract().message("ProvisionResponse").expect("ProvisionResponse");
        assert!(provision.fields.iter().any(|f| f.name == "instance" && f.flattened));
    }

    #[test]
    fn enums_use_their_json_spelling() {
        let status = contract().enumeration("InstanceStatus").expect("InstanceStatus");
        let names: Vec<&str> = status.values.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..2], ["provisioning", "running"]);
        assert!(!names.contains(&"unspecified"));
    }

    #[test]
    fn input_schemas_are_strict_objects() {
        let schema = contract().input_schema("ProvisionRequest");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["runtime", "brief"]));
        assert_eq!(schema["properties"]["model_mode"]["enum"], json!(["managed", "byok"]));
        assert!(schema["properties"]["brief"]["description"].as_str().is_some_and(|d| d.contains("memory")));
    }
}
