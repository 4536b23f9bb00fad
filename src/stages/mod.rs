//! Conversion stages: small [`TraceReader`](crate::model::TraceReader)
//! adapters that sit between a reader and a writer (or a listing). Each
//! takes the stream it wraps and yields a stream of the same model.

pub mod counters;
pub mod filter;
pub mod framing;
pub mod merge;
pub mod window;

pub use counters::{EventCounters, EVENT_COUNTER_DOMAIN};
pub use filter::Filter;
pub use framing::Unframe;
pub use merge::{Merge, MergeInput};
pub use window::Window;
