//! The price book: what a model's tokens cost, so that each metered call is charged exactly
//! what its tokens cost, to the nanocent (balances and the ledger are kept in nanocents:
//! [`super::money`]), so many small calls cost exactly what their tokens add up to.
//!
//! Prices are USD per million tokens, as providers publish them, and are kept as integer
//! nanocents (10⁻⁹ cent) per token: $0.075/Mtok is exactly 7,500 nanocents per token.

use std::{collections::BTreeMap, path::Path};

use serde::Deserialize;

/// Nanocents (the unit costs are computed in) in a cent.
pub const NANOCENTS_PER_CENT: i64 = 1_000_000_000;

/// The built-in price book, used unless `--price-book` names another.
const BUILTIN: &str = include_str!("price_book.toml");

/// What a model's tokens cost, in nanocents per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelPrice {
    /// Per prompt token.
    pub input: i64,
    /// Per completion token.
    pub output: i64,
    /// Per prompt token read from the provider's prompt cache.
    pub cache_read: i64,
    /// Per prompt token written to the provider's prompt cache.
    pub cache_write: i64,
}

impl ModelPrice {
    /// True when using the model costs something.
    pub fn is_paid(self) -> bool {
        self.input > 0 || self.output > 0
    }

    /// What a call's tokens cost, in nanocents. `input` counts every prompt token, the
    /// cached ones included (the GenAI convention); `cache_read` and `cache_write` say how
    /// many of them the cache served or stored, which are priced at their own rates.
    pub fn cost(self, input: i64, output: i64, cache_read: i64, cache_write: i64) -> i64 {
        let (cache_read, cache_write) = (cache_read.max(0), cache_write.max(0));
        let uncached = input.max(0).saturating_sub(cache_read).saturating_sub(cache_write).max(0);
        uncached
            .saturating_mul(self.input)
            .saturating_add(cache_read.saturating_mul(self.cache_read))
            .saturating_add(cache_write.saturating_mul(self.cache_write))
            .saturating_add(output.max(0).saturating_mul(self.output))
    }
}

/// Model prices by name.
#[derive(Debug, Clone)]
pub struct PriceBook {
    models: BTreeMap<String, ModelPrice>,
    /// An operator's price for every model the book does not list (the built-in book has
    /// none: a metered call on an unlisted model is refused).
    default: Option<ModelPrice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    default: Option<PriceEntry>,
    #[serde(default)]
    models: BTreeMap<String, PriceEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceEntry {
    input_usd_per_mtok: f64,
    output_usd_per_mtok: f64,
    /// Prompt-cache reads; the input price when not listed.
    cache_read_usd_per_mtok: Option<f64>,
    /// Prompt-cache writes; the input price when not listed.
    cache_write_usd_per_mtok: Option<f64>,
}

impl PriceEntry {
    fn to_price(&self, name: &str) -> Result<ModelPrice, String> {
        let convert = |usd: f64| {
            if !(0.0..1e6).contains(&usd) {
                return Err(format!("{name}: prices must be between 0 and 1,000,000 USD per Mtok"));
            }
            // 1 USD per million tokens = 100 cents / 1e6 tokens = 1e5 nanocents per token.
            Ok((usd * 1e5).round() as i64)
        };
        let input = convert(self.input_usd_per_mtok)?;
        Ok(ModelPrice {
            input,
            output: convert(self.output_usd_per_mtok)?,
            cache_read: self.cache_read_usd_per_mtok.map_or(Ok(input), convert)?,
            cache_write: self.cache_write_usd_per_mtok.map_or(Ok(input), convert)?,
        })
    }
}

impl PriceBook {
    /// The price book compiled into roost.
    pub fn builtin() -> Self {
        // The built-in file is tested below; it cannot fail at run time.
        Self::from_toml(BUILTIN).unwrap_or_else(|_| Self { models: BTreeMap::new(), default: None })
    }

