//! One Parquet file being written, shaped like arrow-rs's `ArrowWriter`
//! (docs/design: `new(sink, schema, props)`, `write`, `close`): rows are
//! gathered into column batches of a fixed number of rows, each batch goes
//! to the `ArrowWriter`, which ends a row group at whichever of its bounds
//! (rows, bytes) comes first. Memory is one batch plus one row group in
//! its encoded form, whatever the input's size; `close` writes the footer.

use crate::error::{Error, Result};
use arrow_array::builder::{Float64Builder, Int64Builder, MapBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per column batch handed to the writer.
pub const DEFAULT_BATCH_ROWS: usize = 64 * 1024;
/// A row group ends at this many rows (arrow-rs's default) ...
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
    fn writer_properties(&self) -> WriterProperties {
        let level = ZstdLevel::try_new(DEFAULT_ZSTD_LEVEL).unwrap_or_default();
        let b = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_dictionary_enabled(true)
            .set_max_row_group_row_count(Some(
                self.row_group_rows.unwrap_or(DEFAULT_ROW_GROUP_ROWS).max(1),
            ))
            .set_max_row_group_bytes(Some(
                self.row_group_bytes
                    .unwrap_or(DEFAULT_ROW_GROUP_BYTES)
                    .max(1),
            ))
            .set_created_by(concat!("polytrace ", env!("CARGO_PKG_VERSION")).into());
        // Min/max statistics cost a string comparison per row and column
        // (a third of the writer's time on pcp-pidstat-process-args): kept
        // where engines prune row groups by them (time, host, metric,
        // type, numbers), left out for long, varied strings no query
        // ranges over.
        let mut b = b;
        for col in NO_STATISTICS {
            b = b.set_column_statistics_enabled(ColumnPath::from(*col), EnabledStatistics::None);
        }
        b.build()
    }
}

fn perr(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> Error + '_ {
    move |e| match e {
        parquet::errors::ParquetError::External(b) => match b.downcast::<std::io::Error>() {
            Ok(io) => Error::io(path, *io),
            Err(b) => Error::io(path, std::io::Error::other(b.to_string())),
        },
        e => Error::io(path, std::io::Error::other(e.to_string())),
    }
}

/// One Parquet file: the schema is fixed when it is created.
pub struct Table {
    path: PathBuf,
    w: ArrowWriter<BufWriter<File>>,
    rows: u64,
}

impl Table {
    pub fn new(path: &Path, schema: SchemaRef, props: &Props) -> Result<Table> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let f = File::create(path).map_err(|e| Error::io(path, e))?;
        let w = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 18, f),
            schema,
            Some(props.writer_properties()),
        )
        .map_err(perr(path))?;
        Ok(Table {
            path: path.to_path_buf(),
            w,
            rows: 0,
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        self.w.write(batch).map_err(perr(&self.path))
    }

    /// Write the footer; the rows written.
    pub fn close(self) -> Result<u64> {
        let path = self.path;
        self.w.close().map_err(perr(&path))?;
        Ok(self.rows)
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

/// A dictionary column of one batch: keys into a batch-local dictionary
/// holding the interned strings the batch uses.
#[derive(Default)]
pub struct DictCol {
    keys: Vec<i32>,
    valid: Vec<bool>,
    any_null: bool,
    /// Interned id → batch-local key + 1 (0: not in this batch yet).
    local: Vec<i32>,
    used: Vec<u32>,
}

impl DictCol {
    #[inline]
    pub fn push(&mut self, id: Option<u32>) {
        match id {
            Some(g) => {
                let g = g as usize;
                if g >= self.local.len() {
                    self.local.resize(g + 1, 0);
                }
                if self.local[g] == 0 {
                    self.used.push(g as u32);
                    self.local[g] = self.used.len() as i32;
                }
                self.keys.push(self.local[g] - 1);
                self.valid.push(true);
            }
            None => {
                self.keys.push(0);
                self.valid.push(false);
                self.any_null = true;
            }
        }
    }
    pub fn finish(&mut self, names: &Interner) -> ArrayRef {
        let values = StringArray::from_iter_values(self.used.iter().map(|&g| names.name(g)));
        for &g in &self.used {
            self.local[g as usize] = 0;
        }
        self.used.clear();
        let nulls = self
            .any_null
            .then(|| arrow_buffer::NullBuffer::from(std::mem::take(&mut self.valid)));
        self.valid.clear();
        self.any_null = false;
        let keys = Int32Array::new(std::mem::take(&mut self.keys).into(), nulls);
        Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values))
                .expect("keys index the batch dictionary"),
        )
    }
}

