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
                Some(it) => {
                    // Dropped whole: its buffers serve the next item.
                    if let Some(dropped) = self.f.push(it, &mut self.queue) {
                        self.inner.recycle(dropped);
                    }
                }
                None => {
                    self.f.finish();
                    self.done = true;
                }
            }
        }
    }
    pass_to_inner!(described, recycle, restarts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;

    /// A reader that keeps the type ids of the events given back to it.
    struct Counting {
        inner: VecReader,
        recycled: Rc<RefCell<Vec<EventTypeId>>>,
    }

    impl TraceReader for Counting {
        fn header(&self) -> &Header {
            self.inner.header()
        }
        fn next_item(&mut self) -> Result<Option<Item>> {
            self.inner.next_item()
        }
        fn recycle(&mut self, item: Item) {
            if let Item::Event(e) = item {
                self.recycled.borrow_mut().push(e.type_id);
            }
        }
    }

    #[test]
    fn dropped_events_go_back_to_their_reader() {
        let ev = |type_id| {
            Item::Event(Event {
                time: Timestamp(1),
                type_id,
                ..Event::default()
            })
        };
        let types = [(1, "sys_entry"), (2, "irq_entry")];
        let mut items: Vec<Item> = types
            .iter()
            .map(|(id, n)| Item::EventType(Arc::new(EventType::new(*id, "core", n, vec![]))))
            .collect();
        items.extend([ev(1), ev(2), ev(2), ev(1)]);
        let recycled = Rc::new(RefCell::new(Vec::new()));
        let reader = Counting {
            inner: VecReader::new(Trace {
                header: Header::new(FormatId::Ltt, "2.6"),
                items,
            }),
            recycled: recycled.clone(),
        };
        let sel = Selection {
            events: vec![Glob::new("core.sys*")],
            ..Default::default()
        };
        let mut f = Filter::wrap(Box::new(reader), &sel);
        let mut kept = Vec::new();
        while let Some(it) = f.next_item().unwrap() {
            if let Item::Event(e) = it {
                kept.push(e.type_id);
            }
        }
        assert_eq!(kept, [1, 1]);
        assert_eq!(*recycled.borrow(), [2, 2]);
    }
}
