//! The CSV writer: a samples table (one row per timestamp, one column per
//! metric[instance]) and, with `--events`, an events table (one row per
//! event). Both are spooled and written at the end, when their columns are
//! known (docs/csv.md).

use super::glob;
use super::spool::{Cell, Spool, SpoolReader};
use crate::error::{Error, Result};
use crate::formats::format::note_dropped;
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::OutTarget;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Tag of an annotation row in the events spool (not an event type id).
const ANNOTATION: u32 = u32::MAX;

struct MetricInfo {
    name: String,
    indom: Option<IndomId>,
    counter: bool,
    units: Units,
    /// Definition order: columns are grouped by metric in this order.
    seq: u32,
}

struct Column {
    name: String,
    metric: MetricId,
    /// (first matching --columns pattern, first matching --metric filter,
    /// instance key, first appearance); the metric's rank comes between
    /// the filter and the instance (see `metric_ranks`).
    order: (usize, usize, i64, u32),
}

/// A counter's previous raw value, for `--rate`.
#[derive(Clone, Copy)]
enum Prev {
    Int(i128),
    Float(f64),
}

pub struct CsvWriter {
    path: Option<PathBuf>,
    opts: WriteOptions,
    header: Header,
    metrics: HashMap<MetricId, MetricInfo>,
    indoms: HashMap<IndomId, HashMap<InstId, String>>,
    cols: Vec<Column>,
    /// (metric, instance) → column, `None` when `--columns` leaves it out.
    by_key: HashMap<(MetricId, InstId), Option<u32>>,
    by_name: HashMap<String, u32>,
    spool: Spool,
    row_time: Option<Timestamp>,
    /// Row stamp per column: a second value in one row is noticed.
    seen: Vec<u64>,
    events: Option<EventsTable>,
    spool_dir: Arc<PathBuf>,
    /// Cells spooled, and events left out for want of `--events`.
    cells: u64,
    events_dropped: u64,
    loss: LossReport,
}

struct EventsTable {
    path: PathBuf,
    spool: Spool,
    types: HashMap<EventTypeId, Arc<EventType>>,
    used: BTreeSet<u32>,
    text: String,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

/// The events table beside the table `out`, for tables written as files
/// of extension `ext` (CSV, Parquet): `OUT.csv` → `OUT.events.csv`
/// (`OUT` → `OUT.events.csv`).
pub fn events_path(out: &Path, ext: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(ext)
        .and_then(|s| s.strip_suffix('.'))
        .unwrap_or(&name);
    out.with_file_name(format!("{stem}.events.{ext}"))
}

impl CsvWriter {
    pub fn new(out: &OutTarget, header: &Header, opts: &WriteOptions) -> Result<CsvWriter> {
        let path = match out {
            OutTarget::Path(p) => Some(p.clone()),
            OutTarget::Stdout => None,
        };
        // The spool sits beside the output (in its staging directory).
        let dir = path.as_deref().and_then(Path::parent);
        let spool_err = |e| Error::io(dir.unwrap_or(Path::new("$TMPDIR")), e);
        let events = if opts.events {
            let Some(p) = &path else {
                return Err(Error::Usage(
                    "--events writes a second file (OUT.events.csv): give -o FILE, not stdout"
                        .into(),
                ));
            };
            Some(EventsTable {
                path: events_path(p, "csv"),
                spool: Spool::new(dir).map_err(spool_err)?,
                types: HashMap::new(),
                used: BTreeSet::new(),
                text: String::new(),
            })
        } else {
            None
        };
        let spool = Spool::new(dir).map_err(spool_err)?;
        let spool_dir = Arc::new(dir.unwrap_or(Path::new("$TMPDIR")).to_path_buf());
        Ok(CsvWriter {
            spool,
            path,
            opts: opts.clone(),
            header: header.clone(),
            metrics: HashMap::new(),
            indoms: HashMap::new(),
            cols: Vec::new(),
            by_key: HashMap::new(),
            by_name: HashMap::new(),
            row_time: None,
            seen: Vec::new(),
            spool_dir,
            events,
            cells: 0,
            events_dropped: 0,
            loss: LossReport::default(),
        })
    }

    /// Errors on the spool name its directory (no allocation per item:
    /// the path is shared).
    fn spool_err(&self) -> impl Fn(std::io::Error) -> Error {
        let p = self.spool_dir.clone();
        move |e| Error::io(&*p, e)
    }

