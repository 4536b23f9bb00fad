//! Heap allocations per converted item: runs one conversion in-process
//! under a counting global allocator and prints allocations (and bytes)
//! per data item that reached the writer.
//!
//! cargo run --release --example alloc_count -- INPUT OUTPUT FORMAT
//! (e.g. `capture.dlt /tmp/out pcp`; OUTPUT must not exist)

use polytrace::model::{Header, Item, TraceReader};
use polytrace::options::{ReadOptions, WriteOptions};
use polytrace::pipeline::{self, Dest};
use polytrace::Result;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(l.size() as u64, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(n as u64, Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Counts the data items the writer is given.
struct Count {
    inner: Box<dyn TraceReader>,
    items: u64,
}

impl TraceReader for Count {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        let it = self.inner.next_item()?;
        if it.as_ref().is_some_and(Item::is_data) {
            self.items += 1;
        }
        Ok(it)
    }
}

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, to] = a.as_slice() else {
        eprintln!("usage: alloc_count INPUT OUTPUT FORMAT");
        std::process::exit(2);
    };
    let to = polytrace::formats::get(
        polytrace::model::FormatId::from_name(to).unwrap_or_else(|| panic!("unknown format {to}")),
    );
    let (inp, fmt) = pipeline::resolve_input(input.as_ref(), None)?;
    let reader = fmt.open(&inp, &ReadOptions::default())?;
    let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
    let counted = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let c = counted.clone();
    // The count is read back through a wrapper that reports on drop.
    struct Report(Count, std::rc::Rc<std::cell::Cell<u64>>);
    impl TraceReader for Report {
        fn header(&self) -> &Header {
            self.0.header()
        }
        fn next_item(&mut self) -> Result<Option<Item>> {
            let it = self.0.next_item()?;
            self.1.set(self.0.items);
            Ok(it)
        }
    }
    let r = Box::new(Report(
        Count {
            inner: reader,
            items: 0,
        },
        c,
    ));
    let out = PathBuf::from(output);
    pipeline::convert(
        r,
        &[PathBuf::from(input)],
        to,
        Dest::Path {
            path: &out,
            force: false,
        },
        &WriteOptions::default(),
    )?;
    let n = counted.get().max(1);
    let (da, db) = (ALLOCS.load(Relaxed) - a0, BYTES.load(Relaxed) - b0);
    println!(
        "{} items, {da} allocations ({:.2} per item), {:.0} bytes allocated per item",
        n,
        da as f64 / n as f64,
        db as f64 / n as f64
    );
    Ok(())
}
