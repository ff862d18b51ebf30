//! One object decoded on several threads: a read whose output is one contiguous run of an
//! object's elements (the whole object, or a band of rows) is split into parts that start at
//! szip RSI block boundaries, and each part is range-decoded straight into its slice of the
//! output by its own thread (the caller's thread decodes the first part).
//!
//! How many threads a read uses: `threads=n` asks for at most `n` (1: serial); `threads=None`
//! takes what a process-wide budget of one thread per core has free. Every read large enough
//! to be split counts itself in the budget while it runs, so a process whose dask or zarr
//! threads already keep the cores busy decodes each field on its own thread, and one lone read
//! gets every core: the core never starts more decoding threads than there are cores.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use crate::errors::CoreResult;

/// Fewest elements worth a thread of their own: about a millisecond of szip + unpacking, against
/// tens of microseconds to start a thread.
pub const MIN_PER_THREAD: u64 = 1 << 17;

/// Threads inside splittable reads now: the readers themselves and the helpers they started.
static BUSY: AtomicUsize = AtomicUsize::new(0);

/// The budget: the cores this process may use (affinity and cgroup quota included).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The threads one read holds from the budget, given back when dropped.
pub struct Grant {
    counted: usize,
    /// Threads the read may use, its own included.
    pub threads: usize,
    /// The most threads it may grow to ([`Grant::grow`]).
    wanted: usize,
}

impl Grant {
    /// `threads` threads, outside the budget (a caller's explicit count), never more.
    pub fn fixed(threads: usize) -> Grant {
        Grant { counted: 0, threads: threads.max(1), wanted: threads.max(1) }
    }

    /// One more thread, where the budget has a core free and the grant wanted more than it got:
    /// a core another thread's work gave back while this work runs (the last field of a
    /// writer's, whose other thread is done) joins it.
    pub fn grow(&mut self) -> bool {
        if self.counted == 0 || self.threads >= self.wanted {
            return false;
        }
        let took = BUSY.fetch_update(Relaxed, Relaxed, |busy| (busy < cores()).then_some(busy + 1)).is_ok();
        if took {
            self.counted += 1;
            self.threads += 1;
        }
        took
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if self.counted > 0 {
            BUSY.fetch_sub(self.counted, Relaxed);
        }
    }
}

/// The threads a read of `elements` contiguous elements gets: `requested` (`None`: the
/// budget's free cores), never more than one per [`MIN_PER_THREAD`] elements.
pub fn grant(requested: Option<usize>, elements: u64) -> Grant {
    match requested {
        Some(n) => Grant::fixed(n.clamp(1, useful(elements))),
        None => budgeted(usize::MAX, elements),
    }
}

/// The threads work on `elements` elements gets from the budget: what it has free, at most
/// `limit` and one per [`MIN_PER_THREAD`] elements, counted in it until the grant is dropped.
/// Work too small to split leaves the budget alone (a shared counter on every small read would
/// make its cache line bounce between cores).
pub fn budgeted(limit: usize, elements: u64) -> Grant {
    let wanted = useful(elements).min(cores()).min(limit.max(1));
    if wanted == 1 {
        return Grant::fixed(1);
    }
    BUSY.fetch_add(1, Relaxed);
    let mut helpers = 0;
    let _ = BUSY.fetch_update(Relaxed, Relaxed, |busy| {
        helpers = (wanted - 1).min(cores().saturating_sub(busy));
        Some(busy + helpers)
    });
    Grant { counted: 1 + helpers, threads: 1 + helpers, wanted }
}

fn useful(elements: u64) -> usize {
    usize::try_from(elements / MIN_PER_THREAD).unwrap_or(usize::MAX).max(1)
}

/// Fewest elements in a part (a few hundred microseconds of decoding) unless a block is larger.
const MIN_PART: u64 = 1 << 14;

