//! Typed per-format extras: what only one format has travels here so a
//! same-format round trip is lossless. Keys are namespaced by format
//! (`mmv.flags`, `pcp.label.zoneinfo`, `ltt.block_size`, `timeline.msg_id`);
//! each format module defines the keys it uses as constants.

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub enum ExtraValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<ExtraValue>),
}

impl ExtraValue {
    /// Become the number `x`, written where it lies when this is a number
    /// of that kind already (reused items): no drop of the old value, no
    /// 32-byte value built apart and moved in (that stalled in profiles).
    #[inline]
    pub fn put_i64(&mut self, x: i64) {
        match self {
            ExtraValue::I64(y) => *y = x,
            v => *v = ExtraValue::I64(x),
        }
    }
    /// [`Self::put_i64`] for an unsigned number.
    #[inline]
    pub fn put_u64(&mut self, x: u64) {
        match self {
            ExtraValue::U64(y) => *y = x,
            v => *v = ExtraValue::U64(x),
        }
    }
}

impl std::fmt::Display for ExtraValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtraValue::U64(v) => write!(f, "{v}"),
            ExtraValue::I64(v) => write!(f, "{v}"),
            ExtraValue::F64(v) => write!(f, "{v:?}"),
            ExtraValue::Bool(v) => write!(f, "{v}"),
            ExtraValue::Str(v) => write!(f, "{v:?}"),
            ExtraValue::Bytes(v) => write!(f, "<{} bytes>", v.len()),
            ExtraValue::List(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// An extras key: a format's constant (no allocation, the common case) or a
/// name built at run time (self-descriptions read back, JSON).
pub type ExtraKey = Cow<'static, str>;

/// Extras as a small map kept sorted by key: items carry a handful of
/// entries, so a sorted Vec beats a tree (one allocation, no nodes), and
/// constant keys cost nothing. Iteration is in key order, as before.
///
/// Each also carries a stamp of its contents: 0 (none) after any change,
/// a number no other contents had once [`Extras::restamp`] gives one, and
/// copied with the contents. Equal stamps other than 0 mean equal contents
/// without comparing them: the thread hand-off (`wire`) stamps the extras
/// it decodes and leaves them as they were for an item that has the same,
/// so the PCP event encoder sees at once that they are the ones it encoded
/// last. (Stamping at every change cost the reading thread more than the
/// comparisons it saved.)
#[derive(Clone, Default)]
pub struct Extras(Vec<(ExtraKey, ExtraValue)>, Stamp);

type Stamp = u64;

/// Stamps come in blocks of 2^32 per thread (one atomic step per block,
/// none per stamp): unique across threads without the two CPUs sharing a
/// counter's cache line.
fn new_stamp() -> Stamp {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    static BLOCKS: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NEXT: Cell<Stamp> = const { Cell::new(0) };
    }
    NEXT.with(|n| {
        let mut s = n.get();
        if s & 0xffff_ffff == 0 {
            // First use on this thread, or the block is spent.
            s = BLOCKS.fetch_add(1, Ordering::Relaxed) << 32;
            s += 1;
        }
        n.set(s + 1);
        s
    })
}

impl PartialEq for Extras {
    fn eq(&self, o: &Extras) -> bool {
        self.0 == o.0
    }
}

impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Extras").field(&self.0).finish()
    }
}

/// `a.cmp(b)` for keys, inline: keys are short and share prefixes
/// (`kpi.`, `dlt.`), and a `memcmp` call per comparison showed in profiles.
#[inline]
pub(crate) fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().unwrap_or_default());
        let y = u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// The same key text at the same address: keys are mostly a format's
/// constants, passed as the same constant, so this says "same key"
/// without comparing (false says nothing).
#[inline]
pub fn same_address(a: &str, b: &str) -> bool {
    std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
}

/// `a == b` for keys, inline (see [`key_order`]); a key at the same
/// address is equal without comparing.
#[inline]
pub fn key_eq(a: &str, b: &str) -> bool {
    same_address(a, b) || (a.len() == b.len() && key_order(a, b).is_eq())
}

