//! DLT message filters (`--ecu`, `--app`, `--ctx`, `--level`, `--grep`,
//! `--lifecycle`) on every verb, checked against the real `dlt-convert -a`
//! listing filtered here, by the ids and level read from its own lines.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const LEVELS: [&str; 6] = ["fatal", "error", "warn", "info", "debug", "verbose"];

/// The captures under testdata/dlt that dlt-convert lists (a golden listing
/// beside each).
fn captures() -> Vec<PathBuf> {
    common::files_below(&common::testdata().join("dlt"), &|p| {
        common::has_ext(p, "dlt") && p.with_extension("dlt-convert-a.txt").exists()
    })
}

/// What a `dlt-convert -a` line says of its message: ECU, APID, CTID (None
/// for `----`, dlt-convert's padding `-` taken off), and the log level's
/// rank (1 fatal … 6 verbose) for log messages.
struct Line {
    text: String,
    ecu: String,
    app: Option<String>,
    ctx: Option<String>,
    level: Option<usize>,
}

fn id(tok: &str) -> Option<String> {
    (tok != "----").then(|| tok.trim_end_matches('-').to_string())
}

fn parse(listing: &[u8]) -> Vec<Line> {
    String::from_utf8_lossy(listing)
        .lines()
        .map(|l| {
            // index, date, time, tmsp, mcnt, ecu, apid, ctid, type, subtype
            let t: Vec<&str> = l.split_whitespace().collect();
            Line {
                text: l.to_string(),
                ecu: t[5].trim_end_matches('-').to_string(),
                app: id(t[6]),
                ctx: id(t[7]),
                level: (t[8] == "log")
                    .then(|| LEVELS.iter().position(|n| *n == t[9]).map(|i| i + 1))
                    .flatten(),
            }
        })
        .collect()
}

