//! Conversion stages: small [`TraceReader`](crate::model::TraceReader)
//! adapters that sit between a reader and a writer (or a listing). Each
//! takes the stream it wraps and yields a stream of the same model.

/// `TraceReader` methods a stage passes to its `inner` reader unchanged,
/// named in its `impl TraceReader`: `pass_to_inner!(header, progress);`
/// (`described`: header, diagnostics, native_counts and progress).
macro_rules! pass_to_inner {
    ($($m:ident),* $(,)?) => { $(pass_to_inner!(@ $m);)* };
    // What a stage that leaves the stream's description alone passes on.
    (@ described) => {
        pass_to_inner!(header, diagnostics, native_counts, progress);
    };
    (@ header) => {
        fn header(&self) -> &crate::model::Header {
            self.inner.header()
        }
    };
    (@ diagnostics) => {
        fn diagnostics(&self) -> &[crate::error::Diagnostic] {
            self.inner.diagnostics()
        }
    };
    (@ native_counts) => {
        fn native_counts(&self) -> Vec<(String, u64)> {
            self.inner.native_counts()
        }
    };
    (@ progress) => {
        fn progress(&self) -> Option<(u64, u64)> {
            self.inner.progress()
        }
    };
    (@ recycle) => {
        fn recycle(&mut self, item: crate::model::Item) {
            self.inner.recycle(item);
        }
    };
    (@ restarts) => {
        fn restarts(&self) -> u64 {
            self.inner.restarts()
        }
    };
    (@ recycle_batch) => {
        fn recycle_batch(&mut self, items: &mut Vec<crate::model::Item>) {
            self.inner.recycle_batch(items);
        }
    };
}

pub mod clock;
pub mod counters;
pub mod derive;
pub mod filter;
pub mod framing;
pub mod kpi;
pub mod merge;
pub mod origin;
pub mod rate;
pub mod reorder;
pub mod window;

pub use clock::RawClocks;
pub use counters::{EventCounters, EVENT_COUNTER_DOMAIN};
pub use derive::{Derive, DERIVED_DOMAIN};
pub use filter::Filter;
pub use framing::Unframe;
pub use kpi::KpiFromProc;
pub use merge::{Merge, MergeInput};
pub use origin::Origin;
pub use rate::Rates;
pub use reorder::Reorder;
pub use window::Window;
