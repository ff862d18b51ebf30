//! Process-wide counters the tests read: elements decoded, and reads in flight at once.
//!
//! They sit on every read's path, so they must not become a point of contention: one shared
//! atomic written by every read makes its cache line bounce between cores, which costs as much
//! as a small read (two threads of 1K-element slice reads ran at 0.6x one thread). Decoded
//! elements go to per-thread slots, summed when asked; reads in flight are only counted once a
//! test has asked for them.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

const SLOTS: usize = 64;

/// One counter per cache line (128 bytes: adjacent-line prefetch pairs lines on x86).
#[repr(align(128))]
struct Slot(AtomicU64);

static DECODED: [Slot; SLOTS] = [const { Slot(AtomicU64::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: usize = NEXT_SLOT.fetch_add(1, Relaxed) % SLOTS;
}

/// Counts `n` elements produced by a decoder.
pub fn add_decoded(n: u64) {
    MY_SLOT.with(|&slot| DECODED[slot].0.fetch_add(n, Relaxed));
}

/// Elements produced by the decoders in this process so far.
pub fn decoded() -> u64 {
    DECODED.iter().map(|s| s.0.load(Relaxed)).sum()
}

static TRACK_IN_FLIGHT: AtomicBool = AtomicBool::new(false);
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static MAX_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts a read as in flight for as long as it lives (once tracking is on).
pub struct InFlight(bool);

impl InFlight {
    pub fn enter() -> InFlight {
        let track = TRACK_IN_FLIGHT.load(Relaxed);
        if track {
            let now = IN_FLIGHT.fetch_add(1, Relaxed) + 1;
            MAX_IN_FLIGHT.fetch_max(now, Relaxed);
        }
        InFlight(track)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0 {
            IN_FLIGHT.fetch_sub(1, Relaxed);
        }
    }
}

/// The most reads that have run at once since the last call, which resets the count. The
/// first call turns the tracking on (and returns 0).
pub fn take_max_in_flight() -> usize {
    TRACK_IN_FLIGHT.store(true, Relaxed);
    MAX_IN_FLIGHT.swap(IN_FLIGHT.load(Relaxed), Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_elements_from_many_threads_add_up() {
        let before = decoded();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| (0..1000).for_each(|_| add_decoded(3)));
            }
        });
        assert_eq!(decoded() - before, 8 * 1000 * 3);
    }
}
