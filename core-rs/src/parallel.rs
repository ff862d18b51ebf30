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

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

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
}

impl Drop for Grant {
    fn drop(&mut self) {
        if self.counted > 0 {
            BUSY.fetch_sub(self.counted, Relaxed);
        }
    }
}

/// The threads a read of `elements` contiguous elements gets: `requested` (`None`: the
/// budget's free cores), never more than one per [`MIN_PER_THREAD`] elements. Reads too small
/// to split leave the budget alone (a shared counter on every small read would make its cache
/// line bounce between cores).
pub fn grant(requested: Option<usize>, elements: u64) -> Grant {
    let useful = usize::try_from(elements / MIN_PER_THREAD).unwrap_or(usize::MAX).max(1);
    match requested {
        Some(n) => Grant { counted: 0, threads: n.clamp(1, useful) },
        None if useful == 1 => Grant { counted: 0, threads: 1 },
        None => {
            let wanted = useful.min(cores());
            BUSY.fetch_add(1, Relaxed);
            let mut helpers = 0;
            let _ = BUSY.fetch_update(Relaxed, Relaxed, |busy| {
                helpers = (wanted - 1).min(cores().saturating_sub(busy));
                Some(busy + helpers)
            });
            Grant { counted: 1 + helpers, threads: 1 + helpers }
        }
    }
}

/// `(first, count)` of each of at most `threads` parts of the run `start..start + n`, counted
/// from `start`: parts meet at multiples of `align` (RSI block boundaries of the object).
pub fn parts(start: u64, n: u64, align: u64, threads: usize) -> Vec<(u64, u64)> {
    let align = align.max(1);
    let threads = threads.max(1) as u64;
    let mut out = Vec::with_capacity(threads as usize);
    let mut first = start;
    for t in 1..=threads {
        let end = if t == threads { start + n } else { ((start + n * t / threads) / align * align).max(first) };
        if end > first {
            out.push((first - start, end - first));
        }
        first = end;
    }
    out
}

/// Runs `work(first, count, part of out)` on every part (see [`parts`]) of the run of elements
/// `start..` that fills `out`, one thread each, the caller's thread taking the first; `first`
/// counts from the object's start. The first error wins.
pub fn for_each_part(
    out: &mut [u8],
    itemsize: usize,
    start: u64,
    align: u64,
    threads: usize,
    work: impl Fn(u64, u64, &mut [u8]) -> CoreResult<()> + Sync,
) -> CoreResult<()> {
    let n = (out.len() / itemsize) as u64;
    let mut slices = Vec::new();
    let mut rest = out;
    for (first, count) in parts(start, n, align, threads) {
        let (head, tail) = rest.split_at_mut(count as usize * itemsize);
        slices.push((start + first, count, head));
        rest = tail;
    }
    let mut slices = slices.into_iter();
    let Some((first, count, mine)) = slices.next() else {
        return Ok(());
    };
    let work = &work;
    std::thread::scope(|s| {
        let others: Vec<_> = slices.map(|(f, c, part)| s.spawn(move || work(f, c, part))).collect();
        let result = work(first, count, mine);
        others.into_iter().fold(result, |acc, h| {
            let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            acc.and(r)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_everything_on_block_boundaries() {
        assert_eq!(parts(0, 10, 4, 2), vec![(0, 4), (4, 6)]);
        assert_eq!(parts(0, 10, 1, 3), vec![(0, 3), (3, 3), (6, 4)]);
        assert_eq!(parts(0, 3, 4, 8), vec![(0, 3)], "fewer blocks than threads");
        assert_eq!(parts(0, 0, 4, 2), vec![]);
        // A band of rows that starts inside a block: the cut is on a block boundary (8).
        assert_eq!(parts(6, 10, 4, 2), vec![(0, 2), (2, 8)]);
        let p = parts(0, 1_038_240, 4096, 16);
        assert_eq!(p.iter().map(|x| x.1).sum::<u64>(), 1_038_240);
        assert!(p.iter().all(|x| x.0 % 4096 == 0));
    }

    #[test]
    fn the_budget_never_grants_more_than_the_cores() {
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
    fn every_part_is_filled_once() {
        let mut out = vec![0u8; 1000 * 8];
        for_each_part(&mut out, 8, 0, 7, 4, |first, count, part| {
            for (i, v) in part.chunks_exact_mut(8).enumerate() {
                v.copy_from_slice(&(first + i as u64).to_ne_bytes());
            }
            assert_eq!(part.len() as u64, count * 8);
            Ok(())
        })
        .unwrap();
        let values: Vec<u64> = out.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(values, (0..1000).collect::<Vec<_>>());
    }
}
