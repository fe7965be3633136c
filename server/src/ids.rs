//! Random identifiers and secrets: a readable prefix, then lower-case base32.

/// Lower-case RFC 4648 base32 alphabet: no padding, no confusable case.
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A new id such as `ins_k3j9…`: `prefix`, `_`, then 16 base32 characters (80 random bits,
/// enough that ids never collide in practice and cannot be guessed).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_base32(16))
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
}
