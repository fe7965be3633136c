//! LEB128 variable-length integers: the packed forms' numbers (message references,
//! packed attributes) take one byte below 128, two below 16,384.

/// Appends `value`.
pub fn put(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads one value off the front of `bytes`; `None` when it is cut short or too long.
pub fn take(bytes: &mut &[u8]) -> Option<u64> {
    let (mut value, mut shift) = (0u64, 0u32);
    loop {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        if shift > 63 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_cut_input_is_refused() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, value);
            let mut bytes = out.as_slice();
            assert_eq!(take(&mut bytes), Some(value));
            assert!(bytes.is_empty());
            let mut cut = &out[..out.len() - 1];
            assert_eq!(take(&mut cut), None, "{value} cut short");
        }
        assert_eq!(take(&mut [0xffu8; 11].as_slice()), None, "more than 64 bits");
    }
}
