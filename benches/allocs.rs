//! Heap allocations per converted item, counted by a global allocator that
//! wraps the system one (only in this bench binary, never in polytrace).
//!
//! `cargo bench --bench allocs -- [DLT_FILE] [PCP_ARCHIVE]`: converts
//! DLT → PCP, PCP → LTT, the corpus `smp_example` LTT → timeline, and LTT and PCP
//! → Perfetto (into a
//! temporary directory) as `polytrace convert` does, and prints per conversion the items read, the values they
//! carry, and the allocations (and bytes) per item and per value. Defaults:
//! the corpus capture `kpi-capture.dlt` concatenated 20 times, and the PCP
//! testsuite archive `pcp-pidstat-process-args` (else the corpus `live_v3`).

use polytrace::formats;
use polytrace::input::Input;
use polytrace::model::{Header, Item, TraceReader};
use polytrace::options::{ReadOptions, WriteOptions};
use polytrace::pipeline::{self, Dest};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
/// Allocations made while the reader (and its stages) produced an item.
static READER: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        REALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new.saturating_sub(l.size()) as u64, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts what passes through: items, and the values they carry.
struct Count {
    inner: Box<dyn TraceReader>,
    items: Rc<Cell<u64>>,
    values: Rc<Cell<u64>>,
}

impl TraceReader for Count {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> polytrace::Result<Option<Item>> {
        let a0 = ALLOCS.load(Ordering::Relaxed);
        let it = self.inner.next_item()?;
        READER.fetch_add(ALLOCS.load(Ordering::Relaxed) - a0, Ordering::Relaxed);
        if let Some(i) = &it {
            self.items.set(self.items.get() + 1);
            let v = match i {
                Item::Sample(s) => s
                    .metrics
                    .iter()
                    .map(|m| m.values.as_ref().map_or(1, |v| v.len() as u64))
                    .sum(),
                Item::Event(_) => 1,
                _ => 0,
            };
            self.values.set(self.values.get() + v);
        }
        Ok(it)
    }
    fn diagnostics(&self) -> &[polytrace::Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
    fn progress(&self) -> Option<(u64, u64)> {
        self.inner.progress()
    }
    fn recycle(&mut self, item: Item) {
        self.inner.recycle(item);
    }
    fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        self.inner.recycle_batch(items);
    }
    // Passed on as a stage does, so the reader runs as in the command
    // (event runs, restarts), not a path only the benchmark takes.
    fn event_runs(&mut self) -> bool {
        self.inner.event_runs()
    }
    fn restarts(&self) -> u64 {
        self.inner.restarts()
    }
}

fn convert(what: &str, src: &Path, to: polytrace::model::FormatId, out: &Path) {
    let input = Input::resolve(src).expect("input");
    let from = formats::detect(&input).expect("format");
    let (items, values) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let t0 = std::time::Instant::now();
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let r0 = REALLOCS.load(Ordering::Relaxed);
    let b0 = BYTES.load(Ordering::Relaxed);
    let rd0 = READER.load(Ordering::Relaxed);
    let reader = from
        .open(&input, &ReadOptions::default())
        .expect("open input");
    let reader = Box::new(Count {
        inner: reader,
        items: items.clone(),
        values: values.clone(),
    });
    let dest = Dest::Path {
        path: out,
        force: true,
    };
    let members = input.member_paths();
    pipeline::convert(
        reader,
        &members,
        formats::get(to),
        dest,
        &WriteOptions::default(),
    )
    .expect("convert");
    let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    let reallocs = REALLOCS.load(Ordering::Relaxed) - r0;
    let bytes = BYTES.load(Ordering::Relaxed) - b0;
    let reader = READER.load(Ordering::Relaxed) - rd0;
    let (n, v) = (items.get().max(1) as f64, values.get().max(1) as f64);
    println!(
        "{what:<10} {:>10} items {:>11} values  {:>6.2} allocs/item ({:.2} with reallocs)  \
         {:>6.3} allocs/value (reading {:.3}, the rest {:.3})  {:>7.0} bytes/item  {:.2} s",
        items.get(),
        values.get(),
        allocs as f64 / n,
        (allocs + reallocs) as f64 / n,
        allocs as f64 / v,
        reader as f64 / v,
        (allocs - reader) as f64 / v,
        bytes as f64 / n,
        t0.elapsed().as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes --bench; anything else not a path is ignored.
    let args: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dlt = match args.first() {
        Some(p) => p.clone(),
        None => {
            let one = std::fs::read(root.join("testdata/kpi/kpi-capture.dlt"))
                .expect("testdata/kpi/kpi-capture.dlt");
            let p = tmp.path().join("capture-x20.dlt");
            std::fs::write(&p, one.repeat(20)).expect("write input");
            p
        }
    };
    let pcp = match args.get(1) {
        Some(p) => p.clone(),
        None => {
            let ts = Path::new("/var/lib/pcp/testsuite/archives/pcp-pidstat-process-args");
            if ts.with_extension("index").is_file() {
                ts.to_path_buf()
            } else {
                root.join("testdata/pcp/live_v3")
            }
        }
    };
    println!("allocations counted from opening the input to the committed output");
    use polytrace::model::FormatId;
    let ltt = root.join("testdata/ltt/smp_example");
    for (title, what, src, to, out) in [
        ("DLT -> PCP", "DLT->PCP", &dlt, FormatId::Pcp, "out-pcp"),
        ("PCP -> LTT", "PCP->LTT", &pcp, FormatId::Ltt, "out.ltt"),
        ("LTT -> timeline", "LTT->TL", &ltt, FormatId::Timeline, "tl"),
        (
            "LTT -> Perfetto",
            "LTT->PF",
            &ltt,
            FormatId::Perfetto,
            "out.perfetto-trace",
        ),
        (
            "PCP -> Perfetto",
            "PCP->PF",
            &pcp,
            FormatId::Perfetto,
            "out-pcp.perfetto-trace",
        ),
    ] {
        println!("{title}: {}", src.display());
        convert(what, src, to, &tmp.path().join(out));
    }
}