    // ------------------------------------------------------------ columns

    fn define_metric(&mut self, m: &MetricDesc) {
        let seq = match self.metrics.get(&m.id) {
            Some(old) => old.seq,
            None => self.metrics.len() as u32,
        };
        self.metrics.insert(
            m.id,
            MetricInfo {
                name: m.name().to_string(),
                indom: m.indom,
                counter: m.sem == Semantics::Counter,
                units: m.units,
                seq,
            },
        );
        self.by_key.retain(|(id, _), _| *id != m.id);
    }

    /// Each metric's place among the columns. Definition order, except for
    /// PCP sources: there the order pmrep prints, which walks the archive's
    /// name tree built in definition order with each new child put first
    /// (so siblings come newest first, and a subtree stays together).
    fn metric_ranks(&self) -> HashMap<MetricId, u32> {
        let mut defs: Vec<(&MetricId, &MetricInfo)> = self.metrics.iter().collect();
        defs.sort_by_key(|(_, mi)| mi.seq);
        if self.header.source != FormatId::Pcp {
            return defs.iter().map(|(id, mi)| (**id, mi.seq)).collect();
        }
        // Arena of name-tree nodes: (component, children, metric).
        let mut nodes: Vec<(&str, Vec<usize>, Option<MetricId>)> = vec![("", Vec::new(), None)];
        for (id, mi) in &defs {
            let mut at = 0;
            for part in mi.name.split('.') {
                let found = nodes[at].1.iter().copied().find(|&c| nodes[c].0 == part);
                at = match found {
                    Some(c) => c,
                    None => {
                        nodes.push((part, Vec::new(), None));
                        let c = nodes.len() - 1;
                        nodes[at].1.insert(0, c);
                        c
                    }
                };
            }
            nodes[at].2 = Some(**id);
        }
        let mut rank = HashMap::with_capacity(defs.len());
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            if let Some(id) = nodes[n].2 {
                let r = rank.len() as u32;
                rank.insert(id, r);
            }
            stack.extend(nodes[n].1.iter().rev());
        }
        rank
    }

    fn indom(&mut self, u: &IndomUpdate) {
        let names = self.indoms.entry(u.id).or_default();
        let mut changed: Vec<InstId> = match u.kind {
            IndomKind::Full => {
                let v: Vec<InstId> = names.keys().copied().collect();
                names.clear();
                v
            }
            IndomKind::Delta => {
                for r in &u.removed {
                    names.remove(r);
                }
                u.removed.clone()
            }
        };
        for i in &u.instances {
            names.insert(i.id, i.name.clone());
            changed.push(i.id);
        }
        // An instance that left or was renamed gets its column looked up
        // again (same name: same column; new name: a new column).
        let metrics = &self.metrics;
        self.by_key.retain(|(m, inst), _| {
            !(metrics.get(m).is_some_and(|mi| mi.indom == Some(u.id)) && changed.contains(inst))
        });
    }

    fn column(&mut self, m: MetricId, inst: InstId) -> Result<Option<u32>> {
        if let Some(&c) = self.by_key.get(&(m, inst)) {
            return Ok(c);
        }
        let Some(mi) = self.metrics.get(&m) else {
            return Ok(None);
        };
        let iname = mi
            .indom
            .and_then(|d| self.indoms.get(&d))
            .and_then(|n| n.get(&inst));
        let name = match (inst, iname) {
            (PM_IN_NULL, _) => mi.name.clone(),
            (_, Some(n)) => format!("{}[{n}]", mi.name),
            (i, None) => format!("{}[{i}]", mi.name),
        };
        let pattern = if self.opts.columns.is_empty() {
            Some(0)
        } else {
            self.opts
                .columns
                .iter()
                .position(|g| glob::matches(g, &name) || glob::matches(g, &mi.name))
        };
        let col = match pattern {
            None => None,
            Some(pi) => Some(match self.by_name.get(&name) {
                Some(&c) => c,
                None => {
                    let id = u32::try_from(self.cols.len())
                        .ok()
                        .filter(|&c| c < u32::MAX)
                        .ok_or_else(|| Error::Unsupported("more than 2^32 CSV columns".into()))?;
                    // PCP: instances by number, as pmrep lists them;
                    // elsewhere in order of appearance.
                    let iseq = if self.header.source == FormatId::Pcp {
                        i64::from(inst)
                    } else {
                        0
                    };
                    // --metric filters in the order given; a name selects
                    // everything below it, as the filter does.
                    let fi = self
                        .opts
                        .metric_order
                        .iter()
                        .position(|g| {
                            glob::matches(g, &mi.name)
                                || mi
                                    .name
                                    .strip_prefix(g.as_str())
                                    .is_some_and(|r| r.starts_with('.'))
                        })
                        .unwrap_or(usize::MAX);
                    self.cols.push(Column {
                        name: name.clone(),
                        metric: m,
                        order: (pi, fi, iseq, id),
                    });
                    self.seen.push(0);
                    self.by_name.insert(name, id);
                    id
                }
            }),
        };
        self.by_key.insert((m, inst), col);
        Ok(col)
    }

