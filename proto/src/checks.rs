//! The names an experiment's checks give their outcomes: the keys of a result's `checks`
//! and of a summary's pass rates, so part of the contract (clients and the dashboard read
//! them back against the experiment's own list).

use crate::v1::ExperimentCheck;

impl ExperimentCheck {
    /// `exact_match`, `contains` (the expected output) or `contains:<value>`, with `/i`
    /// after it when the check ignores case.
    pub fn result_name(&self) -> String {
        let base = match (self.kind.as_str(), self.value.is_empty()) {
            ("exact", _) => "exact_match".to_owned(),
            (_, true) => "contains".to_owned(),
            (_, false) => format!("contains:{}", self.value),
        };
        if self.ignore_case { format!("{base}/i") } else { base }
    }
}