/// `(first, count)` of the parts of the run `start..start + n`, counted from `start`, for
/// `threads` threads that each take the next part when done with one: parts meet at multiples
/// of `align` (RSI block boundaries of the object) and shrink as the run is used up (each an
/// eighth of what is left at 2 threads, down to [`MIN_PART`]), so that a thread that started
/// late, or a core the machine gave to other work for a while, leaves the others at most one
/// small part to wait for at the end.
pub fn parts(start: u64, n: u64, align: u64, threads: usize) -> Vec<(u64, u64)> {
    let align = align.max(1);
    let threads = threads.max(1) as u64;
    let mut out = Vec::new();
    let mut first = start;
    let end = start + n;
    while first < end {
        let left = end - first;
        let size = if threads == 1 { left } else { (left / (4 * threads)).max(MIN_PART) };
        // The part ends at the run's end or on a block boundary past `first`.
        let stop = if size >= left { end } else { ((first + size) / align * align).max((first / align + 1) * align).min(end) };
        out.push((first - start, stop - first));
        first = stop;
    }
    out
}

/// Runs `work(first, count, part of out)` on every part (see [`parts`]) of the run of elements
/// `start..` that fills `out`, on the caller's thread and `threads - 1` helpers, each taking the
/// next part until none is left; `first` counts from the object's start. The first error wins
/// (the parts not started yet are then left alone).
pub fn for_each_part(
    out: &mut [u8],
    itemsize: usize,
    start: u64,
    align: u64,
    threads: usize,
    work: impl Fn(u64, u64, &mut [u8]) -> CoreResult<()> + Sync,
) -> CoreResult<()> {
    let n = (out.len() / itemsize) as u64;
    let mut pieces = Vec::new();
    let mut rest = out;
    for (first, count) in parts(start, n, align, threads) {
        let (head, tail) = rest.split_at_mut(count as usize * itemsize);
        pieces.push((start + first, count, head));
        rest = tail;
    }
    let helpers = threads.min(pieces.len()).saturating_sub(1);
    let queue = Mutex::new(pieces.into_iter());
    let failed = AtomicBool::new(false);
    let drain = || -> CoreResult<()> {
        loop {
            if failed.load(Relaxed) {
                return Ok(());
            }
            let Some((first, count, part)) = queue.lock().unwrap_or_else(|p| p.into_inner()).next() else {
                return Ok(());
            };
            work(first, count, part).inspect_err(|_| failed.store(true, Relaxed))?;
        }
    };
    let drain = &drain;
    std::thread::scope(|s| {
        let others: Vec<_> = (0..helpers).map_while(|_| helper(s, drain)).collect();
        let result = drain();
        others.into_iter().fold(result, |acc, h| {
            let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            acc.and(r)
        })
    })
}

/// `work(i)` for every `i` in `0..count`, on the caller's thread and `grant.threads - 1` helpers
/// that each take the next `i` when done with one, and one more helper whenever the grant grows
/// (the caller asks between its pieces); the results in the order of `i`.
pub fn map_pieces<T: Send>(count: usize, grant: &mut Grant, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<T>>> = (0..count).map(|_| Mutex::new(None)).collect();
    // The next piece nobody has taken, taken.
    let take = || Some(next.fetch_add(1, Relaxed)).filter(|&i| i < count);
    let run = |i: usize| *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(work(i));
    let drain = || {
        while let Some(i) = take() {
            run(i);
        }
    };
    std::thread::scope(|s| {
        let wanted = grant.threads.min(count).saturating_sub(1);
        let mut helpers = (0..wanted).map_while(|_| helper(s, drain)).count();
        while let Some(i) = take() {
            run(i);
            // Pieces left for a helper besides those running: worth a core that came free.
            if count.saturating_sub(i + 1) > helpers + 1 && grant.grow() && helper(s, drain).is_some() {
                helpers += 1;
            }
        }
    });
    results.into_iter().map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()).expect("every piece ran")).collect()
}

/// A helper thread running `work`, or `None` where the system cannot start one (a thread or
/// address-space limit): the caller's thread then does the helper's share, since every thread
/// takes the next piece until none is left. `std::thread::scope`'s own `spawn` panics instead.
fn helper<'scope, 'env, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    work: impl FnOnce() -> T + Send + 'scope,
) -> Option<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new().spawn_scoped(scope, work).ok()
}

