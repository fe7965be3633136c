//! How numbers, money, durations and times read on a page. Templates get strings made
//! here, so every page formats the same way: thousands separated, costs in dollars with
//! cents (or more digits below a cent), times as `<time datetime>` in UTC that the page
//! script turns into the browser's zone.

use roost_proto::ApiError;

pub use roost_proto::numbers::{count, usd, usd_exact};

/// Tokens, shortened past ten thousand: `12.3k`, `4.56M`, `1.2B`.
pub fn tokens(n: i64) -> String {
    let abs = n.unsigned_abs() as f64;
    let sign = if n < 0 { "-" } else { "" };
    if abs < 10_000.0 {
        count(n)
    } else if abs < 1e6 {
        format!("{sign}{:.1}k", abs / 1e3)
    } else if abs < 1e9 {
        format!("{sign}{:.2}M", abs / 1e6)
    } else {
        format!("{sign}{:.2}B", abs / 1e9)
    }
}

/// A q/1 row's cost: `None` when it has none (null: its model has no price).
pub fn cost(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> Option<f64> {
    row.get(key).and_then(serde_json::Value::as_f64)
}

/// Whether a call reports tokens but no cost: its model has no price.
pub fn unpriced(cost: Option<f64>, tokens: i64) -> bool {
    cost.is_none() && tokens > 0
}

/// One call's cost: `usd`, or `unpriced` when it reports tokens but no cost (its model
/// has no price: `$0` would read as free); empty when there is neither.
pub fn call_cost(cost: Option<f64>, tokens: i64) -> String {
    match (cost, tokens > 0) {
        (Some(c), _) if c != 0.0 => usd(c),
        (None, true) => "unpriced".into(),
        (Some(_), true) => usd(0.0),
        _ => String::new(),
    }
}

/// A total that leaves out the cost of `unpriced` calls: `$0.0013`, `$0.0013 (partial)`,
/// or `unpriced` when no call in it has a price.
pub fn total_cost(cost: f64, unpriced: i64) -> String {
    match (unpriced > 0, cost != 0.0) {
        (false, _) => usd(cost),
        (true, true) => format!("{} (partial)", usd(cost)),
        (true, false) => "unpriced".into(),
    }
}

/// Integer cents as dollars, always with cents: `$12.00`, `-$0.35`.
pub fn cents(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let abs = n.unsigned_abs();
    format!("{sign}${}.{:02}", count((abs / 100) as i64), abs % 100)
}

/// A rate per second: `0`, `3.2/s`, `1,204/s`.
pub fn rate(per_sec: f64) -> String {
    if per_sec <= 0.0 || !per_sec.is_finite() {
        "0/s".into()
    } else if per_sec < 100.0 {
        format!("{per_sec:.1}/s")
    } else {
        format!("{}/s", count(per_sec.round() as i64))
    }
}

/// Milliseconds as a person reads them: `840 µs`, `12.4 ms`, `3.20 s`, `4m 05s`.
pub fn duration_ms(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        "–".into()
    } else if ms < 1.0 {
        format!("{:.0} µs", ms * 1000.0)
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 60_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        let secs = (ms / 1000.0).round() as i64;
        if secs < 3600 {
            format!("{}m {:02}s", secs / 60, secs % 60)
        } else {
            format!("{}h {:02}m", secs / 3600, secs % 3600 / 60)
        }
    }
}

/// Bytes: `512 B`, `3.4 MB`.
pub fn bytes(n: i64) -> String {
    let abs = n.max(0) as f64;
    match abs {
        a if a < 1024.0 => format!("{n} B"),
        a if a < 1024.0 * 1024.0 => format!("{:.1} KB", a / 1024.0),
        a if a < 1024.0 * 1024.0 * 1024.0 => format!("{:.1} MB", a / 1024.0 / 1024.0),
        a => format!("{:.2} GB", a / 1024.0 / 1024.0 / 1024.0),
    }
}

/// A moment, for a `<time>` element: the RFC 3339 value and a UTC text that reads without
/// the page script (`2026-11-24 09:14:03 UTC`).
#[derive(Debug, Clone, Default)]
pub struct When {
    /// The RFC 3339 value (`datetime` attribute; the script localises from it).
    pub iso: String,
    /// The text shown with JavaScript off.
    pub text: String,
}