    /// Reads a price book file (TOML: `[models."name"]` entries, each with
    /// `input_usd_per_mtok` and `output_usd_per_mtok`, and optionally a `[default]` one
    /// that prices every model not listed).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a price book.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: PriceFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let models = file
            .models
            .iter()
            .map(|(name, entry)| Ok((name.clone(), entry.to_price(name)?)))
            .collect::<Result<_, String>>()?;
        let default = file.default.map(|entry| entry.to_price("default")).transpose()?;
        Ok(Self { models, default })
    }

    /// The price of `model`: its own entry, else the longest listed name it starts with
    /// (so dated variants such as `gpt-4o-mini-2024-07-18` find their family
    /// `gpt-4o-mini`), else `None`. A router's or cloud's prefix is skipped: `openai/gpt-4o`
    /// and Bedrock's `us.anthropic.claude-sonnet-4-…` are priced as `gpt-4o` and
    /// `claude-sonnet-4`.
    pub fn lookup(&self, model: &str) -> Option<ModelPrice> {
        let bare = model.rsplit('/').next().unwrap_or(model);
        let bare = bare.split_once("anthropic.").map_or(bare, |(_, rest)| rest);
        [model, bare].into_iter().find_map(|name| self.lookup_name(name))
    }

    fn lookup_name(&self, model: &str) -> Option<ModelPrice> {
        if let Some(price) = self.models.get(model) {
            return Some(*price);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| *p)
    }

    /// The models the book lists by name (a managed agent may call each).
    pub fn model_names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The price a metered call of `model` is charged at: its entry ([`PriceBook::lookup`]),
    /// else the book's `[default]`, else `None`: the model is unpriced, and a metered call
    /// on it is refused.
    pub fn metered_price(&self, model: &str) -> Option<ModelPrice> {
        self.lookup(model).or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_book_parses_and_prices_models() {
        let book = PriceBook::from_toml(BUILTIN).unwrap();
        assert_eq!(
            book.metered_price("gpt-4o-mini"),
            Some(ModelPrice { input: 15_000, output: 60_000, cache_read: 7_500, cache_write: 15_000 })
        );
        assert_eq!(book.metered_price("gpt-4o-mini-2024-07-18"), book.metered_price("gpt-4o-mini"), "dated variants");
        assert_eq!(book.metered_price("openai/gpt-4o"), book.metered_price("gpt-4o"), "a router's prefix");
        // Names of roost's own runtimes, or names that start with them, price nothing: a
        // managed call on them is refused rather than free.
        for unpriced in ["some-new-model", "echo", "example", "echo-gpt-4o", "example-4o"] {
            assert_eq!(book.metered_price(unpriced), None, "{unpriced}");
        }
        assert_eq!(book.metered_price("example/gpt-4o"), book.metered_price("gpt-4o"));
    }

    #[test]
    fn an_operator_default_prices_every_model() {
        let book = PriceBook::from_toml("[default]\ninput_usd_per_mtok = 1\noutput_usd_per_mtok = 4\n").unwrap();
        assert_eq!(book.metered_price("anything").map(|p| p.output), Some(400_000));
        assert_eq!(book.lookup("anything"), None, "telemetry is priced by listed models only");
    }

    #[test]
    fn cheap_calls_are_priced_below_a_cent_exactly() {
        let book = PriceBook::from_toml("[default]\ninput_usd_per_mtok = 0.075\noutput_usd_per_mtok = 0.3\n").unwrap();
        // 1000 input + 1000 output tokens: 7.5e6 + 3e7 nanocents = 0.0375 cents.
        let cost = book.metered_price("m").unwrap().cost(1000, 1000, 0, 0);
        assert_eq!(cost, 37_500_000);
        assert_eq!(80 * cost, 3 * NANOCENTS_PER_CENT, "80 × 0.0375 = 3 cents");
    }

    #[test]
    fn bad_price_books_are_refused() {
        assert!(PriceBook::from_toml("[default]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 0\n").is_err());
        assert!(PriceBook::from_toml("[models.x]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 1\n").is_err());
        assert!(
            PriceBook::from_toml("[default]\ninput_usd_per_mtok = 1\noutput_usd_per_mtok = 1\nextra = 2\n").is_err()
        );
    }
}