    // ------------------------------------------------------------ rows

    fn sample(&mut self, s: &Sample) -> Result<()> {
        let err = self.spool_err();
        if self.row_time != Some(s.time) {
            if self.row_time.is_some() {
                self.spool.end().map_err(&err)?;
            }
            self.spool.begin(s.time.0, 0).map_err(&err)?;
            self.row_time = Some(s.time);
        }
        let row = self.spool.records();
        for mv in &s.metrics {
            let vals = match &mv.values {
                Ok(v) => v,
                Err(_) => {
                    self.loss.drop_item(
                        "metric error codes",
                        "a CSV cell has no place for them: left empty",
                    );
                    continue;
                }
            };
            if !self.metrics.contains_key(&mv.metric) {
                self.loss.drop_item(
                    "metric values",
                    "value of an undefined metric (no column name)",
                );
                continue;
            }
            for (inst, v) in vals {
                let Some(col) = self.column(mv.metric, *inst)? else {
                    continue;
                };
                let seen = &mut self.seen[col as usize];
                if *seen == row {
                    self.loss.degrade(
                        "metric values",
                        "two values for one column at one time: the later one kept",
                    );
                }
                *seen = row;
                let text;
                let cell = match v {
                    Value::I64(x) | Value::Enum(x) => Cell::Int(*x),
                    Value::U64(x) => Cell::Uint(*x),
                    Value::F32(x) => Cell::F32(*x),
                    Value::F64(x) => Cell::F64(*x),
                    Value::Str(x) => Cell::Text(x),
                    Value::Bytes(b) => Cell::Hex(b),
                    Value::Events(_) => {
                        self.loss.drop_item(
                            "event-record values",
                            "not a cell value (chrome-json and ctf carry them)",
                        );
                        continue;
                    }
                    other => {
                        text = other.text();
                        Cell::Text(&text)
                    }
                };
                self.spool.cell(col, cell).map_err(&err)?;
                self.cells += 1;
            }
        }
        Ok(())
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        let err = self.spool_err();
        let Some(t) = self.events.as_mut() else {
            self.events_dropped += 1;
            self.loss.drop_item(
                "events",
                "the samples table has no place for them (--events writes an events table)",
            );
            return Ok(());
        };
        let Some(ty) = t.types.get(&e.type_id).cloned() else {
            self.loss
                .drop_item("events", "event of an undefined type (no name)");
            return Ok(());
        };
        t.used.insert(e.type_id);
        t.spool.begin(e.time.0, e.type_id).map_err(&err)?;
        if let Some(c) = e.cpu {
            t.spool.cell(0, Cell::Uint(c as u64)).map_err(&err)?;
        }
        for (i, v) in e.fields.iter().enumerate() {
            let col = i as u32 + 1;
            let fty = ty.fields.get(i).map(|f| &f.ty);
            let cell = match v {
                Value::I64(x) => Cell::Int(*x),
                Value::U64(x) => Cell::Uint(*x),
                Value::F32(x) => Cell::F32(*x),
                Value::F64(x) => Cell::F64(*x),
                Value::Str(s) => Cell::Text(s),
                Value::Bytes(b) => Cell::Hex(b),
                Value::Enum(x) => match fty {
                    // The label is what the value means (LTT lists it so).
                    Some(FieldType::Enum { labels, .. }) => {
                        match labels.iter().find(|(n, _)| n == x) {
                            Some((_, l)) => Cell::Text(l),
                            None => Cell::Int(*x),
                        }
                    }
                    _ => Cell::Int(*x),
                },
                other => {
                    t.text.clear();
                    other.push_text(&mut t.text);
                    Cell::Text(&t.text)
                }
            };
            t.spool.cell(col, cell).map_err(&err)?;
        }
        t.spool.end().map_err(&err)
    }

