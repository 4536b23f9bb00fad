//! CTF export, proven by the real babeltrace2: for every corpus input it
//! prints as many events as `polytrace info` counts, with the same values
//! as `polytrace dump --style common` (both normalised below), at the
//! source's absolute times, and without a single warning.
mod common;

use common::pt;
use polytrace::cfmt::fmt_g;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// PCP testsuite archives with event records (PM_TYPE_EVENT and
/// HIGHRES_EVENT values), where installed (required in CI).
fn testsuite_sources() -> Vec<(&'static str, PathBuf)> {
    let Some(ts) = common::pcp_testsuite() else {
        return Vec::new();
    };
    vec![
        ("eventrec", ts.join("archives/eventrec")),
        ("eventrec-old", ts.join("archives/eventrec-old")),
    ]
}

/// What a cycles-only input needs to reach CTF's nanosecond clock: a rate
/// of 1 GHz keeps its cycle counts as the clock values.
fn rate_of(input: &Path) -> &'static [&'static str] {
    if input.to_string_lossy().contains("/timeline/") {
        &["--tsc-hz", "1e9"]
    } else {
        &[]
    }
}

fn to_ctf(input: &Path, out: &Path) -> String {
    common::convert(input, "ctf", out, rate_of(input))
}

/// babeltrace2's pretty text of a trace (warnings on), and its stderr.
fn babeltrace(bt: &Path, dir: &Path, extra: &[&str]) -> (String, String) {
    let o = Command::new(bt)
        .env("TZ", "UTC")
        .args(["--log-level=W", "convert", "--no-delta"])
        .args(extra)
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "babeltrace2 failed on {}: {err}",
        dir.display()
    );
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// What `info` counts that becomes a CTF event: events (framing apart),
/// every sample value, annotations and marks.
fn info_count(input: &Path) -> u64 {
    let (code, out, err) = pt(&["info"], &[input]);
    assert_eq!(code, 0, "{err}");
    let mut n = 0;
    let mut in_values = false;
    for l in out.lines() {
        if !l.starts_with(' ') {
            in_values = l.starts_with("values by metric");
            continue;
        }
        let mut w = l.split_whitespace();
        let (Some(last), Some(first)) = (w.clone().last(), w.next()) else {
            continue;
        };
        let v: u64 = last.parse().unwrap_or(0);
        let counted = ["events", "annotations", "marks"].contains(&first)
            && l.split_whitespace().count() == 2;
        if in_values || counted {
            n += v;
        }
    }
    n
}

// ---------------------------------------------------------------- values

/// A value as both listings show it, reduced to what both can say.
#[derive(Debug, Clone, PartialEq)]
enum V {
    /// A number's text; floats as C `%g` (what babeltrace2 prints).
    Num(String),
    Str(String),
    List(Vec<V>),
    Struct(Vec<(String, V)>),
}

