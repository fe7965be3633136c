//! What a judge is asked and how its answer is read: the prompt template, the answer
//! parsers, and which calls an evaluator samples.

use sha2::{Digest as _, Sha256};

/// The placeholders a prompt may use.
pub const PLACEHOLDERS: [&str; 3] = ["{{input}}", "{{output}}", "{{metadata}}"];

/// Most bytes of a call's input or output put in a prompt; more is cut (a judge's context
/// is bounded, and so is its cost).
pub const MAX_PART_BYTES: usize = 32 * 1024;

/// `template` with the call's input, output and metadata filled in.
pub fn render(template: &str, input: &str, output: &str, metadata: &str) -> String {
    template
        .replace("{{input}}", cut(input, MAX_PART_BYTES))
        .replace("{{output}}", cut(output, MAX_PART_BYTES))
        .replace("{{metadata}}", cut(metadata, MAX_PART_BYTES))
}

fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How a judge's answer becomes a score.
#[derive(Debug, Clone, PartialEq)]
pub enum Parser {
    /// The first number in the answer (after `score:` when it says so), within the range.
    Number {
        /// Least accepted.
        min: f64,
        /// Greatest accepted.
        max: f64,
    },
    /// The first of these categories the answer names (ignoring case), as a whole word.
    Category(Vec<String>),
}

/// A judge's grade.
#[derive(Debug, Clone, PartialEq)]
pub enum Grade {
    /// A number.
    Number(f64),
    /// A category, as configured.
    Category(String),
}

impl Parser {
    /// The grade in `answer`, or why there is none.
    pub fn read(&self, answer: &str) -> Result<Grade, String> {
        match self {
            Self::Number { min, max } => {
                let lower = answer.to_ascii_lowercase();
                // "score: 0.8" is read from after the label; otherwise the first number.
                let from = lower.find("score").map_or(0, |at| at + "score".len());
                let number = first_number(&answer[from..])
                    .or_else(|| first_number(answer))
                    .ok_or_else(|| format!("the judge's answer has no number: {:?}", cut(answer, 200)))?;
                if number < *min || number > *max {
                    return Err(format!("the judge answered {number}, outside {min}..{max}"));
                }
                Ok(Grade::Number(number))
            }
            Self::Category(categories) => {
                let words: Vec<String> = answer
                    .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase)
                    .collect();
                // Multi-word categories are looked for in the answer as a whole.
                let lower = answer.to_lowercase();
                categories
                    .iter()
                    .map(|c| (c, lower.find(&c.to_lowercase())))
                    .filter(|(c, at)| at.is_some() && (c.contains(' ') || words.contains(&c.to_lowercase())))
                    .min_by_key(|(_, at)| *at)
                    .map(|(c, _)| Grade::Category(c.clone()))
                    .ok_or_else(|| {
                        format!("the judge's answer names none of {}: {:?}", categories.join(", "), cut(answer, 200))
                    })
            }
        }
    }
}

/// The first decimal number in `text` (`-0.5`, `3`, `.75`).
fn first_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            || (bytes[i] == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
            || (bytes[i] == b'-' && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit() || *b == b'.'));
        if starts {
            let mut end = i + 1;
            let mut dot = bytes[i] == b'.';
            while end < bytes.len() && (bytes[end].is_ascii_digit() || (bytes[end] == b'.' && !dot)) {
                dot |= bytes[end] == b'.';
                end += 1;
            }
            let number = text[i..end].trim_end_matches('.');
            if let Ok(value) = number.parse::<f64>() {
                return value.is_finite().then_some(value);
            }
        }
        i += 1;
    }
    None
}

/// Whether an evaluator sampling `rate` of calls judges this one: a hash of the evaluator
/// and the call, so the choice is the same on every replica and after a restart, and the
/// share judged is `rate` however calls arrive.
pub fn sampled(evaluator_id: &str, trace_id: &str, span_id: &str, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let mut hash = Sha256::new();
    for part in [evaluator_id, trace_id, span_id] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(first) as f64 / u64::MAX as f64) < rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_after_score_or_first() {
        let parser = Parser::Number { min: 0.0, max: 1.0 };
        assert_eq!(parser.read("score: 0.8"), Ok(Grade::Number(0.8)));
        assert_eq!(parser.read("Step 1 done. Score: .75 because"), Ok(Grade::Number(0.75)));
        assert_eq!(parser.read("1"), Ok(Grade::Number(1.0)));
        assert!(parser.read("score: 7").is_err(), "out of range");
        assert!(parser.read("excellent").is_err());
        let wide = Parser::Number { min: -5.0, max: 5.0 };
        assert_eq!(wide.read("-2.5 points"), Ok(Grade::Number(-2.5)));
    }

    #[test]
    fn categories_are_whole_words_first_named_first() {
        let parser = Parser::Category(vec!["correct".into(), "incorrect".into(), "off topic".into()]);
        assert_eq!(parser.read("This is INCORRECT."), Ok(Grade::Category("incorrect".into())));
        assert_eq!(parser.read("correct, not incorrect"), Ok(Grade::Category("correct".into())));
        assert_eq!(parser.read("it is off topic"), Ok(Grade::Category("off topic".into())));
        assert!(parser.read("no idea").is_err());
    }

    #[test]
    fn sampling_takes_about_the_rate() {
        let taken = (0..10_000).filter(|i| sampled("ev_1", &format!("{i:032x}"), "0000000000000001", 0.1)).count();
        assert!((900..1100).contains(&taken), "{taken}");
        assert!(sampled("ev_1", "a", "b", 1.0));
        assert!(!sampled("ev_1", "a", "b", 0.0));
    }

    #[test]
    fn prompts_are_filled_in() {
        assert_eq!(render("Q: {{input}} A: {{output}} ({{metadata}})", "hi", "yo", "{}"), "Q: hi A: yo ({})");
    }
}