    fn annotation(&mut self, a: &Annotation) -> Result<()> {
        let err = self.spool_err();
        let Some(t) = self.events.as_mut() else {
            self.loss.drop_item(
                "annotations",
                "the samples table has no place for them (--events lists them)",
            );
            return Ok(());
        };
        t.used.insert(ANNOTATION);
        t.spool.begin(a.time.0, ANNOTATION).map_err(&err)?;
        t.spool.cell(1, Cell::Text(&a.text)).map_err(&err)?;
        for (i, k) in [X_ECU, X_APID, X_CTID].into_iter().enumerate() {
            if let Some(v) = a.extras.str(k) {
                t.spool.cell(i as u32 + 2, Cell::Text(v)).map_err(&err)?;
            }
        }
        t.spool.end().map_err(&err)
    }

    // ------------------------------------------------------------ output

    fn time_text(&self, t: i64, out: &mut String) {
        out.clear();
        if self.header.time_base.is_absolute() {
            let _ = Timestamp(t).write_rfc3339(out);
        } else {
            // No date is known: seconds on the source's own axis.
            let _ = write!(out, "{}", Timestamp(t));
        }
    }

    fn units_text(&self, c: &Column) -> String {
        let Some(mi) = self.metrics.get(&c.metric) else {
            return String::new();
        };
        let u = mi.units.pcp_str();
        if self.opts.rate && mi.counter {
            if u.is_empty() {
                "/ sec".into()
            } else {
                format!("{u} / sec")
            }
        } else {
            u
        }
    }