fn render(v: &V, o: &mut String) {
    match v {
        V::Num(n) => o.push_str(n),
        V::Str(s) => o.push_str(&format!("{s:?}")),
        V::List(_) | V::Struct(_) => {
            let (open, close, items): (char, char, Vec<&V>) = match v {
                V::List(xs) => ('[', ']', xs.iter().collect()),
                V::Struct(fs) => ('{', '}', fs.iter().map(|(_, v)| v).collect()),
                _ => unreachable!(),
            };
            o.push(open);
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    o.push_str(", ");
                }
                render(x, o);
            }
            o.push(close);
        }
    }
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    fn new(s: &'a str) -> P<'a> {
        P {
            s: s.as_bytes(),
            i: 0,
        }
    }
    fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: &str) {
        assert!(
            self.eat(t),
            "expected {t:?} at {:?}",
            String::from_utf8_lossy(&self.s[self.i..])
        );
    }
    fn token(&mut self, stop: &[u8]) -> String {
        let st = self.i;
        while self.i < self.s.len() && !stop.contains(&self.s[self.i]) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[st..self.i]).into_owned()
    }
    /// A quoted string with C escapes (babeltrace2) or Rust debug escapes
    /// (the common listing); returns the raw text.
    fn string(&mut self) -> String {
        self.expect("\"");
        let mut raw = Vec::new();
        loop {
            let c = self.peek();
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek();
                    self.i += 1;
                    match e {
                        b'n' => raw.push(b'\n'),
                        b't' => raw.push(b'\t'),
                        b'r' => raw.push(b'\r'),
                        b'a' => raw.push(7),
                        b'b' => raw.push(8),
                        b'f' => raw.push(12),
                        b'v' => raw.push(11),
                        b'0'..=b'7' => {
                            let mut n = (e - b'0') as u32;
                            for _ in 0..2 {
                                match self.peek() {
                                    d @ b'0'..=b'7' => {
                                        n = n * 8 + (d - b'0') as u32;
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            raw.push(n as u8);
                        }
                        b'u' => {
                            self.expect("{");
                            let h = self.token(b"}");
                            self.expect("}");
                            let c = char::from_u32(u32::from_str_radix(&h, 16).unwrap()).unwrap();
                            raw.extend_from_slice(c.to_string().as_bytes());
                        }
                        b'x' => {
                            let h =
                                String::from_utf8_lossy(&self.s[self.i..self.i + 2]).into_owned();
                            self.i += 2;
                            raw.push(u8::from_str_radix(&h, 16).unwrap());
                        }
                        other => raw.push(other),
                    }
                }
                0 => panic!("unterminated string"),
                c => raw.push(c),
            }
        }
        String::from_utf8_lossy(&raw).into_owned()
    }

    /// A value of the common listing (`Value::push_text`).
    fn common_value(&mut self) -> V {
        if self.eat("<") {
            // PCP event records: compared by count (`<N event records>`).
            let t = self.token(b">");
            self.expect(">");
            return V::Num(format!("<{t}>"));
        }
        match self.peek() {
            b'"' => V::Str(self.string()),
            b'[' | b'{' => {
                let close = if self.peek() == b'[' { "]" } else { "}" };
                self.i += 1;
                let mut xs = Vec::new();
                while !self.eat(close) {
                    xs.push(self.common_value());
                    self.eat(", ");
                }
                if close == "]" {
                    V::List(xs)
                } else {
                    V::Struct(xs.into_iter().map(|v| (String::new(), v)).collect())
                }
            }
            _ => {
                let t = self.token(b" ,]}");
                if let Some(hex) = t.strip_prefix("0x") {
                    // Bytes: babeltrace2 shows them as a list of uint8.
                    return V::List(
                        (0..hex.len() / 2)
                            .map(|i| {
                                V::Num(
                                    u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                                        .unwrap()
                                        .to_string(),
                                )
                            })
                            .collect(),
                    );
                }
                let is_float =
                    t.contains(['.', 'e', 'E']) || t.contains("inf") || t.contains("NaN");
                if is_float {
                    V::Num(fmt_g(t.parse::<f64>().unwrap(), 6))
                } else {
                    V::Num(t)
                }
            }
        }
    }

    /// A value of babeltrace2's pretty text.
    fn bt_value(&mut self) -> V {
        match self.peek() {
            b'"' => V::Str(self.string()),
            b'{' => {
                self.expect("{ ");
                let mut fs = Vec::new();
                if self.eat("}") {
                    return V::Struct(fs);
                }
                // A variant shows its chosen option's value bare: `{ 5 }`.
                if matches!(self.peek(), b'"' | b'{' | b'[' | b'(' | b'-' | b'0'..=b'9') {
                    let v = self.bt_value();
                    self.expect(" }");
                    return v;
                }
                loop {
                    let name = self.token(b" ");
                    self.expect(" = ");
                    fs.push((name, self.bt_value()));
                    if self.eat(" }") {
                        break;
                    }
                    self.expect(", ");
                }
                let fs = drop_lengths(fs);
                if let [(n, V::List(recs))] = fs.as_slice() {
                    if n == "records" {
                        return V::Num(format!("<{} event records>", recs.len()));
                    }
                }
                V::Struct(fs)
            }
            b'[' => {
                self.expect("[ ");
                let mut xs = Vec::new();
                if self.eat("]") {
                    return V::List(xs);
                }
                loop {
                    self.expect("[");
                    self.token(b"]");
                    self.expect("] = ");
                    xs.push(self.bt_value());
                    if self.eat(" ]") {
                        break;
                    }
                    self.expect(", ");
                }
                V::List(xs)
            }
            b'(' => {
                // Enum: ( "LABEL" : container = N ) or ( <unknown> : … ).
                self.token(b":");
                self.expect(": container = ");
                let n = self.token(b" ");
                self.expect(" )");
                V::Num(n)
            }
            _ => V::Num(self.token(b" ,]}")),
        }
    }
}

