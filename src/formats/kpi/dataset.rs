//! One KPI dataset (one DLT string argument) and its parsing rules
//! (specs/kpi-dlt.md §3.2, §3.8, §9.1).

use std::borrow::Cow;

/// The five KPI message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    New,
    Stp,
    Act,
    Chk,
    Irq,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::New, Kind::Stp, Kind::Act, Kind::Chk, Kind::Irq];
    pub fn parse(s: &[u8]) -> Option<Kind> {
        Some(match s {
            b"NEW" => Kind::New,
            b"STP" => Kind::Stp,
            b"ACT" => Kind::Act,
            b"CHK" => Kind::Chk,
            b"IRQ" => Kind::Irq,
            _ => return None,
        })
    }
    /// Position in [`Kind::ALL`] (per-type arrays).
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::New => "NEW",
            Kind::Stp => "STP",
            Kind::Act => "ACT",
            Kind::Chk => "CHK",
            Kind::Irq => "IRQ",
        }
    }
}

/// The marker libdlt ≥ 2.18.4 puts after a cut-off copy of a dataset.
pub const TRUNCATED_MARKER: &[u8] = b"... <<Message truncated, too long>>";

/// Parsed datasets borrow their text from the message (no copy while a
/// conversion runs); those built from other data own it.
#[derive(Debug, Clone, PartialEq)]
pub enum Dataset<'a> {
    New {
        pid: i64,
        ppid: i64,
        cmdline: Cow<'a, [u8]>,
    },
    Stp {
        pid: i64,
    },
    /// pid, then cpu, rss, ctx, io_bytes, io_wait.
    Act {
        pid: i64,
        values: [i64; 5],
    },
    Chk {
        pid: i64,
        cmdline: Cow<'a, [u8]>,
    },
    /// Row name and (cpu, count) pairs; rows may be shorter than the CPU count.
    Irq {
        name: Cow<'a, str>,
        counts: IrqCounts<'a>,
    },
}

/// The (cpu, count) pairs of an IRQ row: the checked columns of a parsed
/// dataset (read again when used, so parsing allocates nothing), or pairs
/// built from other data.
#[derive(Debug, Clone)]
pub enum IrqCounts<'a> {
    /// `cpuN:count` columns separated by `;`, every one valid, and how
    /// many (the parser gave them as pairs too: see [`Dataset::parse_into`]).
    Text(&'a [u8], u32),
    Pairs(Vec<(u32, u64)>),
}

impl IrqCounts<'_> {
    /// `f(cpu, count)` for each pair, in order: what [`IrqCounts::iter`]
    /// gives, in a plain loop (the assembler's use, for every IRQ row; the
    /// chained iterator's steps cost more than reading the columns).
    pub fn for_each(&self, mut f: impl FnMut(u32, u64)) {
        match self {
            IrqCounts::Text(t, _) => {
                for p in t.split(|&b| b == b';') {
                    if let Some((cpu, n)) = irq_column(p) {
                        f(cpu, n);
                    }
                }
            }
            IrqCounts::Pairs(p) => {
                for &(cpu, n) in p {
                    f(cpu, n);
                }
            }
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let (text, pairs) = match self {
            IrqCounts::Text(t, _) => (Some(*t), None),
            IrqCounts::Pairs(p) => (None, Some(p)),
        };
        let from_text = text
            .into_iter()
            .flat_map(|t| t.split(|&b| b == b';'))
            .filter_map(irq_column);
        from_text.chain(pairs.into_iter().flatten().copied())
    }
}

impl From<Vec<(u32, u64)>> for IrqCounts<'_> {
    fn from(v: Vec<(u32, u64)>) -> Self {
        IrqCounts::Pairs(v)
    }
}

impl PartialEq for IrqCounts<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.iter().eq(o.iter())
    }
}

/// One `cpuN:count` column; None when it is not one.
fn irq_column(p: &[u8]) -> Option<(u32, u64)> {
    let rest = p.strip_prefix(b"cpu")?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let cpu = int(&rest[..colon]).and_then(|c| u32::try_from(c).ok())?;
    let n = int(&rest[colon + 1..]).and_then(|c| u64::try_from(c).ok())?;
    Some((cpu, n))
}

