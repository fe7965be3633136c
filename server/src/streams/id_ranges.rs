//! Store ids as merged inclusive ranges: how `roost_live` notices carry them (`fanout`) and
//! how this server remembers its own recent rows ([`OwnIds`], held by the hubs' `Live` and
//! read by the fanout's catch-up).
//!
//! It sits below both the hubs (`live`) and the fanout: the fanout publishes into the hubs,
//! so the hubs must not import the fanout for what they hold.

use std::collections::VecDeque;

use crate::telemetry::announce::LiveIds;

/// Own id ranges remembered per kind, to leave out of a catch-up.
const OWN_RANGES: usize = 4096;

/// An inclusive range of ids.
pub type Range = [i64; 2];

/// Sorted, merged inclusive ranges covering `ids`.
pub(super) fn ranges(ids: impl IntoIterator<Item = i64>) -> Vec<Range> {
    let mut ids: Vec<i64> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<Range> = Vec::new();
    for id in ids {
        match out.last_mut() {
            Some(last) if last[1] + 1 == id => last[1] = id,
            _ => out.push([id, id]),
        }
    }
    out
}

/// Id ranges this replica stored lately, per kind: what a catch-up must not publish again.
#[derive(Debug, Default)]
pub struct OwnIds {
    pub(super) spans: VecDeque<Range>,
    pub(super) logs: VecDeque<Range>,
    pub(super) events: VecDeque<Range>,
}

impl OwnIds {
    /// Remembers a commit's ids.
    pub fn remember(&mut self, ids: &LiveIds) {
        for (list, ids) in [(&mut self.spans, &ids.spans), (&mut self.logs, &ids.logs), (&mut self.events, &ids.events)]
        {
            for range in ranges(ids.iter().copied()) {
                if list.len() == OWN_RANGES {
                    list.pop_front();
                }
                list.push_back(range);
            }
        }
    }

    /// Whether `id` is in one of the ranges of `list`.
    pub(super) fn holds(list: &VecDeque<Range>, id: i64) -> bool {
        list.iter().any(|r| (r[0]..=r[1]).contains(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_merged_ranges() {
        assert_eq!(ranges([5, 1, 2, 3, 9, 10, 3]), vec![[1, 3], [5, 5], [9, 10]]);
        assert!(ranges([]).is_empty());
    }

    #[test]
    fn own_ids_are_recognised() {
        let mut own = OwnIds::default();
        own.remember(&LiveIds { spans: vec![4, 5, 6], logs: vec![], events: vec![9] });
        assert!(OwnIds::holds(&own.spans, 5));
        assert!(!OwnIds::holds(&own.spans, 7));
        assert!(OwnIds::holds(&own.events, 9));
        assert!(!OwnIds::holds(&own.logs, 9));
    }
}
