//! Output names: the suffix each target format gets, the target format a
//! name implies (`-o y.kpi` needs no `--to`), and a batch output's name.

use crate::model::FormatId;
use std::ffi::OsString;
use std::path::Path;

/// File name suffix of a converted output (PCP archives are base names).
pub fn output_suffix(id: FormatId) -> &'static str {
    match id {
        FormatId::Kpi => ".kpi",
        FormatId::Dlt => ".dlt",
        FormatId::Mmv => ".mmv",
        FormatId::Pcp => "",
        FormatId::Ltt => ".ltt",
        FormatId::Timeline => ".timeline",
        FormatId::ChromeJson => ".json",
        FormatId::Csv => ".csv",
        FormatId::Ctf => ".ctf",
        FormatId::Parquet => ".parquet",
        FormatId::Perfetto => ".perfetto-trace",
    }
}

/// Extensions that name a target format when `-o` ends in them, and that a
/// batch replaces by the target's suffix. A PCP archive is a base name with
/// no extension of its own (`.meta` is one member of several), so it is not
/// here: `--to pcp` stays required.
const NAMED: [(&str, &str); 12] = [
    (".kpi", "kpi"),
    (".dlt", "dlt"),
    (".mmv", "mmv"),
    (".ltt", "ltt"),
    (".timeline", "timeline"),
    (".json", "chrome-json"),
    (".csv", "csv"),
    (".ctf", "ctf"),
    (".perfetto-trace", "perfetto"),
    (".pftrace", "perfetto"),
    (".tar.gz", "ltt"),
    (".parquet", "parquet"),
];

/// Extensions of trace inputs that only a source has (Snabb writes `.dat`,
/// KPI captures are often saved as `.txt`); a batch replaces them too.
const SOURCE_ONLY: [&str; 3] = [".dat", ".txt", ".tgz"];

fn lower_name(path: &Path) -> Option<String> {
    Some(path.file_name()?.to_str()?.to_ascii_lowercase())
}

/// The format an output name asks for, by its extension.
pub fn format_for_name(path: &Path) -> Option<FormatId> {
    let name = lower_name(path)?;
    NAMED
        .iter()
        .find(|(ext, _)| name.len() > ext.len() && name.ends_with(ext))
        .and_then(|(_, f)| FormatId::from_name(f))
}

/// `--to`, else the format the `-o` name implies; the error says which.
pub fn target_format(to: Option<FormatId>, out: Option<&Path>) -> anyhow::Result<FormatId> {
    if let Some(id) = to {
        return Ok(id);
    }
    match out {
        None => anyhow::bail!("--to FORMAT is required (see `polytrace formats`)"),
        Some(p) if p.as_os_str() == "-" => {
            anyhow::bail!("--to FORMAT is required when writing to stdout")
        }
        Some(p) if format_for_name(p).is_none() && p.is_dir() => anyhow::bail!(
            "-o {}: is a directory, and a directory names no format: name the output file in it \
             (-o {}/NAME.csv: the extension names the format), or give --to FORMAT (see `polytrace formats`)",
            p.display(),
            p.display()
        ),
        Some(p) => format_for_name(p).ok_or_else(|| {
            let exts: Vec<&str> = NAMED.iter().map(|(e, _)| *e).collect();
            anyhow::anyhow!(
                "--to FORMAT is required: {} does not end in an extension that names a format ({}); \
                 a PCP archive is named by its base name (base.meta, base.0, … are its members), so give --to pcp",
                p.display(),
                exts.join(", ")
            )
        }),
    }
}

/// The base name of a PCP archive given by one of its members: `out.meta`,
/// `out.index` and `out.0` (any volume number) all mean `out`, as on input.
pub fn pcp_base(path: &Path) -> std::path::PathBuf {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return path.to_path_buf();
    };
    let stem = match name.rsplit_once('.') {
        Some((stem, "meta" | "index")) => stem,
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => stem,
        _ => return path.to_path_buf(),
    };
    if stem.is_empty() {
        return path.to_path_buf();
    }
    path.with_file_name(stem)
}