/// A generated `X_length` member just before the sequence `X` is not a
/// model field.
fn drop_lengths(fs: Vec<(String, V)>) -> Vec<(String, V)> {
    let mut out: Vec<(String, V)> = Vec::new();
    for (n, v) in fs {
        if let Some((pn, V::Num(_))) = out.last() {
            if *pn == format!("{n}_length") && matches!(v, V::List(_)) {
                out.pop();
            }
        }
        out.push((n, v));
    }
    out
}

/// One event as both sides show it: its text without the strings (the
/// key), and the strings apart (see `compare`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rec {
    key: String,
    strs: Vec<String>,
}

fn strip_strings(v: &V, strs: &mut Vec<String>) -> V {
    match v {
        V::Str(s) => {
            strs.push(s.clone());
            V::Num("S".into())
        }
        V::List(xs) => V::List(xs.iter().map(|x| strip_strings(x, strs)).collect()),
        V::Struct(fs) => V::Struct(
            fs.iter()
                .map(|(n, x)| (n.clone(), strip_strings(x, strs)))
                .collect(),
        ),
        V::Num(_) => v.clone(),
    }
}

fn record(time: &str, name: &str, cpu: Option<&str>, fields: &[(String, V)]) -> Rec {
    let mut s = format!("{time} {name} cpu={}", cpu.unwrap_or("-"));
    let mut strs = Vec::new();
    for (n, v) in fields {
        s.push(' ');
        s.push_str(n);
        s.push('=');
        render(&strip_strings(v, &mut strs), &mut s);
    }
    Rec { key: s, strs }
}

/// True when babeltrace2 has the 2.0 library bug that shows an empty text
/// field with the stale content of a recycled field object (the bytes
/// are an empty string; see docs/ctf.md).
fn stale_empty_strings(bt: &Path) -> bool {
    let o = Command::new(bt).arg("--version").output().unwrap();
    String::from_utf8_lossy(&o.stdout).contains("Babeltrace 2.0.")
}