fn dump(p: &Path, args: &[&str]) -> (i32, Vec<u8>, String) {
    let o = Command::new(common::bin())
        .env("TZ", "UTC")
        .arg("dump")
        .args(args)
        .arg(p)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Which dlt-convert lines a filter keeps, decided here from the line.
type Keep = Box<dyn Fn(&Line) -> bool>;

fn expect(lines: &[Line], keep: impl Fn(&Line) -> bool) -> String {
    let mut s = String::new();
    for l in lines.iter().filter(|l| keep(l)) {
        s.push_str(&l.text);
        s.push('\n');
    }
    s
}

/// The values, sorted, each once.
fn distinct(v: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = v.collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn filtered_dumps_are_the_dlt_convert_lines_of_the_matching_messages() {
    let mut compared = 0;
    let mut nonempty = 0;
    for p in captures() {
        let Some(theirs) = common::dlt_convert_a(&p) else {
            return;
        };
        let lines = parse(&theirs);
        let mut cases: Vec<(Vec<String>, Keep)> = Vec::new();
        let apps = distinct(lines.iter().filter_map(|l| l.app.clone()));
        for a in apps.iter().take(4) {
            let a2 = a.clone();
            cases.push((
                vec!["--app".into(), a.clone()],
                Box::new(move |l: &Line| l.app.as_deref() == Some(&a2)),
            ));
        }
        // An APID and CTID pair, as `--event APID.CTID` names it.
        if let Some(l) = lines.iter().find(|l| l.app.is_some() && l.ctx.is_some()) {
            let (a, c) = (l.app.clone().unwrap(), l.ctx.clone().unwrap());
            let (a2, c2) = (a.clone(), c.clone());
            cases.push((
                vec!["--app".into(), a, "--ctx".into(), c],
                Box::new(move |l: &Line| {
                    l.app.as_deref() == Some(&a2) && l.ctx.as_deref() == Some(&c2)
                }),
            ));
        }
        // A comma list and a glob.
        if apps.len() >= 2 {
            let (a, b) = (apps[0].clone(), apps[1].clone());
            let (a2, b2) = (a.clone(), b.clone());
            cases.push((
                vec!["--app".into(), format!("{a},{b}")],
                Box::new(move |l: &Line| {
                    l.app.as_deref() == Some(&a2) || l.app.as_deref() == Some(&b2)
                }),
            ));
        }
        if let Some(a) = apps.first() {
            let first = a[..1].to_string();
            let f2 = first.clone();
            cases.push((
                vec!["--app".into(), format!("{first}*")],
                Box::new(move |l: &Line| l.app.as_ref().is_some_and(|a| a.starts_with(&f2))),
            ));
        }
        let ecus = distinct(lines.iter().map(|l| l.ecu.clone()));
        for e in ecus.into_iter().take(3) {
            cases.push((
                vec!["--ecu".into(), e.clone()],
                Box::new(move |l: &Line| l.ecu == e),
            ));
        }
        for (rank, name) in LEVELS.iter().enumerate() {
            cases.push((
                vec!["--level".into(), name.to_string()],
                Box::new(move |l: &Line| l.level.is_some_and(|x| x <= rank + 1)),
            ));
        }
        for (args, keep) in &cases {
            let want = expect(&lines, keep);
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, got, err) = dump(&p, &a);
            assert_eq!(code, 0, "{} {args:?}: {err}", p.display());
            common::assert_same(&format!("{} {args:?}", p.display()), want.as_bytes(), &got);
            compared += 1;
            nonempty += !want.is_empty() as usize;
        }
    }
    assert!(compared >= 60, "{compared} filtered listings compared");
    assert!(nonempty >= 40, "{nonempty} of them non-empty");
}

#[test]
fn grep_matches_the_payload_text_dlt_convert_shows() {
    let p = common::testdata().join("dlt/testfile_extended.dlt");
    let Some(theirs) = common::dlt_convert_a(&p) else {
        return;
    };
    let lines = parse(&theirs);
    // The payload is the bracketed text at the end of the line.
    let payload = |l: &Line| {
        let s = &l.text;
        s[s.find(" [").unwrap() + 2..s.len() - 1].to_string()
    };
    let want = expect(&lines, |l| payload(l).contains("log level"));
    let (code, got, err) = dump(&p, &["--grep", "log level [0-9]"]);
    assert_eq!(code, 0, "{err}");
    common::assert_same("--grep", want.as_bytes(), &got);
    assert!(want.lines().count() >= 4);
    // Combined with --level: both must hold.
    let want = expect(&lines, |l| {
        payload(l).contains("log level") && l.level.is_some_and(|x| x <= 2)
    });
    let (_, got, _) = dump(&p, &["--grep", "log level", "--level", "error"]);
    common::assert_same("--grep --level", want.as_bytes(), &got);
    assert_eq!(want.lines().count(), 2);
}

#[test]
fn a_bad_expression_or_level_is_a_usage_error() {
    let p = common::testdata().join("dlt/testfile.dlt");
    let (code, out, err) = dump(&p, &["--grep", "(unclosed"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("--grep") && err.contains("unclosed"), "{err}");
    let (code, _, err) = dump(&p, &["--level", "loud"]);
    assert_eq!(code, 2);
    common::assert_has(&err, "fatal, error, warn, info, debug, verbose");
}

/// The same messages through convert, info and check: the DLT written
/// lists (in dlt-convert) as the filtered dump does, line bodies equal.
#[test]
fn convert_info_and_check_read_only_the_selected_messages() {
    let p = common::testdata().join("dlt/testfile.dlt");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tes2.dlt");
    let sel = ["--app", "LOG", "--ctx", "TES2"];
    common::convert(&p, "dlt", &out, &sel);
    let (_, listed, _) = dump(&p, &sel);
    let body = |b: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(b)
            .lines()
            .map(|l| l.split_once(' ').unwrap().1.to_string())
            .collect()
    };
    let want = body(&listed);
    assert_eq!(want.len(), 16, "LOG.TES2 holds 16 messages");
    if let Some(theirs) = common::dlt_convert_a(&out) {
        assert_eq!(body(&theirs), want);
    }
    let (code, info, err) = common::pt(&["info", "--app", "LOG", "--ctx", "TES2"], &[&p]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(native(&info, "verbose log messages"), Some(16), "{info}");
    assert_eq!(native(&info, "messages left out by the filters"), Some(89));
    // check validates what the filters keep.
    let (code, _, err) = common::pt(&["check", "--app", "LOG", "--ctx", "TES2"], &[&p]);
    assert_eq!(code, 0, "{err}");
}

/// A count of `info`'s native counts (`  name   value`).
fn native(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find(|l| l.trim_start().starts_with(name))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

#[test]
fn message_filters_are_refused_for_other_formats_and_write_ids_are_not_filters() {
    let kpi = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let err = common::pt_exit(2, &["dump", "--app", "LOG"], &[&kpi]);
    common::assert_has(&err, "--app changes nothing here");
    common::assert_has(&err, "dlt inputs");
    // The old spelling of the write-side id still sets the written APID.
    let p = common::testdata().join("dlt/testfile.dlt");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ids.dlt");
    common::convert(&p, "dlt", &out, &["--app-id", "ZZZZ", "--app", "LOG"]);
    let (_, listed, _) = dump(&out, &[]);
    let listed = String::from_utf8_lossy(&listed);
    assert!(listed.lines().count() > 40);
    assert!(listed.lines().all(|l| l.contains(" ZZZZ ")), "{listed}");
}

// ------------------------------------------------------------ lifecycles

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A `TZ=UTC dlt-convert -a` line's message: ECU, storage time (ns) and tmsp.
struct Stamped {
    text: String,
    ecu: String,
    storage_ns: i64,
    tmsp: Option<i64>,
}

fn stamped(listing: &str) -> Vec<Stamped> {
    listing
        .lines()
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let d: Vec<i64> = t[1].split('/').map(|x| x.parse().unwrap()).collect();
            let (hms, us) = t[2].split_once('.').unwrap();
            let h: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
            let secs = days(d[0], d[1], d[2]) * 86_400 + h[0] * 3600 + h[1] * 60 + h[2];
            Stamped {
                text: l.to_string(),
                ecu: t[5].trim_end_matches('-').to_string(),
                storage_ns: secs * 1_000_000_000 + us.parse::<i64>().unwrap() * 1000,
                tmsp: t[3].parse().ok(),
            }
        })
        .collect()
}

/// `testdata/dlt/lifecycles.dlt` is dlt-daemon's `testfile_extended.dlt`
/// three times over (PROVENANCE.md): ECU1 restarts twice (its tmsp falls
/// back by 234 s at each copy), ECU's tmsp falls back 13 s only (one
/// lifecycle). The lifecycles are found here from the dlt-convert listing
/// (per ECU: a new one where tmsp falls back by more than 50 s), and
/// compared with `info`, `dump --lifecycle N` and the times of the
/// converted events (tmsp + the lifecycle's min(storage − tmsp)).
#[test]
fn lifecycles_are_listed_selected_and_placed_per_ecu() {
    let p = common::testdata().join("dlt/lifecycles.dlt");
    let listing = match common::dlt_convert_a(&p) {
        Some(l) => String::from_utf8(l).unwrap(),
        None => std::fs::read_to_string(p.with_extension("dlt-convert-a.txt")).unwrap(),
    };
    let msgs = stamped(&listing);
    // (ecu, messages' indexes) per lifecycle, numbered by first appearance.
    let mut lcs: Vec<(String, Vec<usize>)> = Vec::new();
    let mut cur: std::collections::HashMap<String, (usize, Option<i64>)> = Default::default();
    for (i, m) in msgs.iter().enumerate() {
        let restart = match (cur.get(&m.ecu), m.tmsp) {
            (None, _) => true,
            (Some((_, Some(last))), Some(t)) => t < last - 500_000,
            _ => false,
        };
        if restart {
            lcs.push((m.ecu.clone(), Vec::new()));
            cur.insert(m.ecu.clone(), (lcs.len() - 1, None));
        }
        let c = cur.get_mut(&m.ecu).unwrap();
        if m.tmsp.is_some() {
            c.1 = m.tmsp;
        }
        lcs[c.0].1.push(i);
    }
    let shape: Vec<(&str, usize)> = lcs.iter().map(|(e, v)| (e.as_str(), v.len())).collect();
    assert_eq!(shape, [("ECU1", 6), ("ECU", 315), ("ECU1", 6), ("ECU1", 6)]);

    // info: one line per lifecycle, number, ECU and message count.
    let (code, info, err) = common::pt(&["info"], &[&p]);
    assert_eq!(code, 0, "{err}");
    let listed: Vec<(String, String, u64)> = info
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            if t.first() != Some(&"lifecycle") {
                return None;
            }
            Some((t[1].to_string(), t[2].to_string(), t.last()?.parse().ok()?))
        })
        .collect();
    let want: Vec<(String, String, u64)> = lcs
        .iter()
        .enumerate()
        .map(|(n, (e, v))| ((n + 1).to_string(), e.clone(), v.len() as u64))
        .collect();
    assert_eq!(listed, want, "{info}");

    for (n, (_, idx)) in lcs.iter().enumerate() {
        let n = (n + 1).to_string();
        // dump --lifecycle N: exactly that lifecycle's dlt-convert lines.
        let (code, got, err) = dump(&p, &["--lifecycle", &n]);
        assert_eq!(code, 0, "{err}");
        let want: String = idx.iter().map(|&i| format!("{}\n", msgs[i].text)).collect();
        common::assert_same(&format!("--lifecycle {n}"), want.as_bytes(), &got);
        // Event times: tmsp placed by the lifecycle's own boot time.
        let off = idx
            .iter()
            .filter_map(|&i| Some(msgs[i].storage_ns - msgs[i].tmsp? * 100_000))
            .min()
            .unwrap();
        let mut want: Vec<i64> = idx
            .iter()
            .filter(|&&i| msgs[i].text.contains(" LOG- TEST "))
            .map(|&i| off + msgs[i].tmsp.unwrap() * 100_000)
            .collect();
        let got = common::common_events(&p, &["--lifecycle", &n, "--event", "LOG.TEST"]);
        let mut got: Vec<i64> = got
            .iter()
            .map(|l| {
                let (s, ns) = l
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .split_once('.')
                    .unwrap();
                s.parse::<i64>().unwrap() * 1_000_000_000 + ns.parse::<i64>().unwrap()
            })
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "lifecycle {n}");
    }
}