    fn open_out(&self, path: Option<&Path>) -> Result<::csv::Writer<Box<dyn Write + Send>>> {
        let sink: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(BufWriter::with_capacity(
                1 << 16,
                std::fs::File::create(p).map_err(io(p))?,
            )),
            None => Box::new(BufWriter::with_capacity(1 << 16, std::io::stdout())),
        };
        Ok(::csv::WriterBuilder::new()
            .delimiter(self.opts.delimiter.unwrap_or(b','))
            .from_writer(sink))
    }

    fn write_samples(&mut self) -> Result<()> {
        let err = self.spool_err();
        if self.row_time.is_some() {
            self.spool.end().map_err(&err)?;
        }
        let shown = self.path.clone().unwrap_or_else(|| "<stdout>".into());
        let cerr = |e: ::csv::Error| Error::io(&shown, csv_io(e));
        // Final column order: --columns patterns, then metric definition
        // order, then first appearance.
        let rank = self.metric_ranks();
        let mut order: Vec<u32> = (0..self.cols.len() as u32).collect();
        order.sort_by_key(|&c| {
            let col = &self.cols[c as usize];
            let (pi, fi, iseq, id) = col.order;
            let r = rank.get(&col.metric).copied().unwrap_or(u32::MAX);
            (pi, fi, r, iseq, id)
        });
        let mut pos = vec![0u32; self.cols.len()];
        for (i, &c) in order.iter().enumerate() {
            pos[c as usize] = i as u32;
        }
        let mut out = self.open_out(self.path.as_deref())?;
        out.write_field("time").map_err(cerr)?;
        for &c in &order {
            out.write_field(&self.cols[c as usize].name).map_err(cerr)?;
        }
        out.write_record(None::<&[u8]>).map_err(cerr)?;
        if self.opts.units_row {
            let first = if self.header.time_base.is_absolute() {
                "UTC"
            } else {
                "s"
            };
            out.write_field(first).map_err(cerr)?;
            for &c in &order {
                out.write_field(self.units_text(&self.cols[c as usize]))
                    .map_err(cerr)?;
            }
            out.write_record(None::<&[u8]>).map_err(cerr)?;
        }
        let rate: Vec<bool> = self
            .cols
            .iter()
            .map(|c| self.opts.rate && self.metrics.get(&c.metric).is_some_and(|m| m.counter))
            .collect();
        let mut prev: Vec<Option<(i64, Prev)>> = vec![None; self.cols.len()];
        let spool = std::mem::replace(&mut self.spool, Spool::new(None).map_err(&err)?);
        let mut rd: SpoolReader = spool.into_reader().map_err(&err)?;
        // Per final position: the record stamp and the cell index in it.
        let mut stamp = vec![0u64; order.len()];
        let mut slot = vec![0u32; order.len()];
        let mut text = String::new();
        let (mut recno, mut rows) = (0u64, 0u64);
        while let Some(rec) = rd.next_record().map_err(&err)? {
            recno += 1;
            // A sample whose values were all left out (--columns, error
            // codes) is no row, as in pmrep.
            if rec.cells.is_empty() {
                continue;
            }
            rows += 1;
            for (i, c) in rec.cells.iter().enumerate() {
                let p = pos[c.col as usize] as usize;
                stamp[p] = recno;
                slot[p] = i as u32;
            }
            self.time_text(rec.time, &mut text);
            out.write_field(&text).map_err(cerr)?;
            for p in 0..order.len() {
                text.clear();
                if stamp[p] == recno {
                    let raw = &rec.cells[slot[p] as usize];
                    let cell = rec.cell(raw);
                    let col = raw.col as usize;
                    if rate[col] {
                        push_rate(&mut text, &mut prev[col], rec.time, cell);
                    } else {
                        push_cell(&mut text, cell);
                    }
                }
                out.write_field(&text).map_err(cerr)?;
            }
            out.write_record(None::<&[u8]>).map_err(cerr)?;
        }
        out.flush().map_err(|e| Error::io(&shown, e))?;
        self.loss.wrote("CSV rows", rows);
        self.loss.wrote("CSV columns", self.cols.len() as u64);
        Ok(())
    }

    fn write_events(&mut self) -> Result<()> {
        let Some(mut t) = self.events.take() else {
            return Ok(());
        };
        let err = self.spool_err();
        let cerr = |e: ::csv::Error| Error::io(&t.path, csv_io(e));
        let plan = EventColumns::plan(&t);
        let path = t.path.clone();
        let mut out = self.open_out(Some(&path))?;
        for h in ["time", "category", "name", "cpu"] {
            out.write_field(h).map_err(cerr)?;
        }
        for h in &plan.names {
            out.write_field(h).map_err(cerr)?;
        }
        out.write_record(None::<&[u8]>).map_err(cerr)?;
        let spool = std::mem::replace(&mut t.spool, Spool::new(None).map_err(&err)?);
        let mut rd = spool.into_reader().map_err(&err)?;
        let mut text = String::new();
        // Per column: the record stamp and the cell index in it.
        let mut stamp = vec![0u64; plan.names.len()];
        let mut slot = vec![0u32; plan.names.len()];
        let mut n = 0u64;
        while let Some(rec) = rd.next_record().map_err(&err)? {
            n += 1;
            self.time_text(rec.time, &mut text);
            out.write_field(&text).map_err(cerr)?;
            let (cat, name) = match t.types.get(&rec.tag) {
                _ if rec.tag == ANNOTATION => ("annotation", ""),
                Some(ty) => (ty.category.as_str(), ty.name.as_str()),
                None => ("", ""),
            };
            out.write_field(cat).map_err(cerr)?;
            out.write_field(name).map_err(cerr)?;
            text.clear();
            if let Some(c) = rec.cells.iter().find(|c| c.col == 0) {
                push_cell(&mut text, rec.cell(c));
            }
            out.write_field(&text).map_err(cerr)?;
            let cols = plan.by_type.get(&rec.tag).map_or(&[][..], Vec::as_slice);
            for (i, c) in rec.cells.iter().enumerate() {
                if let Some(&k) = (c.col as usize).checked_sub(1).and_then(|f| cols.get(f)) {
                    stamp[k] = n;
                    slot[k] = i as u32;
                }
            }
            for k in 0..plan.names.len() {
                text.clear();
                if stamp[k] == n {
                    push_cell(&mut text, rec.cell(&rec.cells[slot[k] as usize]));
                }
                out.write_field(&text).map_err(cerr)?;
            }
            out.write_record(None::<&[u8]>).map_err(cerr)?;
        }
        out.flush().map_err(|e| Error::io(&path, e))?;
        self.loss.wrote("CSV event rows", n);
        Ok(())
    }
}