/// Match babeltrace2's records against the expected ones: equal keys
/// (everything but strings) and equal strings, except that an expected
/// empty string may show as another string where `stale` (counted).
fn compare(name: &str, mut want: Vec<Rec>, mut got: Vec<Rec>, stale: bool) -> usize {
    want.sort();
    got.sort();
    assert_eq!(want.len(), got.len(), "{name}: record counts");
    let keys = |v: &[Rec]| {
        v.iter()
            .map(|r| r.key.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Some(d) = common::first_diff(&keys(&want), &keys(&got)) {
        panic!("{name}: babeltrace2 and the common listing differ at {d}");
    }
    let mut tolerated = 0;
    let mut i = 0;
    while i < want.len() {
        let mut j = i;
        while j < want.len() && want[j].key == want[i].key {
            j += 1;
        }
        // Within one key, pair each expected record with a shown one.
        let mut pool: Vec<&Rec> = got[i..j].iter().collect();
        for w in &want[i..j] {
            let pos = pool.iter().position(|g| g.strs == w.strs).or_else(|| {
                pool.iter().position(|g| {
                    stale
                        && g.strs.len() == w.strs.len()
                        && g.strs
                            .iter()
                            .zip(&w.strs)
                            .all(|(a, b)| a == b || b.is_empty())
                })
            });
            match pos {
                Some(p) => {
                    if pool[p].strs != w.strs {
                        tolerated += 1;
                    }
                    pool.remove(p);
                }
                None => panic!(
                    "{name}: no babeltrace2 event matches {} {:?} (candidates {:?})",
                    w.key, w.strs, pool
                ),
            }
        }
        i = j;
    }
    tolerated
}

/// babeltrace2 `--clock-seconds` lines as normalised records.
fn bt_records(text: &str, host: Option<&str>) -> Vec<Rec> {
    let mut out = Vec::new();
    for l in text.lines() {
        let l = l.strip_prefix('[').expect(l);
        let (time, rest) = l.split_once("] ").expect(l);
        let rest = match host {
            Some(h) => rest
                .strip_prefix(h)
                .and_then(|r| r.strip_prefix(' '))
                .expect(l),
            None => rest,
        };
        let (name, groups) = rest.split_once(": {").expect(l);
        let groups_text = format!("{{{groups}");
        let mut p2 = P::new(&groups_text);
        let mut cpu = None;
        let mut payload = Vec::new();
        loop {
            let V::Struct(fs) = p2.bt_value() else {
                panic!("{l}")
            };
            if fs.iter().any(|(n, _)| n == "cpu_id") {
                if let Some((_, V::Num(c))) = fs.first() {
                    cpu = Some(c.clone());
                }
            } else if fs.iter().any(|(n, _)| n == "raw_clock") {
                // The event context: the raw clock, not in the common listing.
            } else {
                payload = fs;
            }
            if !p2.eat(", ") {
                break;
            }
        }
        assert_eq!(p2.i, groups_text.len(), "trailing text in {l}");
        out.push(record(time, name, cpu.as_deref(), &payload));
    }
    out
}

/// `dump --style common` as the records the CTF writer makes of it.
fn common_records(text: &str) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut by_name: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut members: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    // Type names may hold spaces (timeline formats): known from `type` lines.
    let mut type_names: Vec<String> = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        if let Some(t) = l.strip_prefix("type ") {
            let t = t.split_once(' ').unwrap().1;
            let t = &t[..t.rfind(" (").unwrap()];
            type_names.push(t.to_string());
            type_names.sort_by_key(|n| std::cmp::Reverse(n.len()));
            continue;
        }
        if let Some(m) = l.strip_prefix("metric ") {
            let w: Vec<&str> = m.split(' ').collect();
            let name = w[1].split(',').next().unwrap().to_string();
            let indom = w
                .iter()
                .find_map(|x| x.strip_prefix("indom="))
                .map(str::to_string);
            by_name.insert(name, (w[0].to_string(), indom));
            continue;
        }
        let Some((time, rest)) = l.split_once(' ') else {
            continue;
        };
        if let Some(r) = rest.strip_prefix("indom ") {
            let w: Vec<&str> = r.splitn(4, ' ').collect();
            let (id, kind) = (w[0], w[1]);
            let tail = w
                .get(3)
                .and_then(|t| t.strip_prefix("instances"))
                .unwrap_or("");
            let m = members.entry(id.to_string()).or_default();
            if kind == "Full" {
                m.clear();
            }
            let mut p = P::new(tail);
            while p.i < p.s.len() {
                p.eat(" ");
                if p.eat("[") {
                    let inst = p.token(b" ");
                    p.expect(" ");
                    let name = p.string();
                    p.expect("]");
                    m.insert(inst, name);
                } else if p.eat("-") {
                    let inst = p.token(b" ");
                    m.remove(&inst);
                } else {
                    break;
                }
            }
            continue;
        }
        if let Some(r) = rest.strip_prefix("event ") {
            let name = type_names
                .iter()
                .find(|n| {
                    r.starts_with(n.as_str())
                        && matches!(r.as_bytes().get(n.len()), None | Some(b' '))
                })
                .expect(l);
            let mut r = r[name.len()..].trim_start();
            let name = name.strip_prefix('.').unwrap_or(name);
            let mut cpu = None;
            if let Some(x) = r.strip_prefix("cpu=") {
                let (c, t) = x.split_once(' ').map_or((x, ""), |y| y);
                cpu = Some(c);
                r = t;
            }
            if let Some(x) = r.strip_prefix("stream=") {
                r = x.split_once(' ').map_or("", |y| y.1);
            }
            let mut p = P::new(r);
            let mut fields = Vec::new();
            while p.i < p.s.len() {
                let n = p.token(b"=");
                p.expect("=");
                fields.push((n, p.common_value()));
                p.eat(" ");
            }
            out.push(record(time, name, cpu, &fields));
            continue;
        }
        if let Some(r) = rest.strip_prefix("sample") {
            let mut p = P::new(r);
            while p.eat(" ") {
                let n = p.token(b"[=");
                let inst = if p.eat("[") {
                    let i = p.token(b"]");
                    p.expect("]");
                    Some(i)
                } else {
                    None
                };
                p.expect("=");
                let (id, indom) = by_name.get(&n).cloned().expect(&n);
                if p.eat("ERR(") {
                    let code = p.token(b")");
                    p.expect(")");
                    let f = vec![
                        ("metric".to_string(), V::Str(n.clone())),
                        ("pmid".to_string(), V::Num(id)),
                        ("code".to_string(), V::Num(code)),
                    ];
                    out.push(record(time, "polytrace.metric_error", None, &f));
                    continue;
                }
                let v = p.common_value();
                let mut f = Vec::new();
                if let Some(d) = &indom {
                    let i = inst.clone().unwrap_or_else(|| "-1".into());
                    let iname = members
                        .get(d)
                        .and_then(|m| m.get(&i))
                        .cloned()
                        .unwrap_or_default();
                    f.push(("instance".to_string(), V::Num(i)));
                    f.push(("instance_name".to_string(), V::Str(iname)));
                }
                f.push(("value".to_string(), v));
                out.push(record(time, &format!("metric.{n}"), None, &f));
            }
            continue;
        }
        if let Some(r) = rest.strip_prefix("note ") {
            let mut p = P::new(r);
            let f = vec![("text".to_string(), V::Str(p.string()))];
            out.push(record(time, "polytrace.annotation", None, &f));
            continue;
        }
        if rest == "mark" {
            out.push(record(time, "polytrace.mark", None, &[]));
        }
    }
    out
}

