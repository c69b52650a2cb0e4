//! The registry of the streams in flight (`POST /v1/evaluate/stream`): the
//! bytes each holds and which wait for their readers, so that a new stream
//! cuts the longest-waiting ones to make room ([§9.1](docs/configuration.md#s9-1)). The shared state
//! holds one; it knows nothing of sessions, events or requests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

/// The streams in flight and the bytes each holds (see [`super::STREAM_BODIES`]),
/// and those waiting for their readers by when they began to wait: the
/// first to be cut when a stream needs room.
#[derive(Debug, Default)]
pub(crate) struct Streams(Mutex<Registry>);

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    total: usize,
    /// Stream → its bytes, its wait number while it waits, what cuts it.
    live: HashMap<u64, (usize, Option<u64>, Arc<Notify>)>,
    /// Wait number → stream, the longest-waiting first.
    waiting: BTreeMap<u64, u64>,
}

impl Registry {
    /// Cuts waiting streams, the longest-waiting first, until `need` more
    /// bytes fit in `budget`; whether they do.
    fn make_room(&mut self, need: usize, budget: usize) -> bool {
        while self.total.saturating_add(need) > budget {
            let Some((_, id)) = self.waiting.pop_first() else {
                return false;
            };
            if let Some((bytes, _, cut)) = self.live.remove(&id) {
                self.total -= bytes;
                cut.notify_one();
            }
        }
        true
    }
}

impl Streams {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a stream that holds `bytes`, cutting streams that wait for
    /// their readers to make room; `None` when the streams at work leave
    /// none. Its number, and what tells it that it was cut.
    pub(crate) fn admit(&self, bytes: usize, budget: usize) -> Option<(u64, Arc<Notify>)> {
        let mut r = self.lock();
        if !r.make_room(bytes, budget) {
            return None;
        }
        let id = r.next;
        r.next += 1;
        let cut = Arc::new(Notify::new());
        r.total += bytes;
        r.live.insert(id, (bytes, None, Arc::clone(&cut)));
        Some((id, cut))
    }

    /// The stream now holds `bytes` and waits for its reader (`true`) or
    /// works (`false`): a waiting stream may be cut from now on, and while
    /// the streams hold more than `budget` the longest-waiting are (this
    /// one too, if it comes to it). Whether it is still in flight.
    pub(crate) fn set(&self, id: u64, bytes: usize, waits: bool, budget: usize) -> bool {
        let mut r = self.lock();
        let next = r.next;
        let Some(entry) = r.live.get_mut(&id) else {
            return false;
        };
        let (old, was_waiting) = (entry.0, entry.1.take());
        entry.0 = bytes;
        if waits {
            entry.1 = Some(next);
        }
        r.total = r.total - old + bytes;
        if let Some(w) = was_waiting {
            r.waiting.remove(&w);
        }
        if waits {
            r.next += 1;
            r.waiting.insert(next, id);
            r.make_room(0, budget);
        }
        r.live.contains_key(&id)
    }

    /// The stream is over.
    pub(crate) fn remove(&self, id: u64) {
        let mut r = self.lock();
        if let Some((bytes, waiting, _)) = r.live.remove(&id) {
            r.total -= bytes;
            if let Some(w) = waiting {
                r.waiting.remove(&w);
            }
        }
    }

    /// Bytes held by the streams in flight.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.lock().total
    }
}
