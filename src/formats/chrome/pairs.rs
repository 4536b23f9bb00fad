//! Which event types open and close a duration, and the stacks that match
//! them (rules in docs/chrome.md).
//!
//! A type opens a duration when its name (timeline `$placeholders` left
//! out) ends in `_entry`, `_start` or `_begin` (or the same as a word), and
//! closes one when it ends in `_exit` or `_end`; the two pair when they share
//! the category and the stem (`syscall_entry` / `syscall_exit`, `breath $n
//! start` / `breath end`). Matching is last-in first-out per key, so the
//! durations on one track always nest.

use crate::model::{Timestamp, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Open,
    Close,
}

const SUFFIXES: [(&str, Side); 5] = [
    ("entry", Side::Open),
    ("start", Side::Open),
    ("begin", Side::Open),
    ("exit", Side::Close),
    ("end", Side::Close),
];

/// The stem and side of a type name that opens or closes a duration.
pub fn classify(name: &str) -> Option<(String, Side)> {
    // Timeline formats name their arguments inline: `breath $n start`.
    let mut words = String::with_capacity(name.len());
    for w in name.split_whitespace().filter(|w| !w.starts_with('$')) {
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str(w);
    }
    for (suf, side) in SUFFIXES {
        let Some(head) = words.strip_suffix(suf) else {
            continue;
        };
        let stem = match head.strip_suffix(['_', ' ']) {
            Some(s) if !s.is_empty() => s,
            _ => continue,
        };
        return Some((stem.to_string(), side));
    }
    None
}

/// Stems whose durations belong to the running process rather than the
/// CPU (a process can block in a system call or a page fault and resume on
/// another CPU; interrupts cannot).
pub fn per_process(stem: &str) -> bool {
    matches!(stem, "syscall" | "trap")
}

/// An opened duration waiting for its close.
#[derive(Debug, Clone)]
pub struct Open {
    pub type_id: u32,
    pub stem: u32,
    pub time: Timestamp,
    pub fields: Vec<Value>,
    /// Track index where the entry itself happened (for an unmatched one).
    pub home: usize,
}

/// At most this many open durations per key: deeper nesting is damage, and
/// the oldest is then written as unmatched so memory stays bounded.
pub const MAX_DEPTH: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_pair() {
        let c = classify;
        assert_eq!(c("syscall_entry"), Some(("syscall".into(), Side::Open)));
        assert_eq!(c("syscall_exit"), Some(("syscall".into(), Side::Close)));
        assert_eq!(c("soft_irq_entry"), Some(("soft_irq".into(), Side::Open)));
        assert_eq!(c("breath $n start"), Some(("breath".into(), Side::Open)));
        assert_eq!(c("breath end"), Some(("breath".into(), Side::Close)));
        assert_eq!(c("breath_end"), Some(("breath".into(), Side::Close)));
        assert_eq!(c("commit_begin"), Some(("commit".into(), Side::Open)));
        // Not a suffix of a word, or nothing before it.
        assert_eq!(c("backend"), None);
        assert_eq!(c("end"), None);
        assert_eq!(c("_exit"), None);
        assert_eq!(c("soft_irq"), None);
        assert_eq!(c("schedchange"), None);
    }
}
