//! On-disk structures of PCP archives v2/v3 (see the spec, sections 1-7).
//! Everything is big-endian; v3 64-bit seconds are stored low word first.

pub const MAGIC_BASE: u32 = 0x5005_2600;
pub const LABEL_V2_LEN: usize = 132;
pub const LABEL_V3_LEN: usize = 808;

pub const TYPE_DESC: i32 = 1;
pub const TYPE_INDOM_V2: i32 = 2;
pub const TYPE_LABEL_V2: i32 = 3;
pub const TYPE_TEXT: i32 = 4;
pub const TYPE_INDOM: i32 = 5;
pub const TYPE_INDOM_DELTA: i32 = 6;
pub const TYPE_LABEL: i32 = 7;

pub const PM_INDOM_NULL: u32 = 0xffff_ffff;
pub const PM_ID_NULL: u32 = 0xffff_ffff;

pub const VALFMT_INSITU: i32 = 0;

pub const PM_TEXT_ONELINE: i32 = 1;
pub const PM_TEXT_HELP: i32 = 2;
pub const PM_TEXT_PMID: i32 = 4;
pub const PM_TEXT_INDOM: i32 = 8;

pub const PM_LABEL_CONTEXT: i32 = 0x01;
pub const PM_LABEL_DOMAIN: i32 = 0x02;
pub const PM_LABEL_INDOM: i32 = 0x04;
pub const PM_LABEL_CLUSTER: i32 = 0x08;
pub const PM_LABEL_ITEM: i32 = 0x10;
pub const PM_LABEL_INSTANCES: i32 = 0x20;

pub const EVENT_FLAG_MISSED: u32 = 0x8000_0000;

/// Header extras keys (archive fidelity data).
pub const X_PID: &str = "pcp.label.pid";
pub const X_FEATURES: &str = "pcp.label.features";
pub const X_ZONEINFO: &str = "pcp.label.zoneinfo";
pub const X_START: &str = "pcp.label.start_ns";
pub const X_VOLUMES: &str = "pcp.volumes";
/// Indom extras: on-disk order of a delta record's entries (instance ids).
pub const X_DELTA_ORDER: &str = "pcp.indom.delta_order";
/// Indom extras: raw bytes of the instance names (in `instances` order) when
/// some name is not valid UTF-8.
pub const X_RAW_NAMES: &str = "pcp.indom.raw_names";
/// Sample extras: pmids whose value blocks carry type byte 0 (v1 conversions).
pub const X_VTYPE0: &str = "pcp.block_vtype0";
/// Sample extras: stored types of the event parameters in the sample
/// (they may differ from the descriptor or have none), as `pmid << 8 | type`.
pub const X_PARAM_TYPES: &str = "pcp.event_param_types";
/// Label-set extras are not available in the model; a negative nlabels is
/// kept nowhere (rare, documented).
#[inline]
pub fn be32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

#[inline]
pub fn bei32(b: &[u8], off: usize) -> Option<i32> {
    be32(b, off).map(|v| v as i32)
}

#[inline]
pub fn be64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

/// Archive format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V2,
    V3,
}

impl Version {
    pub fn ts_len(self) -> usize {
        match self {
            Version::V2 => 8,
            Version::V3 => 12,
        }
    }
    pub fn label_len(self) -> usize {
        match self {
            Version::V2 => LABEL_V2_LEN,
            Version::V3 => LABEL_V3_LEN,
        }
    }
    pub fn number(self) -> u32 {
        match self {
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }
}

/// A timestamp as stored: seconds and nanoseconds (v2: usec * 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Stamp {
    pub sec: i64,
    pub nsec: i32,
}

impl Stamp {
    pub fn ns(self) -> i64 {
        self.sec
            .saturating_mul(1_000_000_000)
            .saturating_add(self.nsec as i64)
    }
    pub fn from_ns(ns: i64) -> Stamp {
        Stamp {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as i32,
        }
    }
}

/// Decode a timestamp at `off` (v2 timeval or v3 timestamp).
pub fn get_stamp(v: Version, b: &[u8], off: usize) -> Option<Stamp> {
    match v {
        Version::V2 => {
            let sec = bei32(b, off)? as i64;
            let usec = bei32(b, off + 4)?;
            Some(Stamp {
                sec,
                nsec: usec.wrapping_mul(1000),
            })
        }
        Version::V3 => {
            let lo = be32(b, off)? as u64;
            let hi = be32(b, off + 4)? as u64;
            let nsec = bei32(b, off + 8)?;
            Some(Stamp {
                sec: ((hi << 32) | lo) as i64,
                nsec,
            })
        }
    }
}

/// The raw v2 sub-second field (usec) is needed for validity checks.
pub fn v2_usec(b: &[u8], off: usize) -> Option<i32> {
    bei32(b, off + 4)
}

pub fn put_stamp(v: Version, out: &mut Vec<u8>, s: Stamp) {
    match v {
        Version::V2 => {
            out.extend_from_slice(&(s.sec as i32).to_be_bytes());
            out.extend_from_slice(&(s.nsec / 1000).to_be_bytes());
        }
        Version::V3 => {
            let u = s.sec as u64;
            out.extend_from_slice(&(u as u32).to_be_bytes());
            out.extend_from_slice(&((u >> 32) as u32).to_be_bytes());
            out.extend_from_slice(&s.nsec.to_be_bytes());
        }
    }
}