/// Held by the tests that use the process-wide budget: one of them checks its counts.
#[cfg(test)]
pub(crate) static BUDGET_TESTS: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_everything_on_block_boundaries() {
        let check = |start: u64, n: u64, align: u64, threads: usize| {
            let p = parts(start, n, align, threads);
            assert_eq!(p.iter().map(|x| x.1).sum::<u64>(), n, "{start} {n} {align} {threads}");
            let mut next = 0;
            for (i, &(first, count)) in p.iter().enumerate() {
                assert_eq!(first, next, "parts are contiguous");
                assert!(count > 0);
                if i > 0 {
                    assert_eq!((start + first) % align, 0, "part {i} starts on a block boundary");
                }
                next += count;
            }
            p
        };
        assert_eq!(check(0, 10, 4, 1), vec![(0, 10)], "one thread: one part");
        assert_eq!(check(0, 10, 4, 2), vec![(0, 10)], "a run smaller than a part is one part");
        assert_eq!(check(0, 0, 4, 2), vec![]);
        // A band of rows that starts inside a block: the first cut is on a block boundary.
        assert_eq!(check(6, 3 * MIN_PART, 4, 2)[0], (0, MIN_PART - 2));
        assert_eq!(check(0, 3 * MIN_PART, 5 * MIN_PART, 2), vec![(0, 3 * MIN_PART)], "blocks larger than parts");
        let p = check(0, 1_038_240, 512, 2);
        assert!(p.len() >= 6 && p[0].1 > 4 * p[p.len() - 2].1, "parts shrink: {p:?}");
        assert!(p.iter().all(|x| x.1 <= 1_038_240 / 8 + 512));
        check(333 * 1440, 367 * 1440, 4096, 16);
        check(1, MIN_PART * 3 + 5, 1, 3);
    }

    #[test]
    fn the_budget_never_grants_more_than_the_cores() {
        let _alone = BUDGET_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let big = MIN_PER_THREAD * 64;
        let grants: Vec<Grant> = (0..4).map(|_| grant(None, big)).collect();
        let total: usize = grants.iter().map(|g| g.threads).sum();
        // Readers past the budget run alone: helpers never take more than the free cores.
        assert!(total < cores() + grants.len(), "{total} threads for {} cores", cores());
        assert!(grants[1..].iter().all(|g| g.threads == 1));
        assert_eq!(grants[0].threads, cores().min(64));
        drop(grants);
        assert_eq!(grant(None, big).threads, cores().min(64), "given back");
        assert_eq!(grant(None, 1000).threads, 1, "small reads stay serial");
        assert_eq!(grant(Some(8), MIN_PER_THREAD * 2).threads, 2, "no more than the work needs");
    }

    #[test]
    fn a_grant_grows_into_cores_given_back_and_no_further() {
        let _alone = BUDGET_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let big = MIN_PER_THREAD * 64;
        let others = budgeted(usize::MAX, big); // every core
        let mut late = budgeted(2, big);
        assert_eq!(late.threads, 1, "no core free");
        assert!(!late.grow(), "still none");
        drop(others);
        assert_eq!(late.grow(), cores() >= 2, "a core given back");
        assert!(!late.grow(), "never past what it wanted");
        assert!(!Grant::fixed(1).grow(), "an explicit count does not grow");
        // Work on a grant that grows runs every piece once, in order.
        let pieces = map_pieces(64, &mut budgeted(2, big), |i| i * 2);
        assert_eq!(pieces, (0..64).map(|i| i * 2).collect::<Vec<_>>());
        drop(late);
        assert_eq!(budgeted(usize::MAX, big).threads, cores().min(64), "all given back");
    }

    #[test]
    fn every_part_is_filled_once() {
        let mut out = vec![0u8; 1000 * 8];
        for_each_part(&mut out, 8, 0, 7, 4, |first, count, part| {
            assert_eq!(first % 7, 0);
            for (i, v) in part.chunks_exact_mut(8).enumerate() {
                v.copy_from_slice(&(first + i as u64).to_ne_bytes());
            }
            assert_eq!(part.len() as u64, count * 8);
            Ok(())
        })
        .unwrap();
        let values: Vec<u64> = out.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(values, (0..1000).collect::<Vec<_>>());
        // The first error is returned and stops the parts not yet started.
        let started = AtomicUsize::new(0);
        let mut out = vec![0u8; 100_000 * 8];
        let result = for_each_part(&mut out, 8, 0, 16, 2, |first, _, _| {
            started.fetch_add(1, Relaxed);
            if first == 0 {
                return Err(crate::errors::CoreError::new(crate::errors::Kind::Codec, "bad block"));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            Ok(())
        });
        assert!(result.is_err());
        assert!(started.load(Relaxed) < parts(0, 100_000, 16, 2).len());
    }
}
