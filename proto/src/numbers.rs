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

/// Money kept in nanocents (10⁻⁹ cent) as exact dollars, for balances and charges: at
/// least the cents, then every digit that is not zero (`$12.50`, `$0.00023`,
/// `$1,000.0001`, `-$0.35`). Unlike [`usd`] it never rounds: a ledger shown this way
/// adds up to the balance shown.
pub fn usd_exact(nanocents: i64) -> String {
    const PER_DOLLAR: u64 = 100_000_000_000;
    let sign = if nanocents < 0 { "-" } else { "" };
    let abs = nanocents.unsigned_abs();
    let fraction = format!("{:011}", abs % PER_DOLLAR);
    let fraction = fraction.trim_end_matches('0');
    let whole = count(i64::try_from(abs / PER_DOLLAR).unwrap_or(i64::MAX));
    format!("{sign}${whole}.{fraction:0<2}")
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

    #[test]
    fn exact_dollars_show_the_digits_that_matter() {
        assert_eq!(usd_exact(23_000_000), "$0.00023");
        assert_eq!(usd_exact(1_250_000_000_000), "$12.50");
        assert_eq!(usd_exact(0), "$0.00");
        assert_eq!(usd_exact(-35_000_000_000), "-$0.35");
        assert_eq!(usd_exact(1), "$0.00000000001");
        assert_eq!(usd_exact(100_000_010_000_000), "$1,000.0001");
        assert_eq!(usd_exact(i64::MIN), "-$92,233,720.36854775808");
    }
}
