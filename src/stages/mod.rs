//! Conversion stages: small [`TraceReader`](crate::model::TraceReader)
//! adapters that sit between a reader and a writer (or a listing). Each
//! takes the stream it wraps and yields a stream of the same model.

pub mod clock;
pub mod counters;
pub mod filter;
pub mod framing;
pub mod kpi;
pub mod merge;
pub mod origin;
pub mod reorder;
pub mod window;

pub use clock::RawClocks;
pub use counters::{EventCounters, EVENT_COUNTER_DOMAIN};
pub use filter::Filter;
pub use framing::Unframe;
pub use kpi::KpiFromProc;
pub use merge::{Merge, MergeInput};
pub use origin::Origin;
pub use reorder::Reorder;
pub use window::Window;