fn host_of(input: &Path) -> Option<String> {
    let (_, out, _) = pt(&["info"], &[input]);
    out.lines()
        .find_map(|l| l.strip_prefix("host:"))
        .map(|h| h.trim().to_string())
}

#[test]
fn babeltrace2_reads_every_corpus_input_as_polytrace_does() {
    let Some(bt) = common::peer("babeltrace2") else {
        return;
    };
    let stale = stale_empty_strings(&bt);
    let dir = tempfile::tempdir().unwrap();
    for (name, input) in common::sources().into_iter().chain(testsuite_sources()) {
        let out = dir.path().join(format!("{name}.ctf"));
        to_ctf(&input, &out);
        let (text, err) = babeltrace(&bt, &out, &["--clock-seconds"]);
        assert!(
            err.is_empty(),
            "{name}: babeltrace2 printed on stderr:\n{err}"
        );
        let n = text.lines().count() as u64;
        assert_eq!(
            n,
            info_count(&input),
            "{name}: events printed by babeltrace2"
        );
        let got = bt_records(&text, host_of(&input).as_deref());
        // The stream as the CTF writer sees it: without framing, where the
        // input has any (elsewhere --no-framing is refused as a no-op).
        let rate = rate_of(&input);
        let (mut code, mut dump, mut derr) = pt(
            &[&["dump", "--style", "common", "--no-framing"], rate].concat(),
            &[&input],
        );
        if code == 2 && derr.contains("--no-framing changes nothing") {
            (code, dump, derr) = pt(&[&["dump", "--style", "common"], rate].concat(), &[&input]);
        }
        assert_eq!(code, 0, "{derr}");
        let want = common_records(&dump);
        let t = compare(name, want, got, stale);
        if t > 0 {
            eprintln!("{name}: {t} empty strings shown stale by babeltrace2 2.0");
        }
    }
}