impl Extras {
    pub fn with_capacity(n: usize) -> Extras {
        Extras(Vec::with_capacity(n), 0)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    #[inline]
    fn find(&self, key: &str) -> Result<usize, usize> {
        if self.0.is_empty() {
            return Err(0);
        }
        if let Some(i) = self.0.iter().position(|(k, _)| same_address(k, key)) {
            return Ok(i);
        }
        self.0.binary_search_by(|(k, _)| key_order(k, key))
    }
    /// Set `key` (a `&'static str` constant or an owned `String`).
    pub fn set(&mut self, key: impl Into<ExtraKey>, v: ExtraValue) {
        self.touch();
        let key = key.into();
        match self.find(&key) {
            Ok(i) => self.0[i].1 = v,
            Err(i) => self.0.insert(i, (key, v)),
        }
    }
    /// Set `key` to the number `v`, in place where the key is there
    /// ([`ExtraValue::put_i64`]).
    pub fn set_i64(&mut self, key: &'static str, v: i64) {
        match self.get_mut(key) {
            Some(x) => x.put_i64(v),
            None => self.set(key, ExtraValue::I64(v)),
        }
    }
    /// Set `key` to text `v`, in the text buffer it has if it has one
    /// (reused items).
    pub fn set_str(&mut self, key: &'static str, v: &str) {
        if let Some(ExtraValue::Str(s)) = self.get_mut(key) {
            s.clear();
            s.push_str(v);
            return;
        }
        self.set(key, ExtraValue::Str(v.to_string()));
    }
    /// The entries in key order (the item hand-off between threads,
    /// `wire`, numbers the keys).
    pub(crate) fn entries(&self) -> &[(ExtraKey, ExtraValue)] {
        &self.0
    }
    /// The entries, for `wire` to fill in the order `entries` gave them
    /// (key order stays as it was).
    pub(crate) fn entries_mut(&mut self) -> &mut Vec<(ExtraKey, ExtraValue)> {
        self.touch();
        &mut self.0
    }
    /// Every change, and every handing out of a way to change them, drops
    /// the stamp.
    #[inline]
    fn touch(&mut self) {
        self.1 = 0;
    }
    /// A stamp no other contents had, for extras that will be compared
    /// with copies of themselves (see [`Extras::same_bits`]).
    pub(crate) fn restamp(&mut self) {
        self.1 = new_stamp();
    }
    /// The stamp (0: none since the last change).
    pub(crate) fn stamp(&self) -> Stamp {
        self.1
    }
    /// The same stamp (contents unchanged since one was copied from the
    /// other), or the same keys with values equal to the bit (`-0.0` is not
    /// `0.0` here, a NaN is its own payload; lists never are). Consecutive
    /// items of one message mostly carry the same extras: the thread
    /// hand-off (`wire`) and the PCP event encoder then reuse what they made
    /// of them.
    pub(crate) fn same_bits(&self, other: &Extras) -> bool {
        if self.1 != 0 && self.1 == other.1 {
            return true;
        }
        fn same(a: &ExtraValue, b: &ExtraValue) -> bool {
            match (a, b) {
                (ExtraValue::U64(x), ExtraValue::U64(y)) => x == y,
                (ExtraValue::I64(x), ExtraValue::I64(y)) => x == y,
                (ExtraValue::F64(x), ExtraValue::F64(y)) => x.to_bits() == y.to_bits(),
                (ExtraValue::Bool(x), ExtraValue::Bool(y)) => x == y,
                // Short texts (`kpi.kind`): compared inline, not by memcmp.
                (ExtraValue::Str(x), ExtraValue::Str(y)) => key_eq(x, y),
                (ExtraValue::Bytes(x), ExtraValue::Bytes(y)) => x == y,
                _ => false,
            }
        }
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((ka, va), (kb, vb))| key_eq(ka, kb) && same(va, vb))
    }
    /// Become a copy of `src`, in the text buffers this one has. Numbers
    /// of the kind already there are written where they lie (no drop of
    /// the old value: that was most of a copy), texts copied only when
    /// they differ; a text that a number or a shorter copy displaces
    /// keeps its buffer for a text further on (recycled KPI events of
    /// another layout: no allocation then).
    pub(crate) fn copy_from(&mut self, src: &Extras) {
        self.1 = src.1;
        // The usual case first: the same keys at the same addresses, with
        // numbers of the same kinds (a recycled event of the layout).
        if self.0.len() == src.0.len() && self.copy_same_layout(src) {
            return;
        }
        let d = &mut self.0;
        let mut spare: Option<String> = None;
        if d.len() > src.0.len() {
            for (_, v) in d.drain(src.0.len()..) {
                if let ExtraValue::Str(s) = v {
                    spare.get_or_insert(s);
                }
            }
        }
        // A value of another kind: in the spare buffer when it is a text.
        fn made(v: &ExtraValue, spare: &mut Option<String>) -> ExtraValue {
            match (v, spare.take()) {
                (ExtraValue::Str(x), Some(mut b)) => {
                    b.clear();
                    b.push_str(x);
                    ExtraValue::Str(b)
                }
                (v, s) => {
                    *spare = s;
                    v.clone()
                }
            }
        }
        let have = d.len();
        for ((dk, dv), (k, v)) in d.iter_mut().zip(&src.0) {
            if !key_eq(dk, k) {
                *dk = k.clone();
            }
            match (&mut *dv, v) {
                (ExtraValue::U64(a), ExtraValue::U64(b)) => *a = *b,
                (ExtraValue::I64(a), ExtraValue::I64(b)) => *a = *b,
                (ExtraValue::F64(a), ExtraValue::F64(b)) => *a = *b,
                (ExtraValue::Bool(a), ExtraValue::Bool(b)) => *a = *b,
                (ExtraValue::Str(t), ExtraValue::Str(x)) => {
                    if !key_eq(t, x) {
                        t.clear();
                        t.push_str(x);
                    }
                }
                (ExtraValue::Bytes(t), ExtraValue::Bytes(x)) => {
                    t.clear();
                    t.extend_from_slice(x);
                }
                _ => {
                    let old = std::mem::replace(dv, made(v, &mut spare));
                    if let ExtraValue::Str(s) = old {
                        spare.get_or_insert(s);
                    }
                }
            }
        }
        for (k, v) in &src.0[have..] {
            d.push((k.clone(), made(v, &mut spare)));
        }
    }
    /// `copy_from` for entries of the same layout: true when every entry
    /// was, else false with the entries before the first other one copied
    /// (the general path then finds those equal).
    #[inline]
    fn copy_same_layout(&mut self, src: &Extras) -> bool {
        for ((dk, dv), (k, v)) in self.0.iter_mut().zip(&src.0) {
            if !same_address(dk, k) {
                return false;
            }
            match (dv, v) {
                (ExtraValue::U64(a), ExtraValue::U64(b)) => *a = *b,
                (ExtraValue::I64(a), ExtraValue::I64(b)) => *a = *b,
                (ExtraValue::Str(t), ExtraValue::Str(x)) if t.as_str() == x.as_str() => {}
                _ => return false,
            }
        }
        true
    }
    /// Drop every entry, keeping the allocation (reused items).
    pub fn clear(&mut self) {
        self.touch();
        self.0.clear();
    }
    pub fn remove(&mut self, key: &str) -> Option<ExtraValue> {
        let i = self.find(key).ok()?;
        self.touch();
        Some(self.0.remove(i).1)
    }
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &ExtraValue) -> bool) {
        self.touch();
        self.0.retain(|(k, v)| keep(k, v));
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &ExtraValue)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
    pub fn values(&self) -> impl Iterator<Item = &ExtraValue> {
        self.0.iter().map(|(_, v)| v)
    }
    #[inline]
    pub fn get(&self, key: &str) -> Option<&ExtraValue> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }
    pub fn get_mut(&mut self, key: &str) -> Option<&mut ExtraValue> {
        let i = self.find(key).ok()?;
        self.touch();
        Some(&mut self.0[i].1)
    }
    pub fn u64(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            ExtraValue::U64(v) => Some(*v),
            ExtraValue::I64(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn i64(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            ExtraValue::I64(v) => Some(*v),
            ExtraValue::U64(v) => i64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn f64(&self, key: &str) -> Option<f64> {
        match self.get(key)? {
            ExtraValue::F64(v) => Some(*v),
            _ => None,
        }
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            ExtraValue::Str(v) => Some(v),
            _ => None,
        }
    }
    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        match self.get(key)? {
            ExtraValue::Bytes(v) => Some(v),
            _ => None,
        }
    }
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            ExtraValue::Bool(v) => Some(*v),
            _ => None,
        }
    }
}

