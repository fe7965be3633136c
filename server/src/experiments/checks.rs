//! The checks an experiment gives every answer without a model: exact match and contains.

use roost_proto::v1::ExperimentCheck;
use serde::{Deserialize, Serialize};

/// Most checks an experiment has.
pub const MAX_CHECKS: usize = 16;

/// A check as stored (JSON in `experiments.checks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// "exact" or "contains".
    pub kind: String,
    /// What "contains" looks for ('' for the expected output).
    #[serde(default)]
    pub value: String,
    /// Compare ignoring case.
    #[serde(default)]
    pub ignore_case: bool,
}

impl Check {
    /// Its name in results and summaries ([`ExperimentCheck::result_name`]).
    pub fn name(&self) -> String {
        self.to_proto().result_name()
    }

    /// Whether `output` passes, given the item's `expected` output. An item with no
    /// expected output fails a check that compares with it.
    pub fn passes(&self, output: &str, expected: &str) -> bool {
        let fold = |s: &str| if self.ignore_case { s.to_lowercase() } else { s.to_owned() };
        match self.kind.as_str() {
            "exact" => !expected.is_empty() && fold(output.trim()) == fold(expected.trim()),
            _ => {
                let wanted = if self.value.is_empty() { expected } else { &self.value };
                !wanted.is_empty() && fold(output).contains(&fold(wanted))
            }
        }
    }

    /// As the API shows it.
    pub fn to_proto(&self) -> ExperimentCheck {
        ExperimentCheck { kind: self.kind.clone(), value: self.value.clone(), ignore_case: self.ignore_case }
    }
}

/// The checks as given, or why they are refused.
pub fn checked(given: &[ExperimentCheck]) -> Result<Vec<Check>, String> {
    if given.len() > MAX_CHECKS {
        return Err(format!("at most {MAX_CHECKS} checks"));
    }
    let mut checks: Vec<Check> = Vec::with_capacity(given.len());
    for check in given {
        match check.kind.as_str() {
            "exact" if !check.value.is_empty() => {
                return Err("an exact check compares with the expected output: it takes no value".to_owned());
            }
            "exact" | "contains" => {}
            other => return Err(format!("a check's kind is exact or contains, not {other:?}")),
        }
        if check.value.len() > 1024 {
            return Err("a check's value is at most 1024 bytes".to_owned());
        }
        let check = Check { kind: check.kind.clone(), value: check.value.clone(), ignore_case: check.ignore_case };
        if checks.iter().any(|c| c.name() == check.name()) {
            return Err(format!("the check {} is given twice", check.name()));
        }
        checks.push(check);
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kind: &str, value: &str, ignore_case: bool) -> Check {
        Check { kind: kind.into(), value: value.into(), ignore_case }
    }

    #[test]
    fn exact_match_trims_and_may_ignore_case() {
        assert!(check("exact", "", false).passes(" Paris\n", "Paris"));
        assert!(!check("exact", "", false).passes("paris", "Paris"));
        assert!(check("exact", "", true).passes("paris", "Paris"));
        assert!(!check("exact", "", false).passes("", ""), "nothing expected: nothing to match");
    }

    #[test]
    fn contains_looks_for_its_value_or_the_expected_output() {
        assert!(check("contains", "", false).passes("It is Paris.", "Paris"));
        assert!(check("contains", "refund", true).passes("We REFUND you", "whatever"));
        assert!(!check("contains", "refund", false).passes("We REFUND you", ""));
        assert_eq!(check("contains", "refund", true).name(), "contains:refund/i");
        assert_eq!(check("exact", "", false).name(), "exact_match");
    }

    #[test]
    fn bad_checks_are_refused() {
        let given =
            |kind: &str, value: &str| ExperimentCheck { kind: kind.into(), value: value.into(), ..Default::default() };
        assert!(checked(&[given("regex", "")]).is_err());
        assert!(checked(&[given("exact", "x")]).is_err());
        assert!(checked(&[given("contains", ""), given("contains", "")]).is_err());
        assert_eq!(checked(&[given("contains", "a")]).map(|c| c.len()), Ok(1));
    }
}
