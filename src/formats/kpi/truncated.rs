//! libdlt's truncated duplicates (spec §3.7), in one place for every KPI
//! reader and writer.
//!
//! When a dataset does not fit into the rest of a message, libdlt ≥ 2.18.4
//! appends a cut-off copy of it (as many bytes as fit, then
//! `... <<Message truncated, too long>>`, filling the payload exactly) if at
//! least 42 bytes are free; dlt-kpi then starts the next message with the
//! whole dataset. Any KPI type can be cut, anywhere, even before its first
//! `;` or to nothing but the marker.
//!
//! - [`is_truncated_duplicate`] is the rule the shared `Assembler` applies to
//!   every argument, whether it came from a `.dlt` file or from text.
//! - [`tail_start`] finds that argument in `dlt-convert -a` text, where the
//!   marker's own spaces and the spaces of command lines hide it.
//! - [`Follow`] checks that the next message of the type starts with what
//!   was cut (a wrong text split shows up here).
//! - [`duplicate_for`] makes the copy, for writers that emulate libdlt.

use super::dataset::{Kind, TRUNCATED_MARKER};

/// Bytes a truncated duplicate needs at least: type info (4), length (2),
/// the marker and its NUL.
pub const MIN_FREE: usize = 4 + 2 + TRUNCATED_MARKER.len() + 1;

/// True for an argument libdlt cut off: it ends with the marker.
pub fn is_truncated_duplicate(arg: &[u8]) -> bool {
    arg.ends_with(TRUNCATED_MARKER)
}

/// The truncated copy of `next` that libdlt appends to a message with
/// `free` payload bytes left, or None when it appends nothing (fewer than
/// [`MIN_FREE`] bytes free, or `next` fits whole).
pub fn duplicate_for(next: &[u8], free: usize) -> Option<Vec<u8>> {
    if free < MIN_FREE || next.len() + 7 <= free {
        return None;
    }
    let keep = (free - MIN_FREE).min(next.len());
    let mut v = Vec::with_capacity(keep + TRUNCATED_MARKER.len());
    v.extend_from_slice(&next[..keep]);
    v.extend_from_slice(TRUNCATED_MARKER);
    Some(v)
}

fn digits(s: &[u8]) -> usize {
    s.iter().take_while(|b| b.is_ascii_digit()).count()
}

/// True when a space followed by `rest` starts a new NEW dataset
/// (`\d+;-?\d+;`) or CHK dataset (`\d+;`) in `dlt-convert -a` text. Command
/// lines may contain the same pattern, so this is a guess (spec §9.2).
pub fn starts_dataset(kind: Kind, rest: &[u8]) -> bool {
    let n = digits(rest);
    if n == 0 || rest.get(n) != Some(&b';') {
        return false;
    }
    if kind != Kind::New {
        return true;
    }
    let r = &rest[n + 1..];
    let r = r.strip_prefix(b"-").unwrap_or(r);
    let m = digits(r);
    m > 0 && r.get(m) == Some(&b';')
}

/// True when `p` can be the cut-off start of a NEW or CHK dataset: a whole
/// `pid;ppid;` (`pid;`) followed by anything, or a cut inside those numbers
/// (`12`, `12;`, `12;3`, or nothing at all).
fn cut_start(kind: Kind, p: &[u8]) -> bool {
    if starts_dataset(kind, p) {
        return true;
    }
    let n = digits(p);
    let r = &p[n..];
    if r.is_empty() {
        return true;
    }
    if kind != Kind::New || n == 0 || r[0] != b';' {
        return false;
    }
    let r = &r[1..];
    let r = r.strip_prefix(b"-").unwrap_or(r);
    digits(r) == r.len()
}

/// Where the truncated duplicate starts in the datasets text `rest` of a
/// `dlt-convert -a` KPI payload (the text after the type word), if `rest`
/// ends with one. `want` is the number of dataset arguments the line's
/// argument count says (noar − 1, duplicate included), when known.
///
/// STP, ACT and IRQ datasets hold no space, so the duplicate starts after
/// the last space before the marker. NEW and CHK command lines may hold
/// spaces: the duplicate starts at a space followed by a possible cut start
/// ([`cut_start`]); of these, the last one that gives `want` arguments
/// (else the last one). Returns the offset and whether another start would
/// have been possible.
pub fn tail_start(kind: Kind, rest: &[u8], want: Option<usize>) -> Option<(usize, bool)> {
    let head = rest.strip_suffix(TRUNCATED_MARKER)?;
    let after_space = |i: usize| i == 0 || head[i - 1] == b' ';
    match kind {
        Kind::Stp | Kind::Act | Kind::Irq => {
            let s = head.iter().rposition(|&b| b == b' ').map_or(0, |i| i + 1);
            Some((s, false))
        }
        Kind::New | Kind::Chk => {
            // Candidates, and the number of arguments each leaves before
            // it: the dataset starts found before it, plus the duplicate.
            let mut cands: Vec<(usize, usize)> = Vec::new();
            let mut starts = 0usize;
            for i in 0..=head.len() {
                if !after_space(i) {
                    continue;
                }
                if cut_start(kind, &head[i..]) {
                    cands.push((i, if i == 0 { 1 } else { starts + 2 }));
                }
                if i > 0 && starts_dataset(kind, &head[i..]) {
                    starts += 1;
                }
            }
            let last = *cands.last()?;
            let pick = want
                .and_then(|w| cands.iter().rev().find(|c| c.1 == w).copied())
                .unwrap_or(last);
            let ambiguous = match want {
                Some(w) => cands.iter().filter(|c| c.1 == w).count() != 1,
                // Without a count, any later candidate than the last whole
                // dataset start is a guess.
                None => {
                    let strong = cands
                        .iter()
                        .rposition(|c| starts_dataset(kind, &head[c.0..]) || c.0 == 0);
                    strong.map_or(cands.len() > 1, |k| k + 1 < cands.len())
                }
            };
            Some((pick.0, ambiguous))
        }
    }
}

