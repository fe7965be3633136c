//! Random identifiers and secrets: a readable prefix, then lower-case base32.

/// Lower-case RFC 4648 base32 alphabet: no padding, no confusable case.
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A new id such as `ins_k3j9…`: `prefix`, `_`, then 16 base32 characters (80 random bits,
/// enough that ids never collide in practice and cannot be guessed).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_base32(16))
}

/// A new id whose order is its creation order (to the millisecond): `prefix`, `_`, 9
/// characters of the Unix time in ms (45 bits: good until the year 3084), then 7 random
/// ones (35 bits; ids made in one millisecond differ there). For rows written at a high
/// rate (turns), whose unique indexes then grow at their end: a random id would put every
/// new row on another index page, and each dirty page costs a page of WAL at commit.
///
/// The time part uses the same characters as [`new_id`], in ASCII order, so ids sort as
/// text.
pub fn new_sortable_id(prefix: &str) -> String {
    const ORDERED: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";
    let ms = crate::time::now_ms().max(0) as u64;
    let time: String = (0..9).rev().map(|i| ORDERED[((ms >> (5 * i)) & 31) as usize] as char).collect();
    format!("{prefix}_{time}{}", random_base32(7))
}

/// `len` characters of base32 from the OS random source.
pub fn random_base32(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    // The OS random source failing is unrecoverable for a server that mints secrets.
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    bytes.iter().map(|b| ALPHABET[(b & 31) as usize] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_differ() {
        let a = new_id("ins");
        let b = new_id("ins");
        assert!(a.starts_with("ins_") && a.len() == 20, "{a}");
        assert_ne!(a, b);
        assert!(a[4..].bytes().all(|c| ALPHABET.contains(&c)));
    }

    #[test]
    fn sortable_ids_sort_by_creation() {
        let a = new_sortable_id("turn");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_sortable_id("turn");
        assert!(a.starts_with("turn_") && a.len() == 21, "{a}");
        assert!(a < b, "{a} then {b}");
        assert!(a[5..].bytes().all(|c| ALPHABET.contains(&c)));
    }
}