// ------------------------------------------------------------ several files

/// dlt-convert's lines without their index, sorted (a multiset of messages).
fn bodies(listing: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(listing)
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_string())
        .collect();
    v.sort();
    v
}

/// (ECU APID CTID, payload) of each message dlt-viewer's command line
/// exports (`index date time timestamp count ecu apid ctid session type
/// subtype mode noar payload`), sorted.
fn viewer(dlt: &Path, home: &Path) -> Option<Vec<String>> {
    let tool = common::peer("dlt-viewer")?;
    let txt = home.join("viewer.txt");
    // It takes only names ending in .dlt (split pieces end in .NNN).
    let named = home.join("viewer-input.dlt");
    std::fs::copy(dlt, &named).unwrap();
    let dlt = named.as_path();
    let o = Command::new(tool)
        .env("QT_QPA_PLATFORM", "offscreen")
        .env("HOME", home)
        .args(["-s", "-c"])
        .arg(dlt)
        .arg(&txt)
        .output()
        .unwrap();
    assert!(o.status.success(), "dlt-viewer: {o:?}");
    let mut v: Vec<String> = std::fs::read_to_string(&txt)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(14, ' ').collect();
            format!("{} {} {} {}", f[5], f[6], f[7], f.get(13).unwrap_or(&""))
        })
        .collect();
    v.sort();
    Some(v)
}

