//! polytrace: read, convert, dump and record traces in six unrelated formats
//! through one shared model.

pub mod cfmt;
pub mod cleanup;
pub mod cli;
pub mod error;
pub mod formats;
pub mod info;
pub mod input;
pub mod listing;
pub mod model;
pub mod options;
pub mod output;
pub mod pipeline;
pub mod record;
pub mod split;
pub mod stages;

pub use error::{Diagnostic, Error, Position, Result, Severity};
