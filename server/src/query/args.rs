//! Typed, clamped shape arguments: what a shape declares, and checking what a client sent
//! against it.

use std::collections::HashMap;

use roost_proto::ApiError;
use serde_json::{Map, Value as Json};

/// The type of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// A JSON string.
    String,
    /// A whole JSON number.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// An RFC 3339 string, or Unix milliseconds as a number.
    Time,
}

impl ArgType {
    /// Its name in the registry listing and the docs.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Time => "time",
        }
    }
}

/// A check a string argument must pass: its error says what is wrong.
pub type Check = fn(&str) -> Result<(), String>;

/// One declared argument of a shape.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    /// Its name in `args`.
    pub name: &'static str,
    /// Its type.
    pub ty: ArgType,
    /// What it does (for the docs and `?`).
    pub description: &'static str,
    /// Its default (integers).
    pub default: Option<i64>,
    /// The range integers are clamped to.
    pub range: Option<(i64, i64)>,
    /// Whether the shape needs it.
    pub required: bool,
    /// The shape needs this or another argument of the same group (`one_of`).
    pub one_of: Option<&'static str>,
    /// The values a string argument may take (any when empty).
    pub choices: &'static [&'static str],
    /// A check a string argument must pass; its error says what is wrong.
    pub check: Option<Check>,
}

impl ArgSpec {
    /// An optional string filter.
    pub const fn string(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            ty: ArgType::String,
            description,
            default: None,
            range: None,
            required: false,
            one_of: None,
            choices: &[],
            check: None,
        }
    }

    /// An optional string that must pass `check`.
    pub const fn checked(name: &'static str, description: &'static str, check: Check) -> Self {
        Self { check: Some(check), ..Self::string(name, description) }
    }

    /// An optional string that must be one of `choices`.
    pub const fn choice(name: &'static str, description: &'static str, choices: &'static [&'static str]) -> Self {
        Self { choices, ..Self::string(name, description) }
    }

    /// A string the shape cannot run without.
    pub const fn required_string(name: &'static str, description: &'static str) -> Self {
        Self { required: true, ..Self::string(name, description) }
    }

    /// A string the shape needs unless another argument of `group` is given.
    pub const fn one_of(group: &'static str, name: &'static str, description: &'static str) -> Self {
        Self { one_of: Some(group), ..Self::string(name, description) }
    }

    /// An integer with a default, clamped to `[min, max]`.
    pub const fn integer(name: &'static str, description: &'static str, default: i64, min: i64, max: i64) -> Self {
        Self {
            name,
            ty: ArgType::Integer,
            description,
            default: Some(default),
            range: Some((min, max)),
            required: false,
            one_of: None,
            choices: &[],
            check: None,
        }
    }

    /// An optional boolean (false when absent).
    pub const fn boolean(name: &'static str, description: &'static str) -> Self {
        Self { ty: ArgType::Boolean, ..Self::string(name, description) }
    }

    /// An optional time bound.
    pub const fn time(name: &'static str, description: &'static str) -> Self {
        Self { ty: ArgType::Time, ..Self::string(name, description) }
    }
}

/// A checked argument value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// A string.
    String(String),
    /// An integer (already clamped).
    Integer(i64),
    /// A boolean.
    Boolean(bool),
    /// A time, in Unix nanoseconds.
    Time(i64),
}

/// The checked arguments of one query.
#[derive(Debug, Clone, Default)]
pub struct Args {
    values: HashMap<&'static str, ArgValue>,
}

/// Longest string argument accepted.
const MAX_STRING: usize = 512;

impl Args {
    /// Checks `given` against `specs`: unknown names, wrong types and missing required
    /// arguments are 400s naming the problem; integers are clamped; defaults filled in.
    pub fn check(shape: &str, specs: &[ArgSpec], given: &Map<String, Json>) -> Result<Self, ApiError> {
        let mut values = HashMap::new();
        for (name, value) in given {
            let Some(spec) = specs.iter().find(|s| s.name == name) else {
                let allowed: Vec<&str> = specs.iter().map(|s| s.name).collect();
                return Err(ApiError::invalid_argument(format!(
                    "unknown argument {name:?} for shape {shape:?}; it takes {}",
                    if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
                )));
            };
            if value.is_null() {
                continue;
            }
            values.insert(spec.name, typed(spec, value)?);
        }
        for spec in specs {
            if values.contains_key(spec.name) {
                continue;
            }
            if spec.required {
                return Err(ApiError::invalid_argument(format!("shape {shape:?} needs the argument {:?}", spec.name)));
            }
            if let Some(default) = spec.default {
                values.insert(spec.name, ArgValue::Integer(default));
            }
        }
        for group in specs.iter().filter_map(|s| s.one_of) {
            let members: Vec<&str> = specs.iter().filter(|s| s.one_of == Some(group)).map(|s| s.name).collect();
            if !members.iter().any(|m| values.contains_key(m)) {
                return Err(ApiError::invalid_argument(format!(
                    "shape {shape:?} needs one of the arguments {}",
                    members.iter().map(|m| format!("{m:?}")).collect::<Vec<_>>().join(" or ")
                )));
            }
        }
        Ok(Self { values })
    }

