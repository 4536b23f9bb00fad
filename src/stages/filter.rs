//! The filters (`--event`, `--metric`, `--instance`, `--cpu` and the
//! `--exclude-…` forms) as a stage. The rules live with the model
//! ([`crate::model::select`]) so native listings apply the same ones.

use crate::error::Result;
use crate::model::{Item, ItemFilter, Selection, TraceReader};
use std::collections::VecDeque;

pub struct Filter {
    inner: Box<dyn TraceReader>,
    f: ItemFilter,
    queue: VecDeque<Item>,
    done: bool,
}

impl Filter {
    /// Wrap `inner`; an empty selection leaves it as it is.
    pub fn wrap(inner: Box<dyn TraceReader>, sel: &Selection) -> Box<dyn TraceReader> {
        if sel.is_empty() {
            return inner;
        }
        Box::new(Filter {
            inner,
            f: ItemFilter::new(sel.clone()),
            queue: VecDeque::new(),
            done: false,
        })
    }
}

impl TraceReader for Filter {
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            if self.done {
                return Ok(None);
            }
            match self.inner.next_item()? {
                Some(it) => self.f.push(it, &mut self.queue),
                None => {
                    self.f.finish();
                    self.done = true;
                }
            }
        }
    }
    pass_to_inner!(header, diagnostics, native_counts, progress, recycle);
}
