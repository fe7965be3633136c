//! How counts and money read to people. The dashboard's pages and the server's own
//! messages (an alert's "$0.00012 spent today") both write numbers through here, so a
//! value and the sentence about it never round differently.

/// `1234567` → `1,234,567`.
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Dollars: `$1,234.56` from a cent up; below a cent, two significant digits
/// (`$0.0042`, `$0.000045`: a cheap call's cost is never `$0.0000`); zero is `$0`.
pub fn usd(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "$0".into();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let abs = value.abs();
    if abs < 0.01 {
        // Store costs are whole nanocents (1e-11 dollars): 11 decimals hold any of them.
        let decimals = ((-abs.log10()).ceil() as usize + 1).min(11);
        let text = format!("{abs:.decimals$}");
        return format!("{sign}${}", text.trim_end_matches('0'));
    }
    let cents = (abs * 100.0).round() as i64;
    format!("{sign}${}.{:02}", count(cents / 100), cents % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_dollars_read_well() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(-1000), "-1,000");
        assert_eq!(usd(0.0), "$0");
        assert_eq!(usd(0.00423), "$0.0042");
        assert_eq!(usd(0.000_045), "$0.000045");
        assert_eq!(usd(0.000_04), "$0.00004");
        assert_eq!(usd(0.000_117), "$0.00012");
        assert_eq!(usd(0.009), "$0.009");
        assert_eq!(usd(1e-11), "$0.00000000001");
        assert_eq!(usd(1234.567), "$1,234.57");
        assert_eq!(usd(-0.35), "-$0.35");
    }
}