/// Columns of the time axis: nanoseconds since the epoch, UTC.
#[derive(Default)]
pub struct TimeCol(Vec<i64>);

impl TimeCol {
    #[inline]
    pub fn push(&mut self, t: i64) {
        self.0.push(t);
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn finish(&mut self) -> ArrayRef {
        Arc::new(
            arrow_array::TimestampNanosecondArray::new(std::mem::take(&mut self.0).into(), None)
                .with_timezone("UTC"),
        )
    }
}

/// The samples table's columns for one batch.
pub struct SampleCols {
    pub time: TimeCol,
    pub source: DictCol,
    pub host: DictCol,
    pub metric: DictCol,
    pub instance: DictCol,
    pub f64: Float64Builder,
    pub i64: Int64Builder,
    pub str: StringBuilder,
    pub units: DictCol,
    pub semantics: DictCol,
}

impl SampleCols {
    pub fn new(rows: usize) -> SampleCols {
        SampleCols {
            time: TimeCol(Vec::with_capacity(rows)),
            source: DictCol::default(),
            host: DictCol::default(),
            metric: DictCol::default(),
            instance: DictCol::default(),
            f64: Float64Builder::with_capacity(rows),
            i64: Int64Builder::with_capacity(rows),
            str: StringBuilder::new(),
            units: DictCol::default(),
            semantics: DictCol::default(),
        }
    }
    pub fn batch(&mut self, schema: &SchemaRef, names: &Interner) -> RecordBatch {
        let cols: Vec<ArrayRef> = vec![
            self.time.finish(),
            self.source.finish(names),
            self.host.finish(names),
            self.metric.finish(names),
            self.instance.finish(names),
            Arc::new(self.f64.finish()),
            Arc::new(self.i64.finish()),
            Arc::new(self.str.finish()),
            self.units.finish(names),
            self.semantics.finish(names),
        ];
        RecordBatch::try_new(schema.clone(), cols).expect("columns match the samples schema")
    }
}

/// The events table's columns for one batch.
pub struct EventCols {
    pub time: TimeCol,
    pub source: DictCol,
    pub host: DictCol,
    pub ty: DictCol,
    pub cpu: arrow_array::builder::Int32Builder,
    pub pid: Int64Builder,
    pub stream: DictCol,
    pub fi64: MapBuilder<StringBuilder, Int64Builder>,
    pub ff64: MapBuilder<StringBuilder, Float64Builder>,
    pub fstr: MapBuilder<StringBuilder, StringBuilder>,
}

impl EventCols {
    pub fn new(rows: usize) -> EventCols {
        EventCols {
            time: TimeCol(Vec::with_capacity(rows)),
            source: DictCol::default(),
            host: DictCol::default(),
            ty: DictCol::default(),
            cpu: arrow_array::builder::Int32Builder::with_capacity(rows),
            pid: Int64Builder::with_capacity(rows),
            stream: DictCol::default(),
            fi64: MapBuilder::new(None, StringBuilder::new(), Int64Builder::new()),
            ff64: MapBuilder::new(None, StringBuilder::new(), Float64Builder::new()),
            fstr: MapBuilder::new(None, StringBuilder::new(), StringBuilder::new()),
        }
    }
    pub fn batch(&mut self, schema: &SchemaRef, names: &Interner) -> RecordBatch {
        let cols: Vec<ArrayRef> = vec![
            self.time.finish(),
            self.source.finish(names),
            self.host.finish(names),
            self.ty.finish(names),
            Arc::new(self.cpu.finish()),
            Arc::new(self.pid.finish()),
            self.stream.finish(names),
            Arc::new(self.fi64.finish()),
            Arc::new(self.ff64.finish()),
            Arc::new(self.fstr.finish()),
        ];
        RecordBatch::try_new(schema.clone(), cols).expect("columns match the events schema")
    }
}