/// A decimal integer, optionally negative (no `+`, no spaces): what
/// `str::parse::<i64>` accepts without its `+`, straight from the bytes
/// (every value of every dataset goes through here).
fn int(s: &[u8]) -> Option<i64> {
    // A field that runs to the end: a `;` in it is not a digit.
    match int_to(s, b';') {
        Some((v, None)) => Some(v),
        _ => None,
    }
}

/// [`int`] of the field that ends at the first `stop` (or at the end),
/// and what follows that `stop` (None: the field ran to the end). One
/// pass: the field is not looked for first (every dataset's numbers).
#[inline]
fn int_to(s: &[u8], stop: u8) -> Option<(i64, Option<&[u8]>)> {
    let neg = s.first() == Some(&b'-');
    let start = neg as usize;
    let mut i = start;
    let mut v: i64 = 0;
    while let Some(&c) = s.get(i) {
        if c == stop {
            break;
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d as i64)?
        } else {
            v.checked_add(d as i64)?
        };
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((v, s.get(i + 1..).filter(|_| i < s.len())))
}

impl<'a> Dataset<'a> {
    /// Parse the text of one dataset of `kind`.
    pub fn parse(kind: Kind, text: &'a [u8]) -> Result<Dataset<'a>, String> {
        Self::parse_into(kind, text, &mut Vec::new())
    }

    /// [`Dataset::parse`], appending an IRQ row's (cpu, count) pairs to
    /// `pairs` as they are checked (nothing when the row is bad), so that
    /// its user need not read the columns again.
    pub fn parse_into(
        kind: Kind,
        text: &'a [u8],
        pairs: &mut Vec<(u32, u64)>,
    ) -> Result<Dataset<'a>, String> {
        let show = || String::from_utf8_lossy(text).into_owned();
        match kind {
            Kind::New => match int_to(text, b';') {
                Some((pid, Some(rest))) => match int_to(rest, b';') {
                    Some((ppid, Some(cmd))) => Ok(Dataset::New {
                        pid,
                        ppid,
                        cmdline: Cow::Borrowed(cmd),
                    }),
                    _ => Err(format!(
                        "bad NEW dataset {:?} (want pid;ppid;cmdline)",
                        show()
                    )),
                },
                _ => Err(format!(
                    "bad NEW dataset {:?} (want pid;ppid;cmdline)",
                    show()
                )),
            },
            Kind::Stp => int(text)
                .map(|pid| Dataset::Stp { pid })
                .ok_or_else(|| format!("bad STP dataset {:?} (want pid)", show())),
            Kind::Chk => match int_to(text, b';') {
                Some((pid, Some(cmd))) => Ok(Dataset::Chk {
                    pid,
                    cmdline: Cow::Borrowed(cmd),
                }),
                _ => Err(format!("bad CHK dataset {:?} (want pid;cmdline)", show())),
            },
            Kind::Act => {
                // Six integers, no more, no less (no collecting: this runs
                // for every ACT dataset).
                let mut n = [0i64; 6];
                let mut rest = Some(text);
                let mut ok = true;
                for slot in n.iter_mut() {
                    match rest.and_then(|r| int_to(r, b';')) {
                        Some((v, r)) => {
                            *slot = v;
                            rest = r;
                        }
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                // The sixth ran to the end: no seventh field.
                match ok && rest.is_none() {
                    true => Ok(Dataset::Act {
                        pid: n[0],
                        values: [n[1], n[2], n[3], n[4], n[5]],
                    }),
                    false => Err(format!(
                        "bad ACT dataset {:?} (want 6 integers pid;cpu;rss;ctx;io;iowait)",
                        show()
                    )),
                }
            }
            Kind::Irq => {
                let body = text
                    .strip_suffix(b";")
                    .ok_or_else(|| format!("bad IRQ dataset {:?} (no trailing ';')", show()))?;
                let (first, columns) = match body.iter().position(|&b| b == b';') {
                    Some(i) => (&body[..i], &body[i + 1..]),
                    None => (body, &body[body.len()..]),
                };
                let name = Some(first)
                    .filter(|n| !n.is_empty())
                    .and_then(|n| crate::model::utf8(n))
                    .ok_or_else(|| format!("bad IRQ dataset {:?} (no row name)", show()))?
                    .into();
                // A row with a name only has no columns (not one empty one).
                let from = pairs.len();
                if first.len() < body.len() {
                    // `cpuN:count` columns, each read in one pass (what
                    // `irq_column` of each `;` field accepts).
                    let mut rest = Some(columns);
                    while let Some(r) = rest {
                        let col = r
                            .strip_prefix(b"cpu")
                            .and_then(|c| int_to(c, b':'))
                            .and_then(|(cpu, after)| Some((cpu, int_to(after?, b';')?)))
                            .and_then(|(cpu, (n, next))| {
                                Some(((u32::try_from(cpu).ok()?, u64::try_from(n).ok()?), next))
                            });
                        match col {
                            Some((c, next)) => {
                                pairs.push(c);
                                rest = next;
                            }
                            None => {
                                pairs.truncate(from);
                                let p = r.split(|&b| b == b';').next().unwrap_or_default();
                                return Err(format!(
                                    "bad IRQ column {:?} in {:?}",
                                    String::from_utf8_lossy(p),
                                    show()
                                ));
                            }
                        }
                    }
                }
                let counts = if first.len() < body.len() {
                    IrqCounts::Text(columns, (pairs.len() - from) as u32)
                } else {
                    IrqCounts::Pairs(Vec::new())
                };
                Ok(Dataset::Irq { name, counts })
            }
        }
    }

    /// The dataset text as dlt-kpi prints it.
    pub fn render(&self) -> Vec<u8> {
        match self {
            Dataset::New { pid, ppid, cmdline } => {
                let mut v = format!("{pid};{ppid};").into_bytes();
                v.extend_from_slice(cmdline);
                v
            }
            Dataset::Stp { pid } => pid.to_string().into_bytes(),
            Dataset::Act { pid, values: v } => {
                format!("{pid};{};{};{};{};{}", v[0], v[1], v[2], v[3], v[4]).into_bytes()
            }
            Dataset::Chk { pid, cmdline } => {
                let mut v = format!("{pid};").into_bytes();
                v.extend_from_slice(cmdline);
                v
            }
            Dataset::Irq { name, counts } => {
                let mut s = format!("{name};");
                for (cpu, n) in counts.iter() {
                    s.push_str(&format!("cpu{cpu}:{n};"));
                }
                s.into_bytes()
            }
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Dataset::New { .. } => Kind::New,
            Dataset::Stp { .. } => Kind::Stp,
            Dataset::Act { .. } => Kind::Act,
            Dataset::Chk { .. } => Kind::Chk,
            Dataset::Irq { .. } => Kind::Irq,
        }
    }
}

/// Sanity flags of spec §9.4 for one dataset (none when nothing is odd;
/// checked per dataset, so no list is built).
pub fn sanity_flags(d: &Dataset) -> impl Iterator<Item = &'static str> {
    const PPID0: &str = "ppid 0 (comm with a space, or the process vanished)";
    const NULL: &str = "cmdline (null): the process vanished before it was read";
    let (a, b) = match d {
        Dataset::New { pid, ppid, cmdline } => (
            (*ppid == 0 && *pid != 1 && *pid != 2).then_some(PPID0),
            (**cmdline == *b"(null)").then_some(NULL),
        ),
        Dataset::Chk { cmdline, .. } => (None, (**cmdline == *b"(null)").then_some(NULL)),
        _ => (None, None),
    };
    a.into_iter().chain(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_accepts_what_str_parse_accepts_but_plus() {
        let cases: [&[u8]; 19] = [
            b"1;",
            b";1",
            b"1;2",
            b"0",
            b"-0",
            b"42",
            b"-42",
            b"+1",
            b"",
            b"-",
            b"1a",
            b" 1",
            b"1 ",
            b"9223372036854775807",
            b"9223372036854775808",
            b"-9223372036854775808",
            b"-9223372036854775809",
            b"007",
            b"\xff1",
        ];
        for c in cases {
            let want = std::str::from_utf8(c)
                .ok()
                .filter(|s| !s.starts_with('+'))
                .and_then(|s| s.parse::<i64>().ok());
            assert_eq!(int(c), want, "{:?}", String::from_utf8_lossy(c));
        }
    }

    #[test]
    fn new_keeps_semicolons_and_spaces_in_cmdline() {
        let d = Dataset::parse(Kind::New, b"14466;0;perl-title; with spaces;and;semis 1").unwrap();
        assert_eq!(
            d,
            Dataset::New {
                pid: 14466,
                ppid: 0,
                cmdline: b"perl-title; with spaces;and;semis 1"[..].into()
            }
        );
        assert_eq!(d.render(), b"14466;0;perl-title; with spaces;and;semis 1");
    }

    #[test]
    fn irq_ragged_rows_and_trailing_semicolon() {
        let d = Dataset::parse(Kind::Irq, b"ERR;cpu0:0;").unwrap();
        assert_eq!(
            d,
            Dataset::Irq {
                name: "ERR".into(),
                counts: vec![(0, 0)].into()
            }
        );
        assert!(Dataset::parse(Kind::Irq, b"ERR;cpu0:0").is_err());
        assert!(Dataset::parse(Kind::Irq, b"LOC;cpu0:x;").is_err());
    }

    #[test]
    fn irq_for_each_gives_the_pairs_in_order() {
        let d = Dataset::parse(Kind::Irq, b"24;cpu0:1;cpu1:0;cpu3:13;").unwrap();
        let Dataset::Irq { counts, .. } = d else {
            panic!("not IRQ")
        };
        let built: IrqCounts = vec![(2, 7), (0, 5)].into();
        for (c, want) in [
            (&counts, vec![(0, 1), (1, 0), (3, 13)]),
            (&built, vec![(2, 7), (0, 5)]),
        ] {
            let mut got = Vec::new();
            c.for_each(|cpu, n| got.push((cpu, n)));
            assert_eq!(got, want);
            assert_eq!(c.iter().collect::<Vec<_>>(), want);
        }
    }

    /// The rules as first written, field by field: split on `;`, then
    /// `int` of each field (`irq_column` of each IRQ column). `int` itself
    /// is held to `str::parse` above.
    fn by_fields(kind: Kind, text: &[u8]) -> Option<Vec<i64>> {
        let f: Vec<&[u8]> = match kind {
            Kind::New => text.splitn(3, |&b| b == b';').collect(),
            Kind::Chk => text.splitn(2, |&b| b == b';').collect(),
            _ => text.split(|&b| b == b';').collect(),
        };
        match kind {
            Kind::New if f.len() == 3 => Some(vec![int(f[0])?, int(f[1])?, f[2].len() as i64]),
            Kind::Chk if f.len() == 2 => Some(vec![int(f[0])?, f[1].len() as i64]),
            Kind::Act if f.len() == 6 => f.iter().map(|p| int(p)).collect(),
            Kind::Irq => {
                let body = text.strip_suffix(b";")?;
                let mut cols = body.split(|&b| b == b';');
                if cols.next()?.is_empty() {
                    return None;
                }
                let mut v = Vec::new();
                for c in cols {
                    let (cpu, n) = irq_column(c)?;
                    v.extend([cpu as i64, n as i64]);
                }
                Some(v)
            }
            _ => None,
        }
    }

    fn numbers(d: &Dataset, pairs: &[(u32, u64)]) -> Vec<i64> {
        match d {
            Dataset::New { pid, ppid, cmdline } => vec![*pid, *ppid, cmdline.len() as i64],
            Dataset::Chk { pid, cmdline } => vec![*pid, cmdline.len() as i64],
            Dataset::Act { pid, values } => [*pid].into_iter().chain(*values).collect(),
            Dataset::Stp { pid } => vec![*pid],
            Dataset::Irq { .. } => pairs
                .iter()
                .flat_map(|&(c, n)| [c as i64, n as i64])
                .collect(),
        }
    }

    /// The one-pass parser accepts and reads what splitting into fields
    /// first does, on random texts of the characters that matter
    /// (digits, separators, signs, `cpu`, a stray letter) and at the
    /// limits of i64.
    #[test]
    fn one_pass_parsing_gives_what_fields_give() {
        let mut rng = crate::model::TestRng(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next();
        let alphabet = b"0123456789;;;::--cpux";
        let mut texts: Vec<Vec<u8>> = vec![
            b"9223372036854775807;-9223372036854775808;x".to_vec(),
            b"9223372036854775808;1;x".to_vec(),
            b"-;1;x".to_vec(),
            b"24;cpu0:1;cpu1:0;".to_vec(),
            b"24;cpu4294967296:1;".to_vec(),
            b"24;cpu1:-1;".to_vec(),
            b"1;2;3;4;5;6".to_vec(),
            b"1;2;3;4;5;6;".to_vec(),
            b"1;2;3;4;5".to_vec(),
        ];
        for _ in 0..20_000 {
            let n = (next() % 24) as usize;
            texts.push((0..n).map(|_| alphabet[(next() % 21) as usize]).collect());
        }
        let mut good = 0;
        for t in &texts {
            for kind in [Kind::New, Kind::Chk, Kind::Act, Kind::Irq] {
                let mut pairs = Vec::new();
                let got = Dataset::parse_into(kind, t, &mut pairs)
                    .ok()
                    .map(|d| numbers(&d, &pairs));
                let text = String::from_utf8_lossy(t);
                assert_eq!(got, by_fields(kind, t), "{kind:?} {text:?}");
                good += got.is_some() as usize;
            }
        }
        // The random texts reach the accepting paths too.
        assert!(good > 500, "only {good} accepted");
    }

    /// The assembler reads an IRQ row's pairs from what `parse_into` kept:
    /// they must be the row's, in order, counted in the dataset, and a bad
    /// row (even one bad after good columns) must leave none behind.
    #[test]
    fn parse_into_keeps_the_pairs_of_good_rows_only() {
        let mut pairs = vec![(9, 9)];
        let d = Dataset::parse_into(Kind::Irq, b"24;cpu0:1;cpu1:0;cpu3:13;", &mut pairs).unwrap();
        assert!(matches!(
            d,
            Dataset::Irq {
                counts: IrqCounts::Text(_, 3),
                ..
            }
        ));
        assert_eq!(pairs, [(9, 9), (0, 1), (1, 0), (3, 13)]);
        assert!(Dataset::parse_into(Kind::Irq, b"LOC;cpu0:4;cpu1:x;", &mut pairs).is_err());
        assert!(Dataset::parse_into(Kind::Irq, b"NMI;", &mut pairs).is_ok());
        assert!(Dataset::parse_into(Kind::Chk, b"1;init", &mut pairs).is_ok());
        assert_eq!(pairs, [(9, 9), (0, 1), (1, 0), (3, 13)]);
    }

    #[test]
    fn act_needs_six_integers() {
        assert!(Dataset::parse(Kind::Act, b"1;2;3;4;5").is_err());
        assert!(Dataset::parse(Kind::Act, b"1;2;3;4;5;6;7").is_err());
        let d = Dataset::parse(Kind::Act, b"14273;370;25380;668;16944326;0").unwrap();
        assert_eq!(d.render(), b"14273;370;25380;668;16944326;0");
    }

    #[test]
    fn chk_kernel_thread_and_null() {
        let d = Dataset::parse(Kind::Chk, b"2;(kthreadd)").unwrap();
        assert_eq!(
            d,
            Dataset::Chk {
                pid: 2,
                cmdline: b"(kthreadd)"[..].into()
            }
        );
        let n = Dataset::parse(Kind::New, b"14862;0;(null)").unwrap();
        assert_eq!(sanity_flags(&n).count(), 2);
    }
}