    /// A string argument, if given.
    pub fn string(&self, name: &str) -> Option<&str> {
        match self.values.get(name) {
            Some(ArgValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// An integer argument (its default when not given).
    pub fn integer(&self, name: &str) -> i64 {
        match self.values.get(name) {
            Some(ArgValue::Integer(i)) => *i,
            _ => 0,
        }
    }

    /// A boolean argument (false when not given).
    pub fn boolean(&self, name: &str) -> bool {
        matches!(self.values.get(name), Some(ArgValue::Boolean(true)))
    }

    /// A time argument in Unix nanoseconds, if given.
    pub fn time(&self, name: &str) -> Option<i64> {
        match self.values.get(name) {
            Some(ArgValue::Time(ns)) => Some(*ns),
            _ => None,
        }
    }
}

fn typed(spec: &ArgSpec, value: &Json) -> Result<ArgValue, ApiError> {
    let wrong =
        || ApiError::invalid_argument(format!("argument {:?} must be a {}, not {value}", spec.name, describe(spec.ty)));
    match spec.ty {
        ArgType::String => {
            let s = value.as_str().ok_or_else(wrong)?;
            if s.len() > MAX_STRING {
                return Err(ApiError::invalid_argument(format!("argument {:?} is over {MAX_STRING} bytes", spec.name)));
            }
            if !spec.choices.is_empty() && !spec.choices.contains(&s) {
                return Err(ApiError::invalid_argument(format!(
                    "argument {:?} must be one of {}, not {s:?}",
                    spec.name,
                    spec.choices.join(", ")
                )));
            }
            if let Some(check) = spec.check {
                check(s).map_err(|e| ApiError::invalid_argument(format!("argument {:?}: {e}", spec.name)))?;
            }
            Ok(ArgValue::String(s.to_owned()))
        }
        ArgType::Integer => {
            let n = whole(value).ok_or_else(wrong)?;
            let (min, max) = spec.range.unwrap_or((i64::MIN, i64::MAX));
            Ok(ArgValue::Integer(n.clamp(min, max)))
        }
        ArgType::Boolean => value.as_bool().map(ArgValue::Boolean).ok_or_else(wrong),
        ArgType::Time => {
            if let Some(ms) = whole(value) {
                return Ok(ArgValue::Time(ms.saturating_mul(1_000_000)));
            }
            let text = value.as_str().ok_or_else(wrong)?;
            let ts: prost_types::Timestamp = text.parse().map_err(|_| wrong())?;
            Ok(ArgValue::Time(ts.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(ts.nanos))))
        }
    }
}

/// A JSON number that is a whole number (`3` or `3.0`, as protobuf's Struct sends it).
fn whole(value: &Json) -> Option<i64> {
    value.as_i64().or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64))
}

fn describe(ty: ArgType) -> &'static str {
    match ty {
        ArgType::String => "string",
        ArgType::Integer => "whole number",
        ArgType::Boolean => "boolean",
        ArgType::Time => "time (RFC 3339 string or Unix milliseconds)",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SPECS: &[ArgSpec] = &[
        ArgSpec::integer("limit", "rows", 50, 1, 500),
        ArgSpec::string("session_id", "a session"),
        ArgSpec::time("since", "from"),
        ArgSpec::boolean("errors_only", "errors"),
    ];

    fn check(args: Json) -> Result<Args, ApiError> {
        Args::check("s", SPECS, args.as_object().unwrap())
    }

    #[test]
    fn defaults_clamps_and_types() {
        assert_eq!(check(json!({})).unwrap().integer("limit"), 50);
        assert_eq!(check(json!({"limit": 100000})).unwrap().integer("limit"), 500);
        assert_eq!(check(json!({"limit": -3})).unwrap().integer("limit"), 1);
        assert_eq!(check(json!({"limit": 7.0})).unwrap().integer("limit"), 7);
        assert_eq!(check(json!({"since": 1500})).unwrap().time("since"), Some(1_500_000_000));
        assert_eq!(check(json!({"since": "1970-01-01T00:00:02Z"})).unwrap().time("since"), Some(2_000_000_000));
        assert!(check(json!({"errors_only": true})).unwrap().boolean("errors_only"));
        assert_eq!(check(json!({"session_id": null})).unwrap().string("session_id"), None);
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = check(json!({"colour": "red"})).unwrap_err();
        assert!(err.message().contains("\"colour\"") && err.message().contains("limit, session_id"), "{err}");
        for bad in [
            json!({"limit": "ten"}),
            json!({"limit": 1.5}),
            json!({"session_id": 3}),
            json!({"since": "soon"}),
            json!({"errors_only": "yes"}),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
        let order = [ArgSpec::choice("order", "sort", &["start", "cost"])];
        let given = json!({"order": "price"});
        let err = Args::check("t", &order, given.as_object().unwrap()).unwrap_err();
        assert!(err.message().contains("\"order\" must be one of start, cost"), "{err}");
        let given = json!({"order": "cost"});
        assert_eq!(Args::check("t", &order, given.as_object().unwrap()).unwrap().string("order"), Some("cost"));
        let required = [ArgSpec::required_string("session_id", "the session")];
        assert!(Args::check("t", &required, &Map::new()).unwrap_err().message().contains("needs the argument"));
    }
}
