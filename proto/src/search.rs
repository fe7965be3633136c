//! The words full-text search matches, one rule for everything that reads or writes them:
//! the server's index (both backends), the q/1 `search` shape and its snippets, and the
//! pages that highlight them.
//!
//! A word is a run of Unicode letters and digits, lowercased, with diacritics removed
//! (`São` → `sao`): how SQLite's FTS5 `unicode61 remove_diacritics 2` tokenizer reads
//! text, and what roost gives PostgreSQL instead of its own parser (which keeps
//! `example.com` or `gpt-4o` whole). A search's words must all be in a document, matched
//! whole; the last also matches as a prefix once it has [`PREFIX_CHARS`] characters, so
//! results follow what someone is typing (`Lisb` finds Lisbon) without a one-letter
//! prefix matching half the store.

use unicode_normalization::{UnicodeNormalization as _, char::is_combining_mark};

use crate::ApiError;

/// Longest word (in characters) the index keeps on PostgreSQL (whose limit is 2,047
/// bytes) and a search takes.
pub const MAX_WORD: usize = 100;
/// Characters the last word needs before it also matches as a prefix.
pub const PREFIX_CHARS: usize = 3;
/// Most words a search takes.
pub const MAX_WORDS: usize = 16;
/// Most characters of a snippet.
pub const SNIPPET_CHARS: usize = 160;
/// Characters of context a snippet keeps before its first match.
const LEAD_CHARS: usize = 50;

/// The words of `text`, folded.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(fold)
}

/// A word lowercased, without diacritics.
pub fn fold(word: &str) -> String {
    if word.is_ascii() {
        return word.to_ascii_lowercase();
    }
    word.nfd().filter(|c| !is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

/// What a search looks for: its words, folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    words: Vec<String>,
    prefix: bool,
}

impl Terms {
    /// The words of `text`, each once; a 400 when it has none, too many or one too long.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut found: Vec<String> = Vec::new();
        for word in words(text) {
            if word.chars().count() > MAX_WORD {
                return Err(ApiError::invalid_argument(format!(
                    "search words are at most {MAX_WORD} characters; longer ones are not indexed"
                )));
            }
            if !found.contains(&word) {
                found.push(word);
            }
        }
        if found.is_empty() {
            return Err(ApiError::invalid_argument("the search text has no words: give letters or digits to find"));
        }
        if found.len() > MAX_WORDS {
            return Err(ApiError::invalid_argument(format!("a search takes at most {MAX_WORDS} words")));
        }
        let prefix = found.last().is_some_and(|w| w.chars().count() >= PREFIX_CHARS);
        Ok(Self { words: found, prefix })
    }

    /// The words (letters and digits only, folded), in the order given.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Whether the last word matches as a prefix too.
    pub fn prefix(&self) -> bool {
        self.prefix
    }

    /// The same words, all matched whole: what a search looks up first, since a prefix
    /// is costly to look up for a common word and whole words usually find enough.
    pub fn whole_words(&self) -> Self {
        Self { words: self.words.clone(), prefix: false }
    }

    /// Whether a folded word of a document is one this search matches.
    pub fn matches(&self, folded: &str) -> bool {
        let last = self.words.len() - 1;
        self.words.iter().enumerate().any(|(i, w)| folded == w || (i == last && self.prefix && folded.starts_with(w)))
    }
}

/// The byte ranges of the words of `text`.
fn word_ranges(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = None;
    text.char_indices().chain(std::iter::once((text.len(), ' '))).filter_map(move |(at, c)| {
        match (c.is_alphanumeric(), start) {
            (true, None) => {
                start = Some(at);
                None
            }
            (false, Some(from)) => {
                start = None;
                Some((from, at))
            }
            _ => None,
        }
    })
}

/// Up to [`SNIPPET_CHARS`] characters of `text` on one line, starting a little before
/// its first word `terms` match (the start of the text when none does), with `…` where
/// it was cut.
pub fn snippet(text: &str, terms: &Terms) -> String {
    let first = word_ranges(text).find(|&(from, to)| terms.matches(&fold(&text[from..to]))).map_or(0, |(from, _)| from);
    // Back up LEAD_CHARS characters, then forward to a word's start.
    let mut start = text[..first].char_indices().rev().nth(LEAD_CHARS.saturating_sub(1)).map_or(0, |(at, _)| at);
    if start > 0 {
        start = text[start..first].find(char::is_whitespace).map_or(start, |space| start + space + 1).min(first);
    }
    let window: String = text[start..].chars().take(SNIPPET_CHARS).collect();
    let cut_end = start + window.len() < text.len();
    let mut out = window.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        out.insert(0, '…');
    }
    if cut_end {
        out.push('…');
    }
    out
}

/// `snippet` in pieces, each marked when it is a word `terms` match: what a page
/// highlights.
pub fn highlight(snippet: &str, terms: &Terms) -> Vec<(String, bool)> {
    let mut pieces = Vec::new();
    let mut at = 0;
    for (from, to) in word_ranges(snippet) {
        if terms.matches(&fold(&snippet[from..to])) {
            if from > at {
                pieces.push((snippet[at..from].to_owned(), false));
            }
            pieces.push((snippet[from..to].to_owned(), true));
            at = to;
        }
    }
    if at < snippet.len() {
        pieces.push((snippet[at..].to_owned(), false));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_diacritics_and_split_on_anything_else() {
        let found: Vec<String> = words("Trip to São Paulo & LISBON: gpt-4o-mini, {\"city\":\"Zürich\"}").collect();
        assert_eq!(found, ["trip", "to", "sao", "paulo", "lisbon", "gpt", "4o", "mini", "city", "zurich"]);
    }

    #[test]
    fn terms_are_folded_words_and_the_last_is_a_prefix_once_long_enough() {
        let terms = Terms::parse("Trip  to LISB").unwrap();
        assert_eq!((terms.words(), terms.prefix()), (&["trip".to_owned(), "to".into(), "lisb".into()][..], true));
        assert!(terms.matches("lisbon") && terms.matches("to") && !terms.matches("tomato"));
        let short = Terms::parse("São pa").unwrap();
        assert_eq!((short.words(), short.prefix()), (&["sao".to_owned(), "pa".into()][..], false));
        for bad in ["", "  ", "!!! ???", &"x".repeat(MAX_WORD + 1)] {
            assert!(Terms::parse(bad).is_err(), "{bad:?}");
        }
        let many = (0..=MAX_WORDS).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        assert!(Terms::parse(&many).is_err());
    }

    #[test]
    fn snippets_start_near_the_first_match_and_mark_it() {
        let terms = Terms::parse("lisbon").unwrap();
        let text = format!("{} Plan a trip\nto Lisbon in May, please. {}", "word ".repeat(40), "tail ".repeat(60));
        let cut = snippet(&text, &terms);
        assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut}");
        assert!(cut.contains("Plan a trip to Lisbon in May"), "{cut}");
        assert!(cut.chars().count() <= SNIPPET_CHARS + 2, "{cut}");
        let pieces = highlight(&cut, &terms);
        assert_eq!(
            pieces.iter().filter(|(_, marked)| *marked).map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["Lisbon"]
        );
        assert_eq!(pieces.iter().map(|(p, _)| p.as_str()).collect::<String>(), cut);
        assert_eq!(snippet("short text", &terms), "short text", "no match: the start");
    }
}