#[test]
fn smp_example_gives_173151_events_at_their_absolute_times() {
    let Some((bt, dir)) = common::peer_and_scratch("babeltrace2") else {
        return;
    };
    let out = dir.path().join("smp.ctf");
    let err = to_ctf(&common::corpus().join("ltt/smp_example"), &out);
    assert!(err.contains("173151 events"), "{err}");
    // 173,157 events less the 6 LTT framing events (block start/end, heartbeats).
    let (text, _) = babeltrace(&bt, &out, &["--clock-date"]);
    assert_eq!(text.lines().count(), 173_151);
    // The first data event of the reference listing, as a UTC date.
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("[2016-07-04 13:11:43.000320682] thales.casi.polymtl.ca core.syscall_exit: { cpu_id = 0 }"),
        "{first}"
    );
    let meta = std::fs::read_to_string(out.join("metadata")).unwrap();
    assert!(meta.contains("absolute = true;"), "{meta}");
    // One stream per CPU.
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["cpu0", "cpu1", "metadata"]);
}

#[test]
fn cycle_and_relative_sources_are_not_given_a_date() {
    let dir = tempfile::tempdir().unwrap();
    let c = common::corpus();
    // Cycles need a rate (CTF's clock counts nanoseconds; without one the
    // conversion is refused: tests/honest_options_rest.rs).
    for (input, words) in [
        (
            c.join("timeline/a2-small-wrapped.dat"),
            "cycle counter, converted to nanoseconds at",
        ),
        (c.join("kpi/kpi-capture.convert-a.txt"), "Unix epoch"),
    ] {
        let out = dir.path().join(input.file_name().unwrap());
        to_ctf(&input, &out);
        let meta = std::fs::read_to_string(out.join("metadata")).unwrap();
        assert!(meta.contains(words), "{meta}");
        assert!(meta.contains("offset_s = 0;") && meta.contains("offset = 0;"));
    }
    let bare = dir.path().join("bare.kpi");
    std::fs::write(&bare, "NEW 1;0;/bin/a\nSTP 1\n").unwrap();
    let out = dir.path().join("bare.ctf");
    to_ctf(&bare, &out);
    let meta = std::fs::read_to_string(out.join("metadata")).unwrap();
    assert!(meta.contains("absolute = false;"), "{meta}");
    assert!(meta.contains("is not a date"), "{meta}");
}

