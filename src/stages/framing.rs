//! Framing is not data: drop the source format's bookkeeping events (LTT
//! block start/end, heartbeats, facility loads) before another format's
//! writer sees them. The target writes its own framing where it has any.

use crate::error::{Diagnostic, Result};
use crate::model::{EventTypeId, Header, Item, TraceReader};
pub struct Unframe {
    inner: Box<dyn TraceReader>,
    /// Framing types are a handful: a list beats hashing every event.
    framing: Vec<EventTypeId>,
    dropped: u64,
}

impl Unframe {
    pub fn wrap(inner: Box<dyn TraceReader>) -> Unframe {
        Unframe {
            inner,
            framing: Vec::new(),
            dropped: 0,
        }
    }
    /// Framing events left out so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl TraceReader for Unframe {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            let Some(item) = self.inner.next_item()? else {
                return Ok(None);
            };
            match &item {
                Item::EventType(t) if t.framing => {
                    if !self.framing.contains(&t.id) {
                        self.framing.push(t.id);
                    }
                    continue;
                }
                Item::EventType(t) => {
                    // A later definition may reuse an id for real data.
                    self.framing.retain(|&id| id != t.id);
                }
                Item::Event(e) if self.framing.contains(&e.type_id) => {
                    self.dropped += 1;
                    continue;
                }
                _ => {}
            }
            return Ok(Some(item));
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
    fn recycle(&mut self, item: Item) {
        self.inner.recycle(item);
    }
    fn progress(&self) -> Option<(u64, u64)> {
        self.inner.progress()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use std::sync::Arc;

    #[test]
    fn framing_events_and_their_types_are_left_out() {
        let mut block = EventType::new(17, "core", "block_start", vec![]);
        block.framing = true;
        let data = EventType::new(5, "core", "syscall_entry", vec![]);
        let ev = |type_id| {
            Item::Event(Event {
                time: Timestamp(1),
                raw_clock: None,
                type_id,
                cpu: Some(0),
                stream: None,
                fields: vec![],
                extras: Extras::default(),
            })
        };
        let trace = Trace {
            header: Header::new(FormatId::Ltt, "2.1"),
            items: vec![
                Item::EventType(Arc::new(block)),
                Item::EventType(Arc::new(data)),
                ev(17),
                ev(5),
                ev(17),
            ],
        };
        let mut u = Unframe::wrap(Box::new(VecReader::new(trace)));
        let mut kept = Vec::new();
        while let Some(it) = u.next_item().unwrap() {
            kept.push(it);
        }
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(matches!(&kept[0], Item::EventType(t) if t.id == 5));
        assert!(matches!(&kept[1], Item::Event(e) if e.type_id == 5));
        assert_eq!(u.dropped(), 2);
    }
}