/// The label record at the head of every archive file.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLabel {
    pub version: Version,
    pub pid: i32,
    pub start: Stamp,
    pub vol: i32,
    pub features: u32,
    pub hostname: String,
    pub timezone: String,
    pub zoneinfo: String,
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Why a label is rejected.
pub enum LabelError {
    Short,
    BadMagic(u32),
    Version1,
    BadVersion(u32),
    BadLen(i32),
    Trailer(i32, i32),
}

impl std::fmt::Display for LabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelError::Short => write!(f, "label record truncated"),
            LabelError::BadMagic(m) => write!(f, "bad label magic 0x{m:08x} (not a PCP archive)"),
            LabelError::Version1 => write!(
                f,
                "PCP archive format version 1 is not supported (convert it with pmlogextract)"
            ),
            LabelError::BadVersion(v) => write!(f, "unsupported archive format version {v}"),
            LabelError::BadLen(l) => write!(f, "bad label record length {l}"),
            LabelError::Trailer(h, t) => {
                write!(f, "label trailer length {t} does not match header {h}")
            }
        }
    }
}

/// Version from the first 8 bytes (len, magic).
pub fn sniff(b: &[u8]) -> Option<Result<Version, LabelError>> {
    let magic = be32(b, 4)?;
    if magic & 0xffff_ff00 != MAGIC_BASE {
        return Some(Err(LabelError::BadMagic(magic)));
    }
    Some(match magic & 0xff {
        1 => Err(LabelError::Version1),
        2 => Ok(Version::V2),
        3 => Ok(Version::V3),
        v => Err(LabelError::BadVersion(v)),
    })
}

/// Parse a whole label record (including len words).
pub fn parse_label(b: &[u8]) -> Result<LogLabel, LabelError> {
    let len = bei32(b, 0).ok_or(LabelError::Short)?;
    let version = sniff(b).ok_or(LabelError::Short)??;
    if len as usize != version.label_len() {
        return Err(LabelError::BadLen(len));
    }
    if b.len() < version.label_len() {
        return Err(LabelError::Short);
    }
    let trailer = bei32(b, version.label_len() - 4).ok_or(LabelError::Short)?;
    if trailer != len {
        return Err(LabelError::Trailer(len, trailer));
    }
    let pid = bei32(b, 8).ok_or(LabelError::Short)?;
    let start = get_stamp(version, b, 12).ok_or(LabelError::Short)?;
    Ok(match version {
        Version::V2 => LogLabel {
            version,
            pid,
            start,
            vol: bei32(b, 20).ok_or(LabelError::Short)?,
            features: 0,
            hostname: cstr(&b[24..88]),
            timezone: cstr(&b[88..128]),
            zoneinfo: String::new(),
        },
        Version::V3 => LogLabel {
            version,
            pid,
            start,
            vol: bei32(b, 24).ok_or(LabelError::Short)?,
            features: be32(b, 28).ok_or(LabelError::Short)?,
            hostname: cstr(&b[36..292]),
            timezone: cstr(&b[292..548]),
            zoneinfo: cstr(&b[548..804]),
        },
    })
}

fn put_fixed(out: &mut Vec<u8>, s: &str, n: usize) {
    let b = s.as_bytes();
    let k = b.len().min(n - 1);
    out.extend_from_slice(&b[..k]);
    out.resize(out.len() + (n - k), 0);
}

pub fn encode_label(l: &LogLabel) -> Vec<u8> {
    let len = l.version.label_len();
    let mut o = Vec::with_capacity(len);
    o.extend_from_slice(&(len as u32).to_be_bytes());
    o.extend_from_slice(&(MAGIC_BASE | l.version.number()).to_be_bytes());
    o.extend_from_slice(&l.pid.to_be_bytes());
    put_stamp(l.version, &mut o, l.start);
    o.extend_from_slice(&l.vol.to_be_bytes());
    match l.version {
        Version::V2 => {
            put_fixed(&mut o, &l.hostname, 64);
            put_fixed(&mut o, &l.timezone, 40);
        }
        Version::V3 => {
            o.extend_from_slice(&l.features.to_be_bytes());
            o.extend_from_slice(&0u32.to_be_bytes());
            put_fixed(&mut o, &l.hostname, 256);
            put_fixed(&mut o, &l.timezone, 256);
            put_fixed(&mut o, &l.zoneinfo, 256);
        }
    }
    o.extend_from_slice(&(len as u32).to_be_bytes());
    o
}

/// `domain.cluster.item`
pub fn pmid_str(p: u32) -> String {
    if p == PM_ID_NULL {
        return "PM_ID_NULL".into();
    }
    format!("{}.{}.{}", (p >> 22) & 0x1ff, (p >> 10) & 0xfff, p & 0x3ff)
}

/// `domain.serial`
pub fn indom_str(i: u32) -> String {
    if i == PM_INDOM_NULL {
        return "PM_INDOM_NULL".into();
    }
    format!("{}.{}", (i >> 22) & 0x1ff, i & 0x3f_ffff)
}

pub fn pmid_domain(p: u32) -> u32 {
    (p >> 22) & 0x1ff
}
