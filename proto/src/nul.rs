//! Finding U+0000 in a request, wherever it is.
//!
//! roost's rule for NUL characters (docs/architecture.md#errors): a request field that
//! holds one is refused at the API boundary with 400 `invalid_argument` naming the field,
//! because PostgreSQL's text cannot store it and no client means to send it. (Telemetry is
//! different: ingest replaces NUL and stores the rest, since exporters cannot fix what they
//! send.)
//!
//! One check serves every adapter: [`nul_field`] walks any `Serialize` value — every
//! `roost.v1` message derives it for the JSON mapping — without building anything, and
//! names the first string (or map key) holding a NUL by its JSON path, as the client wrote
//! it: `events[2].data.note`.

use std::fmt;

use serde::ser::{self, Serialize};

/// The JSON path of the first string or map key in `value` that contains U+0000, if any.
pub fn nul_field<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut finder = Finder { path: Vec::new() };
    match value.serialize(&mut finder) {
        Err(Stop::Found) => Some(render(&finder.path)),
        Ok(()) | Err(Stop::Other) => None,
    }
}

/// One step of a path.
enum Step {
    Field(&'static str),
    Index(usize),
    Key(String),
}

fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => push_name(&mut out, name),
            Step::Key(key) => push_name(&mut out, &key.replace('\0', "\\u0000")),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() { "(the body)".to_owned() } else { out }
}

fn push_name(out: &mut String, name: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(name);
}

struct Finder {
    path: Vec<Step>,
}

/// Why the walk stopped early: a NUL (the path is left in the finder), or a value that
/// would not serialize at all (nothing to report).
#[derive(Debug)]
enum Stop {
    Found,
    Other,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Found => "a NUL character",
            Self::Other => "not serializable",
        })
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Self::Other
    }
}

impl Finder {
    fn within<T: Serialize + ?Sized>(&mut self, step: Step, value: &T) -> Result<(), Stop> {
        self.path.push(step);
        value.serialize(&mut *self)?;
        self.path.pop();
        Ok(())
    }
}

fn check(text: &str) -> Result<(), Stop> {
    if text.contains('\0') { Err(Stop::Found) } else { Ok(()) }
}

impl<'a> ser::Serializer for &'a mut Finder {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Items<'a>;
    type SerializeTuple = Items<'a>;
    type SerializeTupleStruct = Items<'a>;
    type SerializeTupleVariant = Items<'a>;
    type SerializeMap = Entries<'a>;
    type SerializeStruct = &'a mut Finder;
    type SerializeStructVariant = &'a mut Finder;

    fn serialize_bool(self, _: bool) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_char(self, c: char) -> Result<(), Stop> {
        if c == '\0' { Err(Stop::Found) } else { Ok(()) }
    }
    fn serialize_str(self, text: &str) -> Result<(), Stop> {
        check(text)
    }
    /// Bytes are not text: a NUL in a `bytes` field is data.
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        self.within(Step::Field(variant), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Items<'a>, Stop> {
        Ok(Items { finder: self, next: 0 })
    }
    fn serialize_tuple(self, _: usize) -> Result<Items<'a>, Stop> {
        Ok(Items { finder: self, next: 0 })
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Items<'a>, Stop> {
        Ok(Items { finder: self, next: 0 })
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Items<'a>, Stop> {
        Ok(Items { finder: self, next: 0 })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Entries<'a>, Stop> {
        Ok(Entries { finder: self, key: None })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<&'a mut Finder, Stop> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<&'a mut Finder, Stop> {
        Ok(self)
    }
}

/// The elements of a sequence or tuple, each under its index.
struct Items<'a> {
    finder: &'a mut Finder,
    next: usize,
}

impl Items<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        let index = self.next;
        self.next += 1;
        self.finder.within(Step::Index(index), value)
    }
}

impl ser::SerializeSeq for Items<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.item(value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl ser::SerializeTuple for Items<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.item(value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Items<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.item(value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Items<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.item(value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Finder {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> Result<(), Stop> {
        self.within(Step::Field(name), value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Finder {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> Result<(), Stop> {
        self.within(Step::Field(name), value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// The entries of a map, each value under its key. A key holding a NUL is reported as
/// itself.
struct Entries<'a> {
    finder: &'a mut Finder,
    key: Option<String>,
}

impl ser::SerializeMap for Entries<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        let key = key.serialize(KeyText)?;
        if key.contains('\0') {
            self.finder.path.push(Step::Key(key));
            return Err(Stop::Found);
        }
        self.key = Some(key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        let key = self.key.take().unwrap_or_default();
        self.finder.within(Step::Key(key), value)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// A map key as text (keys of JSON objects and protobuf maps are strings or numbers).
struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Stop;
    type SerializeSeq = ser::Impossible<String, Stop>;
    type SerializeTuple = ser::Impossible<String, Stop>;
    type SerializeTupleStruct = ser::Impossible<String, Stop>;
    type SerializeTupleVariant = ser::Impossible<String, Stop>;
    type SerializeMap = ser::Impossible<String, Stop>;
    type SerializeStruct = ser::Impossible<String, Stop>;
    type SerializeStructVariant = ser::Impossible<String, Stop>;

    fn serialize_str(self, text: &str) -> Result<String, Stop> {
        Ok(text.to_owned())
    }
    fn serialize_char(self, c: char) -> Result<String, Stop> {
        Ok(c.to_string())
    }
    fn serialize_bool(self, v: bool) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_f64(self, v: f64) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Stop> {
        Ok(String::new())
    }
    fn serialize_none(self) -> Result<String, Stop> {
        Ok(String::new())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<String, Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<String, Stop> {
        Ok(String::new())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Stop> {
        Ok(String::new())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<String, Stop> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<String, Stop> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Stop> {
        Err(Stop::Other)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Stop> {
        Err(Stop::Other)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Stop> {
        Err(Stop::Other)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Stop> {
        Err(Stop::Other)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Stop> {
        Err(Stop::Other)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Stop> {
        Err(Stop::Other)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Stop> {
        Err(Stop::Other)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Stop> {
        Err(Stop::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{AddRunEventsRequest, ConfigureRequest};

    #[test]
    fn names_the_field_as_json_does() {
        let req = ConfigureRequest { provider_api_key: Some("sk\0x".into()), ..Default::default() };
        assert_eq!(nul_field(&req).as_deref(), Some("PROVIDER_API_KEY"));
        assert_eq!(nul_field(&ConfigureRequest { agent_brief: Some("fine".into()), ..Default::default() }), None);
    }

    #[test]
    fn finds_nul_in_lists_and_free_json() {
        let req: AddRunEventsRequest = serde_json::from_value(serde_json::json!({
            "run_id": "run_1",
            "events": [{}, {"data": {"note": "a\u{0}b"}}],
        }))
        .expect("request");
        let found = nul_field(&req);
        assert!(found.as_deref().is_some_and(|f| f.starts_with("events[1].data")), "{found:?}");
        let value = serde_json::json!({"a": [1, {"b\u{0}": true}]});
        assert_eq!(nul_field(&value).as_deref(), Some("a[1].b\\u0000"));
        assert_eq!(nul_field(&serde_json::json!({"ok": ["x", 1, null]})), None);
    }
}