impl<'a> IntoIterator for &'a Extras {
    type Item = (&'a str, &'a ExtraValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (ExtraKey, ExtraValue)>,
        fn(&'a (ExtraKey, ExtraValue)) -> (&'a str, &'a ExtraValue),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

impl IntoIterator for Extras {
    type Item = (ExtraKey, ExtraValue);
    type IntoIter = std::vec::IntoIter<(ExtraKey, ExtraValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<(String, ExtraValue)> for Extras {
    fn from_iter<I: IntoIterator<Item = (String, ExtraValue)>>(it: I) -> Extras {
        let mut x = Extras::default();
        for (k, v) in it {
            x.set(k, v);
        }
        x
    }
}

/// Extras keys that more than one module reads. A format's own keys stay in
/// its folder; these describe a stream any writer may look at.
pub mod keys {
    /// Header: which counter the items' `raw_clock` holds, so a writer never
    /// takes one clock for another. Values: `tsc` (x86 TSC, recorder and
    /// timeline), `cntvct_el0` (arm64 recorder), `dlt-0.1ms` (DLT header
    /// timestamps: 0.1 ms ticks since boot), `ltt-cycles` (LTT cycle
    /// counter). Absent: no raw clock, or its meaning is unknown.
    pub const RAW_CLOCK: &str = "record.raw_clock";
    /// The values of [`RAW_CLOCK`].
    pub const CLOCK_TSC: &str = "tsc";
    pub const CLOCK_CNTVCT: &str = "cntvct_el0";
    pub const CLOCK_DLT: &str = "dlt-0.1ms";
    pub const CLOCK_LTT: &str = "ltt-cycles";
    /// True when a raw clock of this name counts CPU cycles (a timeline's
    /// TSC can hold it); DLT ticks and unknown clocks do not.
    pub fn is_cycle_counter(name: &str) -> bool {
        matches!(name, CLOCK_TSC | CLOCK_CNTVCT | CLOCK_LTT)
    }
    /// Extras whose value (i64) is a model timestamp in nanoseconds, so
    /// that a stage moving the time axis (`--time-origin`) moves them too.
    pub const TIMESTAMPS: [&str; 2] = ["kpi.beg_time", "dlt.storage_ns"];
    /// Event types of framing events that are part of what their source
    /// holds (DLT control messages, unlike LTT block bookkeeping): what
    /// they are, for the "dropped" line of a target that leaves them out.
    pub const FRAMING_KIND: &str = "framing.kind";
    /// Header: the recorder's TSC rate (mean, at start, at end).
    pub const TSC_HZ: &str = "record.tsc_hz";
    pub const TSC_HZ_START: &str = "record.tsc_hz_start";
    pub const TSC_HZ_END: &str = "record.tsc_hz_end";
    /// Header: counter value and CLOCK_REALTIME ns of the first scan (anchor).
    pub const TSC_ANCHOR: &str = "record.tsc_anchor";
    pub const INTERVAL_NS: &str = "record.interval_ns";
    pub const CHECK_INTERVAL_NS: &str = "record.check_interval_ns";
    pub const NCPU: &str = "record.ncpu";
    pub const CLK_TCK: &str = "record.clk_tck";
    pub const SCANS: &str = "record.scans";
    /// Header: why the recording stopped: `duration`, `samples`, `SIGINT`, `SIGTERM`.
    pub const STOPPED_BY: &str = "record.stopped_by";
    /// Data items of a merged stream: the input they came from (its file
    /// name or `--label`).
    pub const SOURCE: &str = "source";
    /// Header of a merged stream: the inputs' names, in order.
    pub const MERGE_SOURCES: &str = "merge.sources";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `copy_from` gives equal extras with the source's stamp from any
    /// layout: longer, shorter, values of other kinds, texts where numbers
    /// were and the reverse (where it reuses the text buffers it has).
    #[test]
    fn copy_from_gives_the_source_from_any_layout() {
        let layout = |n: usize, texts: bool| {
            let mut x = Extras::default();
            for i in 0..n {
                let k: &'static str = ["a", "b", "c", "d", "e", "f"][i];
                let v = if texts == (i % 2 == 0) {
                    ExtraValue::Str(format!("t{i}"))
                } else {
                    ExtraValue::I64(i as i64)
                };
                x.set(k, v);
            }
            x.set("g", ExtraValue::Bytes(vec![1, 2]));
            x
        };
        let all: Vec<Extras> = (0..=6)
            .flat_map(|n| [layout(n, false), layout(n, true)])
            .collect();
        for src in &all {
            let mut src = src.clone();
            src.restamp();
            for start in &all {
                let mut d = start.clone();
                d.copy_from(&src);
                assert_eq!(d, src, "from {start:?}");
                assert!(d.stamp() == src.stamp() && d.stamp() != 0);
            }
        }
    }

    /// Every way to change extras drops the stamp: a copy changed any way
    /// is never taken for the original by its stamp.
    #[test]
    fn a_changed_copy_is_not_the_same_by_stamp() {
        let mut a = Extras::default();
        a.set("k.a", ExtraValue::U64(1));
        a.set("k.b", ExtraValue::Str("x".into()));
        a.restamp();
        let same = a.clone();
        assert!(same.same_bits(&a) && same.1 == a.1 && a.1 != 0);
        let mut copied = Extras::default();
        copied.copy_from(&a);
        assert_eq!(copied.1, a.1);
        type Change = (&'static str, fn(&mut Extras));
        let changes: Vec<Change> = vec![
            ("set", |x| x.set("k.a", ExtraValue::U64(2))),
            ("set_i64", |x| x.set_i64("k.a", 7)),
            ("set_str", |x| x.set_str("k.b", "y")),
            ("get_mut", |x| {
                if let Some(v) = x.get_mut("k.a") {
                    *v = ExtraValue::U64(3);
                }
            }),
            ("entries_mut", |x| x.entries_mut()[0].1 = ExtraValue::U64(4)),
            ("clear", |x| x.clear()),
            ("remove", |x| {
                x.remove("k.a");
            }),
            ("retain", |x| x.retain(|k, _| k != "k.b")),
            ("copy_from", |x| {
                let mut o = Extras::default();
                o.set("k.z", ExtraValue::Bool(true));
                x.copy_from(&o);
            }),
        ];
        for (name, change) in changes {
            let mut b = a.clone();
            change(&mut b);
            assert_ne!(b, a, "{name} changed nothing");
            assert!(!b.same_bits(&a), "{name}: taken for the original");
        }
        // Stamps differ between extras stamped apart, on any thread.
        let mut c = a.clone();
        c.restamp();
        let other = std::thread::spawn(|| {
            let mut d = Extras::default();
            d.restamp();
            d.1
        });
        let d = other.join().unwrap_or(0);
        assert!(c.1 != a.1 && d != a.1 && d != c.1 && d != 0);
    }

    #[test]
    fn set_i64_sets_replaces_and_keeps_order() {
        let mut x = Extras::default();
        x.set_i64("k.b", 5);
        x.set("k.a", ExtraValue::Str("t".into()));
        x.set("k.c", ExtraValue::Str("u".into()));
        x.set_i64("k.b", -7);
        x.set_i64("k.c", 9);
        let got: Vec<_> = x.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        assert_eq!(
            got,
            [
                ("k.a".to_string(), ExtraValue::Str("t".into())),
                ("k.b".to_string(), ExtraValue::I64(-7)),
                ("k.c".to_string(), ExtraValue::I64(9)),
            ]
        );
    }

    #[test]
    fn key_order_is_text_order() {
        let keys = [
            "",
            "a",
            "ab",
            "kpi.",
            "kpi.beg_raw",
            "kpi.beg_time",
            "kpi.group",
            "kpi.kind",
            "kpi.kind2",
            "dlt.storage_ns",
            "dlt.storage_nt",
            "zzzzzzzzzzzzzzzzz",
            "zzzzzzzzzzzzzzzzza",
            "\u{e9}t\u{e9}",
            "~",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(key_order(a, b), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(key_eq(a, b), a == b, "{a:?} vs {b:?}");
            }
        }
    }
}