/// What a field's cells are in the events table: a column holds one kind
/// only, so that a reader (DuckDB, pandas) types it (integers as integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColKind {
    Int,
    Float,
    Text,
}

impl ColKind {
    fn of(t: &FieldType) -> ColKind {
        match t {
            FieldType::Int(_) | FieldType::Uint(_) => ColKind::Int,
            FieldType::Float(_) => ColKind::Float,
            // Enums by their label, bytes as hex, compounds as text.
            _ => ColKind::Text,
        }
    }
    fn name(self) -> &'static str {
        match self {
            ColKind::Int => "int",
            ColKind::Float => "float",
            ColKind::Text => "text",
        }
    }
}

/// The events table's field columns: one per field name and kind, in the
/// order the types were defined (docs/csv.md).
struct EventColumns {
    names: Vec<String>,
    /// Per event type (and annotations): field index → column.
    by_type: HashMap<u32, Vec<usize>>,
}

/// The fields of an annotation row, as the spool holds them (cells 1–4).
const ANNOTATION_FIELDS: [&str; 4] = ["text", "ecu", "apid", "ctid"];

impl EventColumns {
    fn plan(t: &EventsTable) -> EventColumns {
        let mut cols: Vec<(&str, ColKind)> = Vec::new();
        let mut by_type = HashMap::new();
        let mut tys: Vec<(u32, Vec<(&str, ColKind)>)> = Vec::new();
        for &id in &t.used {
            if id == ANNOTATION {
                let f = ANNOTATION_FIELDS
                    .iter()
                    .map(|n| (*n, ColKind::Text))
                    .collect();
                tys.push((id, f));
            } else if let Some(ty) = t.types.get(&id) {
                let f = ty
                    .fields
                    .iter()
                    .map(|f| (f.name.as_str(), ColKind::of(&f.ty)))
                    .collect();
                tys.push((id, f));
            }
        }
        for (id, fields) in &tys {
            let v: Vec<usize> = fields
                .iter()
                .map(|&key| match cols.iter().position(|c| *c == key) {
                    Some(k) => k,
                    None => {
                        cols.push(key);
                        cols.len() - 1
                    }
                })
                .collect();
            by_type.insert(*id, v);
        }
        // A name with cells of one kind is the column's name; of several,
        // each column says its kind (`arg0:int`, `arg0:text`).
        let names = cols
            .iter()
            .map(|(n, k)| {
                if cols.iter().filter(|(m, _)| m == n).count() > 1 {
                    format!("{n}:{}", k.name())
                } else {
                    n.to_string()
                }
            })
            .collect();
        EventColumns { names, by_type }
    }
}

/// A float as the shortest text that reads back to it, in plain notation
/// unless that would be very long.
fn push_f64(out: &mut String, v: f64) {
    let a = v.abs();
    if a != 0.0 && a.is_finite() && !(1e-7..1e21).contains(&a) {
        let _ = write!(out, "{v:e}");
    } else {
        let _ = write!(out, "{v}");
    }
}

fn push_cell(out: &mut String, c: Cell<'_>) {
    match c {
        Cell::Int(v) => out.push_str(itoa::Buffer::new().format(v)),
        Cell::Uint(v) => out.push_str(itoa::Buffer::new().format(v)),
        Cell::F32(v) => {
            let a = v.abs();
            if a != 0.0 && a.is_finite() && !(1e-7..1e21).contains(&a) {
                let _ = write!(out, "{v:e}");
            } else {
                let _ = write!(out, "{v}");
            }
        }
        Cell::F64(v) => push_f64(out, v),
        Cell::Text(s) => out.push_str(s),
        Cell::Hex(b) => {
            out.push_str("0x");
            for x in b {
                let _ = write!(out, "{x:02x}");
            }
        }
    }
}

/// A CSV error as an I/O error of the same kind, so that a closed pipe
/// (`| head`) stays a closed pipe and ends the run quietly.
fn csv_io(e: ::csv::Error) -> std::io::Error {
    let kind = match e.kind() {
        ::csv::ErrorKind::Io(io) => io.kind(),
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, e.to_string())
}