/// Every model field type, escaped names, every metric value type, error
/// codes, marks, annotations and an item that goes back in time, written
/// through the library and read by babeltrace2.
#[test]
fn every_field_and_value_type_reads_back_in_babeltrace2() {
    use polytrace::model::*;
    use polytrace::output::OutTarget;
    use std::sync::Arc;
    let Some(bt) = common::peer("babeltrace2") else {
        return;
    };
    let f = |n: &str, t: FieldType| Field::new(n, t);
    let u = |n| FieldType::Uint(n);
    let fields = vec![
        f("i8", FieldType::Int(1)),
        f("u16", u(2)),
        f("i64", FieldType::Int(8)),
        f("f32", FieldType::Float(4)),
        f("f64", FieldType::Float(8)),
        f("s", FieldType::String),
        f("raw", FieldType::Bytes),
        f(
            "e",
            FieldType::Enum {
                size: 1,
                labels: vec![(0, "zero".into()), (2, "two \"2\"".into())],
            },
        ),
        f(
            "arr",
            FieldType::Array {
                len: 3,
                elem: Box::new(u(2)),
            },
        ),
        f(
            "seq",
            FieldType::Sequence {
                len: Box::new(u(1)),
                elem: Box::new(FieldType::Int(4)),
            },
        ),
        f(
            "st",
            FieldType::Struct(vec![f("a", u(1)), f("b", FieldType::String)]),
        ),
        f(
            "un",
            FieldType::Union(vec![f("x", u(4)), f("y", FieldType::Int(4))]),
        ),
        f(
            "aos",
            FieldType::Array {
                len: 2,
                elem: Box::new(FieldType::Sequence {
                    len: Box::new(u(1)),
                    elem: Box::new(u(1)),
                }),
            },
        ),
        f("event", u(1)),
        f("$n", u(1)),
        f("%n", u(1)),
        f("_x", u(1)),
        f("2nd", u(1)),
    ];
    let et = EventType::new(7, "fac", "all types", fields);
    let vals = |k: i64| {
        vec![
            Value::I64(-k),
            Value::U64(65535),
            Value::I64(i64::MIN + k),
            Value::F32(0.5),
            Value::F64(-1.25e-3),
            Value::Str(format!("x\"y\\z\t{k}")),
            Value::Bytes(vec![1, 255]),
            Value::Enum(k),
            Value::List(vec![Value::U64(1), Value::U64(2), Value::U64(3)]),
            Value::List(vec![Value::I64(-4), Value::I64(5)]),
            Value::Struct(vec![Value::U64(9), Value::Str("b".into())]),
            Value::Union(vec![Value::U64(4294967295), Value::I64(-1)]),
            Value::List(vec![Value::List(vec![Value::U64(7)]), Value::List(vec![])]),
            Value::U64(1),
            Value::U64(2),
            Value::U64(3),
            Value::U64(4),
            Value::U64(5),
        ]
    };
    let ev = |t: i64, cpu: Option<u32>, k: i64| {
        Item::Event(Event {
            time: Timestamp(t),
            raw_clock: (k == 2).then_some(42),
            type_id: 7,
            cpu,
            stream: None,
            fields: vals(k),
            extras: Extras::default(),
        })
    };
    let mut m_i32 = MetricDesc::new(1, "m.i32", ValueType::I32, Semantics::Instant, Units::NONE);
    m_i32.indom = Some(5);
    let metrics = [
        m_i32,
        MetricDesc::new(2, "m.f64", ValueType::F64, Semantics::Instant, Units::NONE),
        MetricDesc::new(
            3,
            "m.str",
            ValueType::String,
            Semantics::Discrete,
            Units::NONE,
        ),
        MetricDesc::new(
            4,
            "m.agg",
            ValueType::Aggregate,
            Semantics::Discrete,
            Units::NONE,
        ),
        MetricDesc::new(
            5,
            "m.ev",
            ValueType::Event,
            Semantics::Discrete,
            Units::NONE,
        ),
    ];
    let t0 = 1_700_000_000_000_000_000i64;
    let mut items = vec![Item::EventType(Arc::new(et))];
    items.extend(metrics.iter().map(|m| Item::Metric(Arc::new(m.clone()))));
    items.push(Item::Indom(IndomUpdate {
        time: Timestamp(t0),
        id: 5,
        kind: IndomKind::Full,
        instances: vec![Instance {
            id: 3,
            name: "three".into(),
        }],
        removed: vec![],
        extras: Extras::default(),
    }));
    items.push(ev(t0 + 10, Some(1), 2));
    // Earlier than the previous event of cpu 1: a spill stream takes it.
    items.push(ev(t0 + 5, Some(1), 0));
    items.push(ev(t0 + 20, None, 2));
    items.push(Item::Sample(Sample {
        time: Timestamp(t0 + 30),
        raw_clock: None,
        metrics: vec![
            MetricValues {
                metric: 1,
                values: Ok(vec![(3, Value::I64(-7)), (4, Value::I64(8))]),
            },
            MetricValues {
                metric: 2,
                values: Ok(vec![(PM_IN_NULL, Value::F64(2.5))]),
            },
            MetricValues {
                metric: 3,
                values: Ok(vec![(PM_IN_NULL, Value::Str("s v".into()))]),
            },
            MetricValues {
                metric: 4,
                values: Ok(vec![(PM_IN_NULL, Value::Bytes(vec![0, 9]))]),
            },
            MetricValues {
                metric: 5,
                values: Ok(vec![(
                    PM_IN_NULL,
                    Value::Events(vec![EventRecord {
                        time: Timestamp(t0 + 29),
                        flags: 1,
                        params: vec![
                            EventParam {
                                metric: 2,
                                value: Value::F64(0.5),
                            },
                            EventParam {
                                metric: 3,
                                value: Value::Str("p".into()),
                            },
                            EventParam {
                                metric: 1,
                                value: Value::I64(-3),
                            },
                        ],
                    }]),
                )]),
            },
            MetricValues {
                metric: 2,
                values: Err(-12345),
            },
        ],
        extras: Extras::default(),
    }));
    items.push(Item::Mark(Mark {
        time: Timestamp(t0 + 40),
        extras: Extras::default(),
    }));
    items.push(Item::Annotation(Annotation {
        time: Timestamp(t0 + 50),
        raw_clock: None,
        text: "note".into(),
        extras: Extras::default(),
    }));
    let mut header = Header::new(FormatId::Ltt, "test");
    header.host = Some("h".into());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.ctf");
    let fmt = polytrace::formats::get(FormatId::Ctf);
    let mut w = fmt
        .create(&OutTarget::Path(out.clone()), &header, &Default::default())
        .unwrap();
    for it in &items {
        w.write_item(it).unwrap();
    }
    let loss = w.finish().unwrap();
    assert_eq!(loss.written.get("events"), Some(&3), "{loss}");
    assert_eq!(loss.written.get("sample values"), Some(&6), "{loss}");
    assert_eq!(loss.written.get("metric error codes"), Some(&1), "{loss}");
    assert!(loss.dropped.is_empty(), "{loss}");
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["cpu1", "cpu1.spill1", "main", "metadata", "metrics"]
    );
    let (text, err) = babeltrace(&bt, &out, &["--clock-seconds"]);
    assert!(err.is_empty(), "{err}");
    let want = include_str!("../testdata/ctf/all-types.babeltrace2.txt");
    if common::bless() {
        std::fs::write(
            common::testdata().join("ctf/all-types.babeltrace2.txt"),
            &text,
        )
        .unwrap();
        return;
    }
    if let Some(d) = common::first_diff(want, &text) {
        panic!("babeltrace2's listing differs from testdata/ctf/all-types.babeltrace2.txt at {d}");
    }
}

#[test]
fn nothing_to_write_is_an_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("empty.ctf");
    let to_ctf = ["convert", "--tsc-hz", "1e9", "--to", "ctf", "-o"];
    let empty = common::corpus().join("timeline/a2-empty.dat");
    let err = common::pt_exit(2, &to_ctf, &[&out, &empty]);
    common::assert_has(&err, "nothing to write");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A directory format never goes to stdout.
    let small = common::corpus().join("timeline/a2-small-wrapped.dat");
    common::pt_exit(2, &to_ctf, &[Path::new("-"), &small]);
}
