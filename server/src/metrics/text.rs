//! The two text expositions. The registry encodes OpenMetrics 1.0, which Prometheus asks
//! for first; anything else (curl, older scrapers, the Prometheus text format 0.0.4) gets
//! the same samples with the three differences of the older format undone: a counter's
//! `HELP`/`TYPE` name carries its `_total` suffix, there are no `# UNIT` lines, and there
//! is no `# EOF`.

/// OpenMetrics' media type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The Prometheus text format's media type.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `openmetrics` as the Prometheus text format 0.0.4.
pub fn to_prometheus(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's HELP comes before its TYPE, which says whether the name needs `_total`.
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.rsplit_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                // OpenMetrics' info and stateset have no 0.0.4 type: they are gauges there.
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" => (name.to_owned(), "gauge"),
                "unknown" => (name.to_owned(), "untyped"),
                other => (name.to_owned(), other),
            };
            if let Some(help) = help.take() {
                let text = help.strip_prefix(rest.rsplit_once(' ').map_or(rest, |(n, _)| n)).unwrap_or(help);
                out.push_str(&format!("# HELP {name}{text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_their_suffix_and_units_and_eof_go() {
        let openmetrics = "# HELP roost_turns Turns finished.\n# TYPE roost_turns counter\n\
                           roost_turns_total{status=\"completed\"} 3\n\
                           # HELP roost_turn_duration_seconds How long.\n# TYPE roost_turn_duration_seconds histogram\n\
                           # UNIT roost_turn_duration_seconds seconds\n\
                           roost_turn_duration_seconds_sum 1.5\nroost_turn_duration_seconds_count 3\n\
                           roost_turn_duration_seconds_bucket{le=\"+Inf\"} 3\n# EOF\n";
        assert_eq!(
            to_prometheus(openmetrics),
            "# HELP roost_turns_total Turns finished.\n# TYPE roost_turns_total counter\n\
             roost_turns_total{status=\"completed\"} 3\n\
             # HELP roost_turn_duration_seconds How long.\n# TYPE roost_turn_duration_seconds histogram\n\
             roost_turn_duration_seconds_sum 1.5\nroost_turn_duration_seconds_count 3\n\
             roost_turn_duration_seconds_bucket{le=\"+Inf\"} 3\n"
        );
    }
}