/// `--rate`: (value − previous) / seconds between them. Empty for the
/// first value, a counter that went down (reset or wrap) or no time passed.
fn push_rate(out: &mut String, prev: &mut Option<(i64, Prev)>, t: i64, c: Cell<'_>) {
    let now = match c {
        Cell::Int(v) => Prev::Int(v as i128),
        Cell::Uint(v) => Prev::Int(v as i128),
        Cell::F32(v) => Prev::Float(v as f64),
        Cell::F64(v) => Prev::Float(v),
        // A counter with text values: nothing to divide.
        other => return push_cell(out, other),
    };
    if let Some((t0, p)) = prev.replace((t, now)) {
        let dt = (t - t0) as f64 / 1e9;
        let delta = match (p, now) {
            (Prev::Int(a), Prev::Int(b)) => (b - a) as f64,
            (Prev::Int(a), Prev::Float(b)) => b - a as f64,
            (Prev::Float(a), Prev::Int(b)) => b as f64 - a,
            (Prev::Float(a), Prev::Float(b)) => b - a,
        };
        if dt > 0.0 && delta >= 0.0 {
            push_f64(out, delta / dt);
        }
    }
}

impl TraceWriter for CsvWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(t) => {
                if let Some(ev) = &mut self.events {
                    ev.types.insert(t.id, t.clone());
                }
                Ok(())
            }
            Item::Metric(m) => {
                self.define_metric(m);
                Ok(())
            }
            Item::Indom(u) => {
                self.indom(u);
                Ok(())
            }
            Item::Help(_) | Item::Labels(_) => {
                note_dropped(&mut self.loss, super::WRITES, item);
                Ok(())
            }
            Item::Sample(s) => self.sample(s),
            Item::Event(e) => self.event(e),
            Item::EventRun(r) => r.each_item(|it| self.write_item(it)),
            Item::Annotation(a) => self.annotation(a),
            Item::Mark(_) => {
                self.loss
                    .drop_item("marks", "a CSV table has no place for them");
                Ok(())
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        let event_rows = self.events.as_ref().map_or(0, |t| t.spool.records());
        if self.cells == 0 && event_rows == 0 {
            // A header alone is no table: say why instead of writing one.
            let why = if self.events_dropped > 0 {
                format!(
                    "the input has no samples; its {} events need --events (and -o FILE)",
                    self.events_dropped
                )
            } else if self.opts.columns.is_empty() {
                "the input has no samples or events".into()
            } else {
                "no value matches --columns, and no events".into()
            };
            return Err(Error::nothing_to_write("nothing to write", why));
        }
        self.write_samples()?;
        self.write_events()?;
        Ok(std::mem::take(&mut self.loss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_file_beside_the_table() {
        assert_eq!(
            events_path(Path::new("/a/x.csv"), "csv"),
            Path::new("/a/x.events.csv")
        );
        assert_eq!(
            events_path(Path::new("x"), "csv"),
            Path::new("x.events.csv")
        );
        assert_eq!(
            events_path(Path::new("/a/x.parquet"), "parquet"),
            Path::new("/a/x.events.parquet")
        );
        assert_eq!(
            events_path(Path::new("xparquet"), "parquet"),
            Path::new("xparquet.events.parquet")
        );
    }

    #[test]
    fn rates_per_second() {
        let mut prev = None;
        let mut s = String::new();
        push_rate(&mut s, &mut prev, 0, Cell::Uint(10));
        assert_eq!(s, "");
        push_rate(&mut s, &mut prev, 2_000_000_000, Cell::Uint(30));
        assert_eq!(s, "10");
        s.clear();
        // A reset: no rate, but the next one counts from the new value.
        push_rate(&mut s, &mut prev, 3_000_000_000, Cell::Uint(5));
        assert_eq!(s, "");
        push_rate(&mut s, &mut prev, 3_500_000_000, Cell::Uint(6));
        assert_eq!(s, "2");
    }

    #[test]
    fn floats_read_back() {
        for v in [0.1, 1.0 / 3.0, 1e-9, 123456789012345.0, 1e300, -2.5] {
            let mut s = String::new();
            push_f64(&mut s, v);
            assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
        }
        let mut s = String::new();
        push_cell(&mut s, Cell::F32(0.1));
        assert_eq!(s, "0.1");
    }
}