/// `convert --to dlt --split BY -o DIR/x.dlt INPUT` (must succeed): the
/// pieces, in order.
fn split_pieces(dir: &Path, by: &str, input: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("x.dlt");
    let (code, _, err) = common::pt(
        &["convert", "--to", "dlt", "--split", by, "-o"],
        &[&out, input],
    );
    assert_eq!(code, 0, "{err}");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Merged and split `.dlt` outputs hold every input message once, control
/// messages included: the inputs' dlt-convert lines (index aside) as a
/// multiset equal the outputs', and dlt-viewer lists as many messages from
/// the outputs as from the inputs.
#[test]
fn merged_and_split_outputs_hold_every_message_once() {
    let d = common::testdata().join("dlt");
    let (a, b) = (d.join("testfile.dlt"), d.join("testfile_extended.dlt"));
    let tmp = tempfile::tempdir().unwrap();
    let all = tmp.path().join("all.dlt");
    let (code, _, err) = common::pt(&["convert", "--to", "dlt", "-o"], &[&all, &a, &b]);
    assert_eq!(code, 0, "{err}");
    let Some(la) = common::dlt_convert_a(&a) else {
        return;
    };
    let lb = common::dlt_convert_a(&b).unwrap();
    let mut want = bodies(&la);
    want.extend(bodies(&lb));
    want.sort();
    assert_eq!(want.len(), 216);
    assert_eq!(want.iter().filter(|l| l.contains(" control ")).count(), 16);
    assert_eq!(bodies(&common::dlt_convert_a(&all).unwrap()), want);
    if let Some(mut va) = viewer(&a, tmp.path()) {
        va.extend(viewer(&b, tmp.path()).unwrap());
        va.sort();
        assert_eq!(va.len(), 216);
        assert_eq!(viewer(&all, tmp.path()).unwrap(), va);
    }

    // Split by lifecycle (ECU1 restarts twice).
    let lc = d.join("lifecycles.dlt");
    let want = bodies(&common::dlt_convert_a(&lc).unwrap());
    for (by, pieces) in [("lifecycle", 3)] {
        let dir = tmp.path().join(by);
        let files = split_pieces(&dir, by, &lc);
        assert_eq!(files.len(), pieces, "--split {by}");
        let mut got = Vec::new();
        let mut seen = Vec::new();
        for f in &files {
            got.extend(bodies(&common::dlt_convert_a(f).unwrap()));
            if let Some(v) = viewer(f, tmp.path()) {
                seen.extend(v);
            }
        }
        got.sort();
        assert_eq!(got, want, "--split {by}");
        if !seen.is_empty() {
            assert_eq!(seen.len(), want.len(), "--split {by}: dlt-viewer");
        }
    }
    // Each lifecycle piece begins where ECU1 restarts: its first message.
    let first =
        String::from_utf8(common::dlt_convert_a(&tmp.path().join("lifecycle/x.dlt.001")).unwrap())
            .unwrap();
    assert!(
        first
            .lines()
            .next()
            .unwrap()
            .contains(" ECU1 LOG- TEST log fatal "),
        "{first}"
    );
}

/// Each record's length in a storage file (storage header + message).
fn record_lens(file: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    let mut p = 0;
    while p < file.len() {
        assert_eq!(&file[p..p + 4], b"DLT\x01", "record at {p}");
        let n = 16 + u16::from_be_bytes([file[p + 18], file[p + 19]]) as usize;
        v.push(n);
        p += n;
    }
    assert_eq!(p, file.len());
    v
}

/// `--split SIZE` into `.dlt` counts the bytes the writer holds as well as
/// those on disk: every piece but the last reaches SIZE with its last
/// message and was under SIZE before it; dlt-convert reads every piece,
/// and the pieces joined are the unsplit output, byte for byte.
#[test]
fn split_by_size_cuts_at_the_message_that_reaches_the_size() {
    let d = common::testdata().join("dlt");
    let tmp = tempfile::tempdir().unwrap();
    for (name, size) in [("lifecycles.dlt", 2000usize), ("testfile.dlt", 1000)] {
        let input = d.join(name);
        let whole = tmp.path().join(format!("{name}.whole.dlt"));
        let (code, _, err) = common::pt(&["convert", "--to", "dlt", "-o"], &[&whole, &input]);
        assert_eq!(code, 0, "{err}");
        let whole = std::fs::read(&whole).unwrap();
        let dir = tmp.path().join(name);
        let files = split_pieces(&dir, &format!("{size}B"), &input);
        let n = files.len();
        assert!(
            n > 1 && n <= whole.len().div_ceil(size),
            "{name}: {files:?}"
        );
        let mut joined = Vec::new();
        let mut listed = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let b = std::fs::read(f).unwrap();
            let last = *record_lens(&b).last().unwrap();
            assert!(b.len() - last < size, "{}: {} bytes", f.display(), b.len());
            if i + 1 < files.len() {
                assert!(b.len() >= size, "{}: {} bytes", f.display(), b.len());
            }
            joined.extend_from_slice(&b);
            if let Some(l) = common::dlt_convert_a(f) {
                listed.extend(bodies(&l));
            }
        }
        assert!(
            joined == whole,
            "{name}: the pieces joined differ from the unsplit output"
        );
        if let Some(l) = common::dlt_convert_a(&input) {
            listed.sort();
            assert_eq!(
                listed,
                bodies(&l),
                "{name}: dlt-convert lines of the pieces"
            );
        }
    }
}
