//! `info/system.xml` (spec 5.12) and `info/bookmarks.xml` (spec 5.14).

use super::eventdefs::Arch;
use super::xml::{self, decode_entities, escape, Elem, Node};

/// Attribute order of the design (and of the writer).
pub const ATTR_ORDER: [&str; 15] = [
    "node_name",
    "domainname",
    "cpu",
    "arch_size",
    "endian",
    "kernel_name",
    "kernel_release",
    "kernel_version",
    "machine",
    "processor",
    "hardware_platform",
    "operating_system",
    "ltt_major_version",
    "ltt_minor_version",
    "ltt_block_size",
];

#[derive(Debug, Clone, PartialEq)]
pub struct SystemInfo {
    /// Every attribute in file order, values entity-decoded.
    pub attrs: Vec<(String, String)>,
    pub description: String,
    pub arch: Arch,
    pub big_endian: bool,
    pub block_size: u64,
    pub cpu: Option<u32>,
}

impl SystemInfo {
    pub fn get(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The top-level element `name` of a parsed file.
fn top_elem<'a>(nodes: &'a [Node], name: &str) -> Result<&'a Elem, (usize, String)> {
    let found = nodes.iter().find_map(|n| match n {
        Node::Elem(e) if e.name == name => Some(e),
        _ => None,
    });
    found.ok_or((0, format!("no <{name}> element")))
}

/// Parse system.xml. Errors carry a byte offset.
pub fn parse(src: &[u8]) -> Result<SystemInfo, (usize, String)> {
    let nodes = xml::parse(src).map_err(|e| (e.offset, e.msg))?;
    let sys = top_elem(&nodes, "system")?;
    let attrs: Vec<(String, String)> = sys
        .attrs
        .iter()
        .map(|a| (a.name.clone(), decode_entities(&a.value)))
        .collect();
    let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let big_endian = match get("endian").map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if s == "big" || s == "big_endian" => true,
        Some(s) if s == "little" || s == "little_endian" => false,
        Some(s) => return Err((sys.offset, format!("unknown endian {s:?}"))),
        None => return Err((sys.offset, "system.xml has no endian".into())),
    };
    let bs = get("ltt_block_size").ok_or((sys.offset, "no ltt_block_size".to_string()))?;
    let block_size: u64 = bs
        .trim()
        .parse()
        .map_err(|_| (sys.offset, format!("bad ltt_block_size {bs:?}")))?;
    if block_size < super::layout::MIN_BLOCK as u64 || block_size > u32::MAX as u64 {
        return Err((
            sys.offset,
            format!("ltt_block_size {block_size} out of range (56..2^32)"),
        ));
    }
    let arch = get("arch_size")
        .map(|s| Arch::parse(&s))
        .unwrap_or(Arch::Unknown);
    let cpu = get("cpu").and_then(|s| s.trim().parse().ok());
    let description = decode_entities(sys.text().trim());
    Ok(SystemInfo {
        attrs,
        description,
        arch,
        big_endian,
        block_size,
        cpu,
    })
}

/// Write system.xml in the design's attribute order, all values quoted.
pub fn write(values: &dyn Fn(&str) -> String, description: &str) -> Vec<u8> {
    let mut s = String::from("<system \n");
    for k in ATTR_ORDER {
        s += &format!("{k}=\"{}\" \n", escape(&values(k)));
    }
    s += ">\n";
    if !description.is_empty() {
        s += &escape(description);
        s += "\n";
    }
    s += "</system>\n";
    s.into_bytes()
}

/// Check that bookmarks.xml is well-formed in the tolerant dialect (it is
/// kept as bytes and re-emitted unchanged).
pub fn check_bookmarks(src: &[u8]) -> Result<usize, (usize, String)> {
    let nodes = xml::parse(src).map_err(|e| (e.offset, e.msg))?;
    let bm = top_elem(&nodes, "bookmarks")?;
    let mut n = 0;
    for l in bm.elems() {
        if l.name != "location" {
            return Err((l.offset, format!("unexpected <{}> in bookmarks", l.name)));
        }
        let has = |k: &str| l.attr(k).is_some();
        let ok = has("time")
            || (has("start_time") && has("end_time"))
            || has("cycle")
            || (has("start_cycle") && has("end_cycle"));
        if !ok {
            return Err((l.offset, "location without a time or cycle".into()));
        }
        for k in ["time", "start_time", "end_time"] {
            if let Some(v) = l.attr_str(k) {
                if parse_time(v).is_none() {
                    return Err((l.offset, format!("bad {k} {v:?}")));
                }
            }
        }
        for k in ["cycle", "start_cycle", "end_cycle"] {
            if let Some(v) = l.attr_str(k) {
                if v.trim().parse::<u64>().is_err() {
                    return Err((l.offset, format!("bad {k} {v:?}")));
                }
            }
        }
        n += 1;
    }
    Ok(n)
}

/// Decimal seconds with up to 9 fraction digits → ns.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let (i, f) = s.split_once('.').unwrap_or((s, ""));
    if f.len() > 9 || i.is_empty() || !i.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sec: i64 = i.parse().ok()?;
    let mut ns: i64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    for _ in f.len()..9 {
        ns *= 10;
    }
    sec.checked_mul(1_000_000_000)?.checked_add(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_endian_spellings_and_bare_values() {
        let s = parse(b"<system cpu=4 endian=big arch_size=LP64 ltt_block_size=100>hi</system>")
            .unwrap();
        assert!(s.big_endian);
        assert_eq!(s.cpu, Some(4));
        assert_eq!(s.description, "hi");
        let s = parse(b"<system endian=\"LITTLE_ENDIAN\" ltt_block_size=\"100\"/>").unwrap();
        assert!(!s.big_endian);
        assert_eq!(s.arch, Arch::Unknown);
    }

    #[test]
    fn bookmarks_forms() {
        let b = br#"<bookmarks><location name="a" time="1.5">x</location><location name=b cpu=1 start_time=1 end_time=2.000000001/><location name=c cycle=5/><location name=d start_cycle=1 end_cycle=9/></bookmarks>"#;
        assert_eq!(check_bookmarks(b).unwrap(), 4);
        assert!(check_bookmarks(b"<bookmarks><location name=a/></bookmarks>").is_err());
        assert_eq!(parse_time("1.5"), Some(1_500_000_000));
    }
}
