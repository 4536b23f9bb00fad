//! One Parquet file being written with the `parquet` crate's file API.
//! Rows gather in column batches of a fixed number of rows; each batch is
//! encoded into one in-memory column chunk per column, and a row group is
//! spliced into the file once it reaches its bounds (rows, bytes). Memory
//! is one batch plus one row group in its encoded form, whatever the
//! input's size; `close` writes the footer.
//!
//! The repeated strings (source, host, metric, instance, units, semantics,
//! type, stream) are interned by the trace writer already; their columns
//! are written here as dictionary pages straight from the interned ids, so
//! a row costs an array lookup, not a hash of its text. Columns whose
//! rows come in runs (a sample's time, a metric's name and units) are
//! gathered as runs. The samples' values go into PLAIN pages, min and max
//! kept as they pass. Only the events' maps, cpu and pid go through the
//! crate's own column writers (repetition levels, and not the hot path).

use crate::error::{Error, Result};
use bytes::Bytes;
use parquet::basic::{Compression, Encoding, Type as PhysicalType, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriteSpec, PageWriter};
use parquet::column::writer::{
    get_column_writer, get_typed_column_writer_mut, ColumnCloseResult, ColumnWriter,
};
use parquet::data_type::{ByteArray, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, ColumnPath, SchemaDescPtr};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Rows per column batch, and per data page of a dictionary column.
pub const DEFAULT_BATCH_ROWS: usize = 64 * 1024;
/// A row group ends at this many rows ...
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1 << 20;
/// ... or once its encoded pages take this many bytes, whichever first.
pub const DEFAULT_ROW_GROUP_BYTES: usize = 64 << 20;
/// zstd level 3: zstd's own default, most of the size gain for little time.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Columns written without min/max statistics.
const NO_STATISTICS: &[&str] = &[
    "source",
    "instance",
    "value_str",
    "units",
    "semantics",
    "stream",
];

/// Size settings, all optional (`None`: the `DEFAULT_*` value).
#[derive(Debug, Clone, Copy, Default)]
pub struct Props {
    pub batch_rows: Option<usize>,
    pub row_group_rows: Option<usize>,
    pub row_group_bytes: Option<usize>,
}

impl Props {
    pub fn batch_rows(&self) -> usize {
        self.batch_rows.unwrap_or(DEFAULT_BATCH_ROWS).max(1)
    }
    fn row_group_rows(&self) -> usize {
        self.row_group_rows.unwrap_or(DEFAULT_ROW_GROUP_ROWS).max(1)
    }
    fn row_group_bytes(&self) -> usize {
        self.row_group_bytes
            .unwrap_or(DEFAULT_ROW_GROUP_BYTES)
            .max(1)
    }
    fn writer_properties(&self) -> WriterProperties {
        let mut b = WriterProperties::builder()
            .set_compression(Compression::ZSTD(zstd_level()))
            .set_dictionary_enabled(true)
            .set_created_by(concat!("polytrace ", env!("CARGO_PKG_VERSION")).into());
        // Min/max statistics cost a string comparison per row and column:
        // kept where engines prune row groups by them (time, host, metric,
        // type, numbers), left out for long, varied strings no query
        // ranges over.
        for col in NO_STATISTICS {
            b = b.set_column_statistics_enabled(ColumnPath::from(*col), EnabledStatistics::None);
        }
        b.build()
    }
}

fn zstd_level() -> ZstdLevel {
    ZstdLevel::try_new(DEFAULT_ZSTD_LEVEL).unwrap_or_default()
}

fn perr(path: &Path) -> impl Fn(ParquetError) -> Error + '_ {
    move |e| match e {
        ParquetError::External(b) => match b.downcast::<std::io::Error>() {
            Ok(io) => Error::io(path, *io),
            Err(b) => Error::io(path, std::io::Error::other(b.to_string())),
        },
        e => Error::io(path, std::io::Error::other(e.to_string())),
    }
}