impl When {
    /// From an RFC 3339 string as q/1 rows carry it (empty for none).
    pub fn iso(value: &str) -> Self {
        if value.is_empty() {
            return Self::default();
        }
        let text = value.get(..19).map_or_else(|| value.to_owned(), |t| format!("{} UTC", t.replace('T', " ")));
        Self { iso: value.to_owned(), text }
    }

    /// From a protobuf timestamp (none or zero → empty).
    pub fn timestamp(ts: Option<&prost_types::Timestamp>) -> Self {
        match ts {
            Some(ts) if ts.seconds != 0 || ts.nanos != 0 => Self::iso(&rfc3339(ts.seconds, ts.nanos)),
            _ => Self::default(),
        }
    }

    /// Whether there is a time to show.
    pub fn is_set(&self) -> bool {
        !self.iso.is_empty()
    }
}

/// Unix seconds and nanoseconds as RFC 3339 in UTC, as the JSON API writes timestamps
/// (prost's `Timestamp` formatting: fractional digits only when there are some).
pub fn rfc3339(seconds: i64, nanos: i32) -> String {
    prost_types::Timestamp { seconds, nanos: nanos.clamp(0, 999_999_999) }.to_string()
}

/// Now as Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A section of a page whose core call failed: what to show instead of its content.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The error table's code.
    pub code: String,
    /// The message.
    pub message: String,
}

impl From<ApiError> for Failure {
    fn from(err: ApiError) -> Self {
        Self { code: err.reason().code().to_owned(), message: err.message().to_owned() }
    }
}

/// A q/1 row value as text (strings as they are, numbers and booleans printed, null empty).
pub fn text(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> String {
    match row.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A q/1 row value as an integer (0 when absent).
pub fn int(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> i64 {
    row.get(key).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))).unwrap_or(0)
}

/// A q/1 row value as a float (0 when absent).
pub fn float(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> f64 {
    row.get(key).and_then(serde_json::Value::as_f64).unwrap_or(0.0)
}

/// Inline Markdown as HTML, for the one-line descriptions the API reference and the
/// Skills page show: the text escaped, and each `` `code` `` span set as `<code>`
/// (descriptions are written for the skill file, in Markdown). An unpaired backtick
/// stays as it is. The result is safe to insert as HTML.
pub fn inline_markdown(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;");
    let parts: Vec<&str> = escaped.split('`').collect();
    let mut out = String::with_capacity(escaped.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        let closed = i + 1 < parts.len() || i % 2 == 0;
        match (i % 2 == 1, closed) {
            (true, true) => {
                out.push_str("<code>");
                out.push_str(part);
                out.push_str("</code>");
            }
            (true, false) => {
                out.push('`');
                out.push_str(part);
            }
            (false, _) => out.push_str(part),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(tokens(9_999), "9,999");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(4_560_000), "4.56M");
        assert_eq!(call_cost(None, 420), "unpriced");
        assert_eq!(call_cost(None, 0), "");
        assert_eq!(call_cost(Some(0.000045), 420), "$0.000045");
        assert_eq!(total_cost(0.0013, 0), "$0.0013");
        assert_eq!(total_cost(0.0013, 2), "$0.0013 (partial)");
        assert_eq!(total_cost(0.0, 2), "unpriced");
        assert_eq!(rate(0.0), "0/s");
        assert_eq!(rate(1204.4), "1,204/s");
        assert_eq!(duration_ms(0.5), "500 µs");
        assert_eq!(duration_ms(12.44), "12.4 ms");
        assert_eq!(duration_ms(3200.0), "3.20 s");
        assert_eq!(duration_ms(245_000.0), "4m 05s");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MB");
    }

    #[test]
    fn descriptions_set_their_code_spans() {
        assert_eq!(
            inline_markdown("call `get_agent` until `running`"),
            "call <code>get_agent</code> until <code>running</code>"
        );
        assert_eq!(inline_markdown("<b> & `x<y`"), "&lt;b&gt; &amp; <code>x&lt;y</code>");
        assert_eq!(inline_markdown("an odd ` tick"), "an odd ` tick");
    }

    #[test]
    fn times_are_utc_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_000_000, 123_000_000), "2026-11-18T11:06:40.123Z");
        let when = When::iso("2026-11-24T09:14:03.512Z");
        assert_eq!(when.text, "2026-11-24 09:14:03 UTC");
        assert!(!When::iso("").is_set());
    }
}