/// Length of a known trace extension at the end of `name` (0 if none).
fn known_extension_len(name: &str) -> usize {
    let lower = name.to_ascii_lowercase();
    NAMED
        .iter()
        .map(|(e, _)| *e)
        .chain(SOURCE_ONLY)
        .filter(|e| lower.len() > e.len() && lower.ends_with(e))
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A batch output's path relative to the output root: the source's known
/// extension replaced by the target's suffix (`capture.dlt` → `capture.kpi`,
/// `B-buf400.dlt` → PCP base `B-buf400`); an unknown extension is kept
/// (`notes.log` → `notes.log.kpi`). `keep_extension` appends instead, for
/// names that would otherwise collide within one batch.
pub fn batch_output_name(rel: &Path, to: FormatId, keep_extension: bool) -> OsString {
    let suffix = output_suffix(to);
    let file = rel.file_name();
    let mut out = match (keep_extension, file) {
        (false, Some(name)) => {
            // On the bytes: a name that is not UTF-8 keeps them (the known
            // extensions are ASCII, so the lossy text ends as the name does).
            use std::os::unix::ffi::OsStrExt;
            let b = name.as_bytes();
            let ext = known_extension_len(&name.to_string_lossy());
            let stem = std::ffi::OsStr::from_bytes(&b[..b.len().saturating_sub(ext)]);
            rel.with_file_name(stem).into_os_string()
        }
        _ => rel.as_os_str().to_owned(),
    };
    out.push(suffix);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_names_replace_known_extensions() {
        let n = |p: &str, to| batch_output_name(Path::new(p), to, false);
        assert_eq!(n("capture.kpi", FormatId::Kpi), "capture.kpi");
        assert_eq!(n("sub/capture.dlt", FormatId::Kpi), "sub/capture.kpi");
        assert_eq!(n("B-buf400.dlt", FormatId::Pcp), "B-buf400");
        assert_eq!(n("a2-priorities.dat", FormatId::Mmv), "a2-priorities.mmv");
        assert_eq!(n("t.tar.gz", FormatId::Kpi), "t.kpi");
        assert_eq!(n("live_v2", FormatId::Dlt), "live_v2.dlt");
        assert_eq!(n("notes.log", FormatId::Kpi), "notes.log.kpi");
        // A name that is only an extension keeps it.
        assert_eq!(n(".kpi", FormatId::Dlt), ".kpi.dlt");
        let k = batch_output_name(Path::new("a.kpi"), FormatId::Kpi, true);
        assert_eq!(k, "a.kpi.kpi");
    }

    #[test]
    fn pcp_members_name_their_base() {
        let b = |p: &str| pcp_base(Path::new(p));
        assert_eq!(b("out.meta"), Path::new("out"));
        assert_eq!(b("d/out.index"), Path::new("d/out"));
        assert_eq!(b("out.0"), Path::new("out"));
        assert_eq!(b("out.12"), Path::new("out"));
        assert_eq!(b("out"), Path::new("out"));
        assert_eq!(b("out.v2"), Path::new("out.v2"));
        assert_eq!(b(".meta"), Path::new(".meta"));
    }

    #[test]
    fn output_names_imply_a_format_except_pcp() {
        let f = |p: &str| format_for_name(Path::new(p));
        assert_eq!(f("y.kpi"), Some(FormatId::Kpi));
        assert_eq!(f("dir/Y.DLT"), Some(FormatId::Dlt));
        assert_eq!(f("x.json"), Some(FormatId::ChromeJson));
        assert_eq!(f("x.csv"), Some(FormatId::Csv));
        assert_eq!(f("t.tar.gz"), Some(FormatId::Ltt));
        assert_eq!(f("archive"), None);
        assert_eq!(f("archive.meta"), None);
        assert_eq!(f("archive.0"), None);
        let e = target_format(None, Some(Path::new("archive.meta")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--to pcp"), "{e}");
        assert_eq!(
            target_format(Some(FormatId::Mmv), Some(Path::new("y.kpi"))).unwrap(),
            FormatId::Mmv
        );
    }
}
