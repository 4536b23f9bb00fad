//! Timestamps: nanoseconds since the Unix epoch, plus how to read them.

use std::fmt;

/// Nanoseconds since the Unix epoch (or since an unknown origin when the
/// header's [`TimeBase`] says the time is relative or cycles-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);
    pub fn from_secs_nanos(sec: i64, nsec: u32) -> Timestamp {
        Timestamp(
            sec.saturating_mul(1_000_000_000)
                .saturating_add(nsec as i64),
        )
    }
    pub fn from_secs_micros(sec: i64, usec: u32) -> Timestamp {
        Timestamp::from_secs_nanos(sec, usec.saturating_mul(1000))
    }
    pub fn secs(self) -> i64 {
        self.0.div_euclid(1_000_000_000)
    }
    pub fn subsec_nanos(self) -> u32 {
        self.0.rem_euclid(1_000_000_000) as u32
    }
    pub fn nanos(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    /// `SECONDS.NNNNNNNNN`, exact.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.secs(), self.subsec_nanos())
    }
}

/// How the timestamps of a stream relate to wall-clock time.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeBase {
    /// Real epoch time.
    Absolute,
    /// Time since an unknown origin (bare KPI lines: 0 = first group).
    Relative { origin: String },
    /// Only a cycle counter is known; timestamps are cycles converted with
    /// `hz` (if given) and placed after `anchor` (if given), else at 0.
    Cycles {
        hz: Option<f64>,
        anchor: Option<Timestamp>,
    },
}

impl TimeBase {
    pub fn is_absolute(&self) -> bool {
        matches!(self, TimeBase::Absolute)
    }
    pub fn describe(&self) -> String {
        match self {
            TimeBase::Absolute => "absolute (epoch)".into(),
            TimeBase::Relative { origin } => format!("relative to {origin}"),
            TimeBase::Cycles { hz, anchor } => {
                let mut s = "cycles only".to_string();
                if let Some(hz) = hz {
                    s += &format!(", {hz} Hz");
                }
                if let Some(a) = anchor {
                    s += &format!(", anchored at {a}");
                }
                s
            }
        }
    }
}