/// Strings interned once (metric, instance and host names, units), so
/// that a row costs an index per string column, not a copy or a hash.
#[derive(Default)]
pub struct Interner {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Interner {
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

// ---------------------------------------------------------------------
// Column batches: what the trace writer fills, row by row.

/// A column of one batch as runs of equal values (`None`: null): the
/// strings a whole sample or metric shares (time, source, host, metric,
/// units, semantics) cost one run, not a value per row.
pub struct RunCol<V> {
    runs: Vec<(Option<V>, u32)>,
}

impl<V> Default for RunCol<V> {
    fn default() -> Self {
        RunCol { runs: Vec::new() }
    }
}

impl<V: Copy + PartialEq> RunCol<V> {
    #[inline]
    pub fn push(&mut self, v: Option<V>) {
        self.push_n(v, 1);
    }
    /// `n` rows of `v`.
    #[inline]
    pub fn push_n(&mut self, v: Option<V>, n: u32) {
        if n == 0 {
            return;
        }
        match self.runs.last_mut() {
            Some((last, k)) if *last == v => *k += n,
            _ => self.runs.push((v, n)),
        }
    }
    fn clear(&mut self) {
        self.runs.clear();
    }
}

/// A column of interned strings.
pub type DictCol = RunCol<u32>;

/// A column of numbers, nullable: the values present, and a definition
/// level (1 present, 0 null) per row.
pub struct NumCol<T> {
    vals: Vec<T>,
    def: Vec<i16>,
}

impl<T> Default for NumCol<T> {
    fn default() -> Self {
        NumCol {
            vals: Vec::new(),
            def: Vec::new(),
        }
    }
}

impl<T> NumCol<T> {
    #[inline]
    pub fn append_option(&mut self, v: Option<T>) {
        match v {
            Some(v) => {
                self.vals.push(v);
                self.def.push(1);
            }
            None => self.def.push(0),
        }
    }
    fn clear(&mut self) {
        self.vals.clear();
        self.def.clear();
    }
}

/// Strings end to end in one buffer, cut into values when written.
#[derive(Default)]
pub struct StrBuf {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl StrBuf {
    #[inline]
    fn push(&mut self, s: &str) {
        self.data.extend_from_slice(s.as_bytes());
        self.ends.push(self.data.len());
    }
    fn values(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let v = &self.data[start..e];
            start = e;
            v
        })
    }
    /// The values as byte arrays sharing one buffer; the buffer is empty
    /// after.
    fn take(&mut self) -> Vec<ByteArray> {
        let data = Bytes::from(std::mem::take(&mut self.data));
        let mut start = 0;
        let out = self
            .ends
            .iter()
            .map(|&e| {
                let v = ByteArray::from(data.slice(start..e));
                start = e;
                v
            })
            .collect();
        self.ends.clear();
        out
    }
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

/// The value columns of the samples table (`value_f64`, `value_i64`,
/// `value_str`): the values present in each, and which of them each row
/// fills, as runs (a metric's rows are all of one type, so its rows are
/// one run): one run step per row for the three columns' definition
/// levels.
#[derive(Default)]
pub struct Values {
    f64: Vec<f64>,
    i64: Vec<i64>,
    str: StrBuf,
    filled: Vec<(u8, u32)>,
}

/// Bits of [`Values::filled`].
const F64: u8 = 1;
const I64: u8 = 2;
const STR: u8 = 4;

impl Values {
    #[inline]
    fn filled(&mut self, f: u8) {
        match self.filled.last_mut() {
            Some((last, k)) if *last == f => *k += 1,
            _ => self.filled.push((f, 1)),
        }
    }
    #[inline]
    pub fn push_f64(&mut self, v: f64) {
        self.f64.push(v);
        self.filled(F64);
    }
    #[inline]
    pub fn push_i64(&mut self, v: i64) {
        self.i64.push(v);
        self.filled(I64);
    }
    #[inline]
    pub fn push_str(&mut self, v: &str) {
        self.str.push(v);
        self.filled(STR);
    }
    /// A number no int64 holds: its nearest double and its exact text.
    pub fn push_f64_str(&mut self, v: f64, text: &str) {
        self.f64.push(v);
        self.str.push(text);
        self.filled(F64 | STR);
    }
    fn rows(&self) -> usize {
        self.filled.iter().map(|&(_, n)| n as usize).sum()
    }
    /// The definition levels of the column of bit `f`, as runs.
    fn def(&self, f: u8) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.filled
            .iter()
            .map(move |&(x, n)| (u64::from(x & f != 0), n as usize))
    }
    fn clear(&mut self) {
        self.f64.clear();
        self.i64.clear();
        self.str.clear();
        self.filled.clear();
    }
}

/// A `MAP<string, V>` column: per entry a key and a value; a row with no
/// entries is one empty-map level.
pub struct MapCol<V> {
    keys: StrBuf,
    vals: V,
    rep: Vec<i16>,
    /// 1: an entry (key and value present), 0: an empty map.
    def: Vec<i16>,
    in_row: bool,
}

impl<V: Default> Default for MapCol<V> {
    fn default() -> Self {
        MapCol {
            keys: StrBuf::default(),
            vals: V::default(),
            rep: Vec::new(),
            def: Vec::new(),
            in_row: false,
        }
    }
}

impl<V> MapCol<V> {
    #[inline]
    fn key(&mut self, k: &str) -> &mut V {
        self.rep.push(i16::from(self.in_row));
        self.def.push(1);
        self.in_row = true;
        self.keys.push(k);
        &mut self.vals
    }
    /// The row is complete.
    #[inline]
    pub fn end_row(&mut self) {
        if !self.in_row {
            self.rep.push(0);
            self.def.push(0);
        }
        self.in_row = false;
    }
}

impl MapCol<Vec<i64>> {
    #[inline]
    pub fn insert(&mut self, k: &str, v: i64) {
        self.key(k).push(v);
    }
}

impl MapCol<Vec<f64>> {
    #[inline]
    pub fn insert(&mut self, k: &str, v: f64) {
        self.key(k).push(v);
    }
}

impl MapCol<StrBuf> {
    #[inline]
    pub fn insert(&mut self, k: &str, v: &str) {
        self.key(k).push(v);
    }
}

/// The columns both tables start with: time, source, host, and the
/// row's name (the metric, the event type).
#[derive(Default)]
pub struct Head {
    pub time: RunCol<i64>,
    pub source: DictCol,
    pub host: DictCol,
    pub name: DictCol,
}

impl Head {
    fn write(&mut self, t: &mut Table) -> Result<()> {
        t.times(0, &mut self.time)?;
        t.names(1, &mut self.source)?;
        t.names(2, &mut self.host)?;
        t.names(3, &mut self.name)
    }
}

/// The samples table's columns for one batch.
#[derive(Default)]
pub struct SampleCols {
    pub head: Head,
    pub instance: DictCol,
    pub values: Values,
    pub units: DictCol,
    pub semantics: DictCol,
}

/// How each leaf column of the samples table is written.
pub const SAMPLES_KINDS: &[Kind] = &[
    Kind::Times,
    Kind::Names,
    Kind::Names,
    Kind::Names,
    Kind::Names,
    Kind::Plain,
    Kind::Plain,
    Kind::Plain,
    Kind::Names,
    Kind::Names,
];

impl SampleCols {
    /// Encode the batch into the table's row group; the batch is empty
    /// after.
    pub fn write(&mut self, t: &mut Table, names: &Interner) -> Result<()> {
        let v = &mut self.values;
        let rows = v.rows();
        self.head.write(t)?;
        t.names(4, &mut self.instance)?;
        t.plain(5, rows, v.def(F64), &v.f64)?;
        t.plain(6, rows, v.def(I64), &v.i64)?;
        t.plain(7, rows, v.def(STR), &v.str)?;
        t.names(8, &mut self.units)?;
        t.names(9, &mut self.semantics)?;
        v.clear();
        t.rows_done(rows, names)
    }
}

/// The events table's columns for one batch.
#[derive(Default)]
pub struct EventCols {
    pub head: Head,
    pub cpu: NumCol<i32>,
    pub pid: NumCol<i64>,
    pub stream: DictCol,
    pub fi64: MapCol<Vec<i64>>,
    pub ff64: MapCol<Vec<f64>>,
    pub fstr: MapCol<StrBuf>,
}

/// How each leaf column of the events table is written (the maps' keys
/// and values by the crate's writer: they need repetition levels).
pub const EVENTS_KINDS: &[Kind] = &[
    Kind::Times,
    Kind::Names,
    Kind::Names,
    Kind::Names,
    Kind::Typed,
    Kind::Typed,
    Kind::Names,
    Kind::Typed,
    Kind::Typed,
    Kind::Typed,
    Kind::Typed,
    Kind::Typed,
    Kind::Typed,
];

impl EventCols {
    /// Encode the batch into the table's row group; the batch is empty
    /// after.
    pub fn write(&mut self, t: &mut Table, names: &Interner) -> Result<()> {
        let rows = self.cpu.def.len();
        self.head.write(t)?;
        t.num::<Int32Type>(4, &self.cpu.vals, Some(&self.cpu.def), None)?;
        t.num::<Int64Type>(5, &self.pid.vals, Some(&self.pid.def), None)?;
        t.names(6, &mut self.stream)?;
        self.cpu.clear();
        self.pid.clear();
        let fi = std::mem::take(&mut self.fi64.vals);
        t.map(7, &mut self.fi64, |t, i, def, rep| {
            t.num::<Int64Type>(i, &fi, Some(def), Some(rep))
        })?;
        let ff = std::mem::take(&mut self.ff64.vals);
        t.map(9, &mut self.ff64, |t, i, def, rep| {
            t.num::<DoubleType>(i, &ff, Some(def), Some(rep))
        })?;
        let fs = self.fstr.vals.take();
        t.map(11, &mut self.fstr, |t, i, def, rep| {
            t.num::<ByteArrayType>(i, &fs, Some(def), Some(rep))
        })?;
        t.rows_done(rows, names)
    }
}

// ---------------------------------------------------------------------
// Column chunks of the row group being written.

thread_local! {
    /// One zstd context for the pages this module encodes itself.
    static ZSTD: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

fn zstd_compress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    ZSTD.with(|z| {
        let mut z = z.borrow_mut();
        if z.is_none() {
            *z = Some(zstd::bulk::Compressor::new(DEFAULT_ZSTD_LEVEL)?);
        }
        z.as_mut().expect("set above").compress(data)
    })
}

/// Parquet's RLE / bit-packed hybrid encoding (levels and dictionary
/// indices), `bw` bits a value, fed runs of equal values: a run of eight
/// or more as one RLE run, the rest bit-packed in groups of eight. A
/// column whose rows come in runs costs a step per run, not per row; one
/// of varied values (instances) a store per value and a packing per eight.
struct Hybrid {
    bw: u32,
    /// The run not yet encoded: its value and length.
    v: u64,
    n: usize,
    /// The group of eight being filled.
    group: [u64; 8],
    g: usize,
    /// The open bit-packed block: where its header byte is, its groups.
    head: Option<usize>,
    groups: usize,
}

/// Groups in one bit-packed block at most: its header (groups << 1 | 1)
/// is then one byte, reserved before its values.
const BLOCK_GROUPS: usize = 63;

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Hybrid {
    fn new(bw: u8) -> Hybrid {
        Hybrid {
            bw: bw.into(),
            v: 0,
            n: 0,
            group: [0; 8],
            g: 0,
            head: None,
            groups: 0,
        }
    }

    /// `n` values `v`.
    #[inline]
    fn push(&mut self, v: u64, n: usize, out: &mut Vec<u8>) {
        if v == self.v {
            self.n += n;
            return;
        }
        let (w, k) = (self.v, self.n);
        self.v = v;
        self.n = n;
        // A short run that leaves the group open: stored, nothing more.
        if self.g + k < 8 {
            self.group[self.g..self.g + k].fill(w);
            self.g += k;
        } else {
            self.run(w, k, out);
        }
    }

    /// Encode a run that fills the open group (and maybe more).
    #[cold]
    fn run(&mut self, v: u64, mut n: usize, out: &mut Vec<u8>) {
        if self.g > 0 {
            let t = (8 - self.g).min(n);
            self.group[self.g..self.g + t].fill(v);
            self.g += t;
            n -= t;
            if self.g < 8 {
                return;
            }
            self.pack(out);
        }
        if n >= 8 {
            self.close(out);
            varint((n as u64) << 1, out);
            let width = self.bw.div_ceil(8) as usize;
            out.extend_from_slice(&v.to_le_bytes()[..width]);
        } else {
            self.group[..n].fill(v);
            self.g = n;
        }
    }

    /// Bit-pack the full group into the open block.
    fn pack(&mut self, out: &mut Vec<u8>) {
        if self.head.is_none() {
            self.head = Some(out.len());
            out.push(0);
        }
        let bw = self.bw;
        if bw <= 16 {
            // Eight values of up to 16 bits fit one 128-bit word.
            let mut acc = 0u128;
            for (i, &v) in self.group.iter().enumerate() {
                acc |= u128::from(v) << (i as u32 * bw);
            }
            out.extend_from_slice(&acc.to_le_bytes()[..bw as usize]);
        } else {
            let (mut acc, mut bits) = (0u64, 0);
            for &v in &self.group {
                acc |= v << bits;
                bits += bw;
                while bits >= 8 {
                    out.push(acc as u8);
                    acc >>= 8;
                    bits -= 8;
                }
            }
        }
        self.g = 0;
        self.groups += 1;
        if self.groups == BLOCK_GROUPS {
            self.close(out);
        }
    }

    /// End the open bit-packed block.
    fn close(&mut self, out: &mut [u8]) {
        if let Some(h) = self.head.take() {
            out[h] = (self.groups << 1 | 1) as u8;
            self.groups = 0;
        }
    }

    /// The last group is padded with zeros; readers stop at the page's
    /// value count.
    fn finish(mut self, out: &mut Vec<u8>) {
        let (v, n) = (self.v, self.n);
        self.run(v, n, out);
        if self.g > 0 {
            self.group[self.g..].fill(0);
            self.pack(out);
        }
        self.close(out);
    }
}

/// The hybrid encoding of `vals`, `bw` bits each, appended to `out`.
fn rle_hybrid(vals: impl IntoIterator<Item = (u64, usize)>, bw: u8, out: &mut Vec<u8>) {
    let mut h = Hybrid::new(bw);
    for (v, n) in vals {
        h.push(v, n, out);
    }
    h.finish(out);
}

/// Definition levels (0 or 1) of a data page (v1): their length, then the
/// levels.
fn def_levels(def: impl IntoIterator<Item = (u64, usize)>, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    rle_hybrid(def, 1, out);
    let n = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
}

/// The pages of one column chunk, compressed, and what its metadata needs.
#[derive(Default)]
struct Pages {
    pages: Vec<CompressedPage>,
    bytes: usize,
    values: u64,
    nulls: u64,
}

impl Pages {
    fn data_page(
        &mut self,
        raw: &[u8],
        rows: usize,
        nulls: usize,
        enc: Encoding,
    ) -> std::io::Result<()> {
        let data = zstd_compress(raw)?;
        self.bytes += data.len();
        self.values += rows as u64;
        self.nulls += nulls as u64;
        let page = Page::DataPage {
            buf: Bytes::from(data),
            num_values: rows as u32,
            encoding: enc,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        self.pages.push(CompressedPage::new(page, raw.len()));
        Ok(())
    }

    /// The chunk's bytes (`first`, a dictionary page, before the data
    /// pages) and metadata; empty after, for the next row group.
    fn finish(
        &mut self,
        descr: &ColumnDescPtr,
        first: Option<CompressedPage>,
        encodings: Vec<Encoding>,
        stats: Option<Statistics>,
    ) -> parquet::errors::Result<(Bytes, ColumnCloseResult)> {
        let mut sink = TrackedWrite::new(Vec::with_capacity(self.bytes + 4096));
        let mut w = SerializedPageWriter::new(&mut sink);
        let dict = first.map(|p| w.write_page(p)).transpose()?;
        let mut specs: Vec<PageWriteSpec> = Vec::with_capacity(self.pages.len());
        for p in self.pages.drain(..) {
            specs.push(w.write_page(p)?);
        }
        let all = || dict.iter().chain(&specs);
        let compressed: u64 = all().map(|s| s.compressed_size as u64).sum();
        let uncompressed: u64 = all().map(|s| s.uncompressed_size as u64).sum();
        let mut m = ColumnChunkMetaData::builder(descr.clone())
            .set_compression(Compression::ZSTD(zstd_level()))
            .set_encodings(encodings)
            .set_num_values(self.values as i64)
            .set_total_compressed_size(compressed as i64)
            .set_total_uncompressed_size(uncompressed as i64)
            .set_dictionary_page_offset(dict.as_ref().map(|s| s.offset as i64))
            .set_data_page_offset(specs.first().map_or(0, |s| s.offset as i64));
        if let Some(st) = stats {
            m = m.set_statistics(st);
        }
        let close = ColumnCloseResult {
            bytes_written: compressed,
            rows_written: self.values,
            metadata: m.build()?,
            bloom_filter: None,
            column_index: None,
            offset_index: None,
        };
        self.bytes = 0;
        self.values = 0;
        self.nulls = 0;
        Ok((Bytes::from(sink.into_inner()?), close))
    }
}

/// The values of a dictionary column, in order of first use in the row
/// group.
trait Dict: Default {
    type V: Copy + PartialEq;
    /// The dictionary index of `v`, added if new.
    fn key(&mut self, v: Self::V) -> u32;
    fn len(&self) -> usize;
    /// The dictionary page's values (PLAIN).
    fn plain(&self, names: &Interner, out: &mut Vec<u8>);
    /// Min and max over the dictionary: every entry is used.
    fn stats(&self, names: &Interner, nulls: u64) -> Statistics;
    fn clear(&mut self);
}

/// Interned strings: their id indexes the map, no hashing.
#[derive(Default)]
struct NameDict {
    /// Interned id → dictionary index + 1 (0: not in this row group yet).
    local: Vec<u32>,
    ids: Vec<u32>,
}

impl Dict for NameDict {
    type V = u32;
    #[inline]
    fn key(&mut self, g: u32) -> u32 {
        let g = g as usize;
        if g >= self.local.len() {
            self.local.resize(g + 1, 0);
        }
        if self.local[g] == 0 {
            self.ids.push(g as u32);
            self.local[g] = self.ids.len() as u32;
        }
        self.local[g] - 1
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
    fn plain(&self, names: &Interner, out: &mut Vec<u8>) {
        for &g in &self.ids {
            let s = names.name(g).as_bytes();
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s);
        }
    }
    fn stats(&self, names: &Interner, nulls: u64) -> Statistics {
        let vals = || self.ids.iter().map(|&g| names.name(g));
        let b = |s: &str| ByteArray::from(s.as_bytes().to_vec());
        Statistics::byte_array(
            vals().min().map(b),
            vals().max().map(b),
            None,
            Some(nulls),
            false,
        )
    }
    fn clear(&mut self) {
        for &g in &self.ids {
            self.local[g as usize] = 0;
        }
        self.ids.clear();
    }
}

/// Times: a sample's rows share one, so a lookup per run of rows.
#[derive(Default)]
struct TimeDict {
    index: HashMap<i64, u32>,
    vals: Vec<i64>,
}

impl Dict for TimeDict {
    type V = i64;
    fn key(&mut self, t: i64) -> u32 {
        let n = self.vals.len() as u32;
        *self.index.entry(t).or_insert_with(|| {
            self.vals.push(t);
            n
        })
    }
    fn len(&self) -> usize {
        self.vals.len()
    }
    fn plain(&self, _: &Interner, out: &mut Vec<u8>) {
        for t in &self.vals {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    fn stats(&self, _: &Interner, nulls: u64) -> Statistics {
        let min = self.vals.iter().copied().min();
        let max = self.vals.iter().copied().max();
        Statistics::int64(min, max, None, Some(nulls), false)
    }
    fn clear(&mut self) {
        self.index.clear();
        self.vals.clear();
    }
}

/// A dictionary column's chunk: the row group's dictionary and its data
/// pages of indices.
struct DictChunk<D> {
    descr: ColumnDescPtr,
    stats: bool,
    dict: D,
    pages: Pages,
    /// This page's dictionary indices, as runs.
    keys: Vec<(u32, u32)>,
    buf: Vec<u8>,
}

impl<D: Dict> DictChunk<D> {
    fn new(descr: ColumnDescPtr, stats: bool) -> Self {
        DictChunk {
            descr,
            stats,
            dict: D::default(),
            pages: Pages::default(),
            keys: Vec::new(),
            buf: Vec::new(),
        }
    }

    fn write(&mut self, col: &mut RunCol<D::V>) -> std::io::Result<()> {
        self.keys.clear();
        let (mut rows, mut max) = (0, 0);
        for &(v, n) in &col.runs {
            rows += n as usize;
            if let Some(v) = v {
                let k = self.dict.key(v);
                max = max.max(k);
                self.keys.push((k, n));
            }
        }
        if rows == 0 {
            return Ok(());
        }
        self.buf.clear();
        if self.descr.max_def_level() > 0 {
            let def = col
                .runs
                .iter()
                .map(|&(v, n)| (u64::from(v.is_some()), n as usize));
            def_levels(def, &mut self.buf);
        }
        col.clear();
        let bw = (32 - max.leading_zeros()).max(1) as u8;
        self.buf.push(bw);
        let keys = self.keys.iter().map(|&(k, n)| (u64::from(k), n as usize));
        rle_hybrid(keys, bw, &mut self.buf);
        let nulls = rows - self.keys.iter().map(|&(_, n)| n as usize).sum::<usize>();
        self.pages
            .data_page(&self.buf, rows, nulls, Encoding::RLE_DICTIONARY)
    }

    fn finish(&mut self, names: &Interner) -> parquet::errors::Result<(Bytes, ColumnCloseResult)> {
        let mut plain = Vec::new();
        self.dict.plain(names, &mut plain);
        let page = Page::DictionaryPage {
            buf: Bytes::from(zstd_compress(&plain)?),
            num_values: self.dict.len() as u32,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        };
        let stats = self.stats.then(|| self.dict.stats(names, self.pages.nulls));
        let r = self.pages.finish(
            &self.descr,
            Some(CompressedPage::new(page, plain.len())),
            vec![Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY],
            stats,
        );
        self.dict.clear();
        r
    }
}

/// Values that go into pages as they are (PLAIN): numbers, and varied
/// strings.
trait PlainValues {
    fn len(&self) -> usize;
    fn plain(&self, out: &mut Vec<u8>);
    /// Min and max of these values, merged into `mm`.
    fn min_max(&self, mm: &mut MinMax);
}

/// A column chunk's min and max so far.
#[derive(Default)]
enum MinMax {
    #[default]
    None,
    I64(i64, i64),
    F64(f64, f64),
}

/// Numbers, written as their little-endian bytes.
trait Number: Copy {
    fn put(self, out: &mut Vec<u8>);
    /// Min and max of `vals`, merged into `mm`.
    fn merge(vals: &[Self], mm: &mut MinMax);
}

impl Number for i64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn merge(vals: &[i64], mm: &mut MinMax) {
        let (Some(&lo), Some(&hi)) = (vals.iter().min(), vals.iter().max()) else {
            return;
        };
        *mm = match *mm {
            MinMax::I64(a, b) => MinMax::I64(a.min(lo), b.max(hi)),
            _ => MinMax::I64(lo, hi),
        };
    }
}

impl Number for f64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn merge(vals: &[f64], mm: &mut MinMax) {
        // NaN orders nowhere: left out, as the format asks.
        for &v in vals.iter().filter(|v| !v.is_nan()) {
            *mm = match *mm {
                MinMax::F64(a, b) => MinMax::F64(a.min(v), b.max(v)),
                _ => MinMax::F64(v, v),
            };
        }
    }
}

impl<T: Number> PlainValues for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn plain(&self, out: &mut Vec<u8>) {
        for &v in self {
            v.put(out);
        }
    }
    fn min_max(&self, mm: &mut MinMax) {
        T::merge(self, mm);
    }
}

impl PlainValues for StrBuf {
    fn len(&self) -> usize {
        self.ends.len()
    }
    fn plain(&self, out: &mut Vec<u8>) {
        for v in self.values() {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
    fn min_max(&self, _: &mut MinMax) {}
}

/// A column of PLAIN pages (values written as they are).
struct PlainChunk {
    descr: ColumnDescPtr,
    stats: bool,
    mm: MinMax,
    pages: Pages,
    buf: Vec<u8>,
}

impl PlainChunk {
    fn write(
        &mut self,
        rows: usize,
        def: impl Iterator<Item = (u64, usize)>,
        vals: &dyn PlainValues,
    ) -> std::io::Result<()> {
        if rows == 0 {
            return Ok(());
        }
        self.buf.clear();
        def_levels(def, &mut self.buf);
        vals.plain(&mut self.buf);
        if self.stats {
            vals.min_max(&mut self.mm);
        }
        let nulls = rows - vals.len();
        self.pages
            .data_page(&self.buf, rows, nulls, Encoding::PLAIN)
    }

    fn finish(&mut self) -> parquet::errors::Result<(Bytes, ColumnCloseResult)> {
        let nulls = Some(self.pages.nulls);
        let stats = self.stats.then(|| match std::mem::take(&mut self.mm) {
            MinMax::I64(lo, hi) => Statistics::int64(Some(lo), Some(hi), None, nulls, false),
            // Zeros as the format orders them: -0 the least, +0 the most.
            MinMax::F64(lo, hi) => Statistics::double(
                Some(if lo == 0.0 { -0.0 } else { lo }),
                Some(if hi == 0.0 { 0.0 } else { hi }),
                None,
                nulls,
                false,
            ),
            MinMax::None => match self.descr.physical_type() {
                PhysicalType::DOUBLE => Statistics::double(None, None, None, nulls, false),
                _ => Statistics::int64(None, None, None, nulls, false),
            },
        });
        self.pages.finish(
            &self.descr,
            None,
            vec![Encoding::PLAIN, Encoding::RLE],
            stats,
        )
    }
}

type Sink = Arc<Mutex<TrackedWrite<Vec<u8>>>>;

/// Pages of one of the crate's column writers, kept in memory until the
/// row group is spliced into the file.
struct MemPages(Sink);

impl PageWriter for MemPages {
    fn write_page(&mut self, page: CompressedPage) -> parquet::errors::Result<PageWriteSpec> {
        let mut sink = self.0.lock().expect("one writer per sink");
        SerializedPageWriter::new(&mut sink).write_page(page)
    }
    fn close(&mut self) -> parquet::errors::Result<()> {
        Ok(())
    }
}

/// A column written by the parquet crate's own column writer.
struct TypedChunk {
    descr: ColumnDescPtr,
    sink: Sink,
    w: Option<ColumnWriter<'static>>,
}

impl TypedChunk {
    fn writer(&mut self, props: &WriterPropertiesPtr) -> &mut ColumnWriter<'static> {
        let (descr, sink) = (&self.descr, &self.sink);
        self.w.get_or_insert_with(|| {
            get_column_writer(
                descr.clone(),
                props.clone(),
                Box::new(MemPages(sink.clone())),
            )
        })
    }
    fn bytes(&self) -> usize {
        self.sink
            .lock()
            .expect("one writer per sink")
            .bytes_written()
    }
    fn finish(&mut self) -> parquet::errors::Result<(Bytes, ColumnCloseResult)> {
        let close = self.w.take().expect("a row group has rows").close()?;
        let sink = std::mem::replace(
            &mut *self.sink.lock().expect("one writer per sink"),
            TrackedWrite::new(Vec::new()),
        );
        Ok((Bytes::from(sink.into_inner()?), close))
    }
}

/// How a leaf column is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// Dictionary pages from interned ids.
    Names,
    /// Dictionary pages of times.
    Times,
    /// PLAIN pages, min/max kept as the values pass.
    Plain,
    /// The parquet crate's column writer (repeated columns).
    Typed,
}

enum Chunk {
    Names(DictChunk<NameDict>),
    Times(DictChunk<TimeDict>),
    Plain(PlainChunk),
    Typed(Box<TypedChunk>),
}

/// One Parquet file: the schema is fixed when it is created.
pub struct Table {
    path: PathBuf,
    w: SerializedFileWriter<BufWriter<File>>,
    props: WriterPropertiesPtr,
    chunks: Vec<Chunk>,
    group_rows: usize,
    max_rows: usize,
    max_bytes: usize,
    rows: u64,
}

impl Table {
    /// `kinds`: how each leaf column of `schema` is written.
    pub fn new(path: &Path, schema: SchemaDescPtr, kinds: &[Kind], props: &Props) -> Result<Table> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let f = File::create(path).map_err(|e| Error::io(path, e))?;
        let wp = Arc::new(props.writer_properties());
        let w = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 18, f),
            schema.root_schema_ptr(),
            wp.clone(),
        )
        .map_err(perr(path))?;
        debug_assert_eq!(kinds.len(), schema.num_columns());
        let chunks = schema
            .columns()
            .iter()
            .zip(kinds)
            .map(|(d, k)| {
                let stats = wp.statistics_enabled(d.path()) != EnabledStatistics::None;
                match k {
                    Kind::Names => Chunk::Names(DictChunk::new(d.clone(), stats)),
                    Kind::Times => Chunk::Times(DictChunk::new(d.clone(), stats)),
                    Kind::Plain => Chunk::Plain(PlainChunk {
                        descr: d.clone(),
                        stats,
                        mm: MinMax::None,
                        pages: Pages::default(),
                        buf: Vec::new(),
                    }),
                    Kind::Typed => Chunk::Typed(Box::new(TypedChunk {
                        descr: d.clone(),
                        sink: Arc::new(Mutex::new(TrackedWrite::new(Vec::new()))),
                        w: None,
                    })),
                }
            })
            .collect();
        Ok(Table {
            path: path.to_path_buf(),
            w,
            props: wp,
            chunks,
            group_rows: 0,
            max_rows: props.row_group_rows(),
            max_bytes: props.row_group_bytes(),
            rows: 0,
        })
    }

    fn names(&mut self, i: usize, col: &mut DictCol) -> Result<()> {
        let Chunk::Names(c) = &mut self.chunks[i] else {
            unreachable!("column {i} is a names column")
        };
        c.write(col).map_err(|e| Error::io(&self.path, e))
    }

    fn times(&mut self, i: usize, col: &mut RunCol<i64>) -> Result<()> {
        let Chunk::Times(c) = &mut self.chunks[i] else {
            unreachable!("column {i} is a times column")
        };
        c.write(col).map_err(|e| Error::io(&self.path, e))
    }

    fn plain(
        &mut self,
        i: usize,
        rows: usize,
        def: impl Iterator<Item = (u64, usize)>,
        vals: &dyn PlainValues,
    ) -> Result<()> {
        let Chunk::Plain(c) = &mut self.chunks[i] else {
            unreachable!("column {i} is a plain column")
        };
        c.write(rows, def, vals)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn num<T: DataType>(
        &mut self,
        i: usize,
        vals: &[T::T],
        def: Option<&[i16]>,
        rep: Option<&[i16]>,
    ) -> Result<()> {
        let Chunk::Typed(c) = &mut self.chunks[i] else {
            unreachable!("column {i} is written by the crate's writer")
        };
        let w = get_typed_column_writer_mut::<T>(c.writer(&self.props));
        w.write_batch(vals, def, rep).map_err(perr(&self.path))?;
        Ok(())
    }

    /// A map's key (leaf `i`) and value (leaf `i + 1`) columns.
    fn map<V>(
        &mut self,
        i: usize,
        m: &mut MapCol<V>,
        value: impl FnOnce(&mut Table, usize, &[i16], &[i16]) -> Result<()>,
    ) -> Result<()> {
        let keys = m.keys.take();
        self.num::<ByteArrayType>(i, &keys, Some(&m.def), Some(&m.rep))?;
        // An entry's value is never null: definition level 2.
        for d in &mut m.def {
            *d *= 2;
        }
        value(self, i + 1, &m.def, &m.rep)?;
        m.def.clear();
        m.rep.clear();
        Ok(())
    }

    fn rows_done(&mut self, rows: usize, names: &Interner) -> Result<()> {
        self.group_rows += rows;
        self.rows += rows as u64;
        if self.group_rows >= self.max_rows || self.encoded_bytes() >= self.max_bytes {
            self.end_group(names)?;
        }
        Ok(())
    }

    fn encoded_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Names(d) => d.pages.bytes,
                Chunk::Times(d) => d.pages.bytes,
                Chunk::Plain(p) => p.pages.bytes,
                Chunk::Typed(t) => t.bytes(),
            })
            .sum()
    }

    fn end_group(&mut self, names: &Interner) -> Result<()> {
        if self.group_rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let mut g = self.w.next_row_group().map_err(perr(path))?;
        for c in &mut self.chunks {
            let (bytes, close) = match c {
                Chunk::Names(d) => d.finish(names),
                Chunk::Times(d) => d.finish(names),
                Chunk::Plain(p) => p.finish(),
                Chunk::Typed(t) => t.finish(),
            }
            .map_err(perr(path))?;
            g.append_column(&bytes, close).map_err(perr(path))?;
        }
        g.close().map_err(perr(path))?;
        self.group_rows = 0;
        Ok(())
    }

    /// Write the footer; the rows written.
    pub fn close(mut self, names: &Interner) -> Result<u64> {
        self.end_group(names)?;
        self.w.close().map_err(perr(&self.path))?;
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode the hybrid encoding back (the format's definition, by hand).
    fn decode(mut b: &[u8], bw: u8, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < n {
            let mut h = 0u64;
            let mut shift = 0;
            loop {
                let x = b[0];
                b = &b[1..];
                h |= u64::from(x & 0x7f) << shift;
                shift += 7;
                if x < 0x80 {
                    break;
                }
            }
            if h & 1 == 0 {
                let w = usize::from(bw).div_ceil(8);
                let mut v = [0u8; 8];
                v[..w].copy_from_slice(&b[..w]);
                b = &b[w..];
                out.extend(std::iter::repeat_n(
                    u64::from_le_bytes(v),
                    (h >> 1) as usize,
                ));
            } else {
                let count = (h >> 1) as usize * 8;
                for k in 0..count {
                    let bit = k * usize::from(bw);
                    let mut v = 0u64;
                    for j in 0..usize::from(bw) {
                        let p = bit + j;
                        v |= u64::from(b[p / 8] >> (p % 8) & 1) << j;
                    }
                    out.push(v);
                }
                b = &b[count * usize::from(bw) / 8..];
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn hybrid_round_trip() {
        let mut vals: Vec<u64> = (0..37).map(|i| i * 7 % 13).collect();
        vals.extend(std::iter::repeat_n(5, 20));
        vals.extend([1, 2, 3]);
        vals.extend(std::iter::repeat_n(1000, 9));
        vals.extend((0..3000).map(|i| i % 1001));
        vals.extend(std::iter::repeat_n(7, 3));
        let mut out = Vec::new();
        rle_hybrid(vals.iter().map(|&v| (v, 1)), 10, &mut out);
        assert_eq!(decode(&out, 10, vals.len()), vals);
        // The same values given as runs encode the same.
        let mut runs: Vec<(u64, usize)> = Vec::new();
        for &v in &vals {
            match runs.last_mut() {
                Some((w, n)) if *w == v => *n += 1,
                _ => runs.push((v, 1)),
            }
        }
        let mut again = Vec::new();
        rle_hybrid(runs.iter().copied(), 10, &mut again);
        assert_eq!(again, out);
        let levels: Vec<u64> = (0..100).map(|i| u64::from(i % 3 != 0 || i > 50)).collect();
        let mut out = Vec::new();
        rle_hybrid(levels.iter().map(|&v| (v, 1)), 1, &mut out);
        assert_eq!(decode(&out, 1, levels.len()), levels);
        // Runs longer than a page's worth, and 32-bit values.
        let mut out = Vec::new();
        rle_hybrid(
            [(u64::from(u32::MAX), 100_000), (3, 5), (9, 700)],
            32,
            &mut out,
        );
        let want: Vec<u64> = std::iter::repeat_n(u64::from(u32::MAX), 100_000)
            .chain(std::iter::repeat_n(3, 5))
            .chain(std::iter::repeat_n(9, 700))
            .collect();
        assert_eq!(decode(&out, 32, want.len()), want);
    }
}
