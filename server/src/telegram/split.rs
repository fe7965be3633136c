//! Replies longer than a Telegram message: cut into parts of at most [`PART_CHARS`]
//! characters (Telegram's limit is 4,096), at the last paragraph break that fits, else
//! the last line break, else the last space, else between characters.

/// Longest part sent, in characters: under Telegram's 4,096 with room to spare.
pub const PART_CHARS: usize = 4000;

/// `text` in parts of at most `max` characters, in order; their concatenation, give or take
/// the whitespace cut at, is `text`. Empty text is no parts.
pub fn split_reply(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if rest.chars().count() <= max {
            parts.push(rest.to_owned());
            break;
        }
        // Byte index just past the first `max` characters.
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let window = &rest[..limit];
        let cut = ["\n\n", "\n", " "].iter().find_map(|sep| window.rfind(sep).filter(|&i| i > 0)).unwrap_or(limit);
        parts.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_replies_are_one_part() {
        assert_eq!(split_reply("hello", 10), ["hello"]);
        assert!(split_reply("  ", 10).is_empty());
    }

    #[test]
    fn cuts_prefer_paragraphs_then_lines_then_words() {
        assert_eq!(split_reply("aaaa\n\nbbbb\ncc", 9), ["aaaa", "bbbb\ncc"]);
        assert_eq!(split_reply("aaaa\nbbbb cc", 9), ["aaaa", "bbbb cc"]);
        assert_eq!(split_reply("aaaa bbbb cc", 9), ["aaaa", "bbbb cc"]);
        assert_eq!(split_reply("abcdefghij", 4), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn a_5000_character_reply_arrives_in_two_parts_under_the_limit() {
        let paragraph = "word ".repeat(200);
        let text = [paragraph.trim(); 5].join("\n\n");
        assert!(text.chars().count() > 4096);
        let parts = split_reply(&text, PART_CHARS);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.chars().count() <= PART_CHARS));
        assert_eq!(parts.join("\n\n"), text);
    }

    #[test]
    fn multibyte_text_is_cut_between_characters() {
        let text = "é".repeat(10);
        let parts = split_reply(&text, 4);
        assert_eq!(parts, ["éééé", "éééé", "éé"]);
    }
}