/// Checks, per KPI type, that the message after a truncated duplicate
/// starts with the dataset it cut (libdlt retries that dataset first).
#[derive(Debug, Default)]
pub struct Follow {
    pending: Vec<(Kind, Vec<u8>)>,
}

impl Follow {
    /// A data message of `kind` with its dataset arguments (type word
    /// excluded). Returns a warning when a previous cut does not match.
    pub fn data(&mut self, kind: Kind, datasets: &[&[u8]]) -> Option<String> {
        let warn = self.take(kind).and_then(|cut| {
            let first = datasets.first().copied().unwrap_or_default();
            (!first.starts_with(&cut) || is_truncated_duplicate(first)).then(|| {
                format!(
                    "truncated duplicate {:?} is not the start of the next {} dataset {:?}",
                    String::from_utf8_lossy(&cut),
                    kind.name(),
                    String::from_utf8_lossy(&first[..first.len().min(60)])
                )
            })
        });
        if let Some(last) = datasets.last().filter(|d| is_truncated_duplicate(d)) {
            let cut = &last[..last.len() - TRUNCATED_MARKER.len()];
            self.pending.push((kind, cut.to_vec()));
        }
        warn
    }

    /// A BEG or END of `kind`: a cut still pending was never continued.
    pub fn sync(&mut self, kind: Kind) -> Option<String> {
        self.take(kind).map(|cut| {
            format!(
                "truncated duplicate {:?}: no {} message followed it with the whole dataset",
                String::from_utf8_lossy(&cut),
                kind.name()
            )
        })
    }

    fn take(&mut self, kind: Kind) -> Option<Vec<u8>> {
        let i = self.pending.iter().position(|(k, _)| *k == kind)?;
        Some(self.pending.swap_remove(i).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "... <<Message truncated, too long>>";

    fn t(kind: Kind, s: &str, want: Option<usize>) -> Option<(usize, bool)> {
        tail_start(kind, s.as_bytes(), want)
    }

    #[test]
    fn duplicate_fills_the_message_exactly() {
        let next = b"24;cpu0:1;cpu1:0;cpu2:7;cpu3:0;cpu4:0;cpu5:0;cpu6:0;cpu7:0;";
        assert_eq!(duplicate_for(next, MIN_FREE - 1), None);
        let d = duplicate_for(next, MIN_FREE).unwrap();
        assert_eq!(d, M.as_bytes());
        let d = duplicate_for(next, MIN_FREE + 5).unwrap();
        assert_eq!(d, format!("24;cp{M}").as_bytes());
        // The argument takes 4 + 2 + len + NUL bytes: exactly `free`.
        assert_eq!(4 + 2 + d.len() + 1, MIN_FREE + 5);
        // A dataset that fits gets no duplicate.
        assert_eq!(duplicate_for(next, next.len() + 7), None);
        assert!(duplicate_for(next, next.len() + 6).is_some());
    }

    #[test]
    fn tails_of_datasets_without_spaces() {
        // The duplicate is `25;cpu0:3;cpu` + marker.
        let s = format!("24;cpu0:1;cpu1:0; 25;cpu0:3;cpu{M}");
        assert_eq!(t(Kind::Irq, &s, Some(2)), Some((18, false)));
        assert_eq!(
            t(Kind::Irq, &format!("24;cpu0:1; {M}"), None),
            Some((11, false))
        );
        assert_eq!(
            t(Kind::Act, &format!("1;2;3;4;5;6 7;0{M}"), None),
            Some((12, false))
        );
        assert_eq!(t(Kind::Stp, M, None), Some((0, false)));
        assert_eq!(t(Kind::Stp, "12 13", None), None);
    }

    #[test]
    fn new_and_chk_tails_use_the_argument_count() {
        // `… 20996;perl` then the marker alone (the corpus case): 2 or 3
        // arguments are both readable; the count decides.
        let s = format!("20994;sleep 20996;perl {M}");
        assert_eq!(t(Kind::Chk, &s, Some(3)), Some((23, false)));
        assert_eq!(t(Kind::Chk, &s, Some(2)), Some((12, false)));
        assert_eq!(t(Kind::Chk, &s, None), Some((23, true)));
        // A cut inside the numbers of a NEW dataset.
        let s = format!("1;0;init 15561;144{M}");
        assert_eq!(t(Kind::New, &s, Some(2)), Some((9, false)));
        let s = format!("1;0;sleep 5{M}");
        // `5` may be the start of a dataset or the end of `sleep 5`.
        assert_eq!(t(Kind::New, &s, Some(1)), Some((0, false)));
        assert_eq!(t(Kind::New, &s, Some(2)), Some((10, false)));
    }

    #[test]
    fn follow_checks_the_next_message() {
        let mut f = Follow::default();
        let cut = format!("25;cpu0:3;cpu{M}");
        assert_eq!(f.data(Kind::Irq, &[b"24;cpu0:1;", cut.as_bytes()]), None);
        assert_eq!(f.data(Kind::Act, &[b"1;2;3;4;5;6"]), None);
        assert_eq!(f.data(Kind::Irq, &[b"25;cpu0:3;cpu1:4;"]), None);
        f.data(Kind::Irq, &[cut.as_bytes()]);
        assert!(f.data(Kind::Irq, &[b"26;cpu0:3;"]).is_some());
        f.data(Kind::Irq, &[cut.as_bytes()]);
        assert!(f.sync(Kind::Irq).is_some());
        assert!(f.sync(Kind::Irq).is_none());
    }
}
