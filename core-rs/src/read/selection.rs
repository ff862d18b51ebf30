//! Turning an outer (orthogonal) hyperslab selection into flat element ranges.
//!
//! The decoders only know flat C-order `(offset, count)` ranges. A selection is planned as:
//! the trailing axes that are selected whole form a contiguous "inner block"; the axis before
//! them (the "span axis") is covered by one range from its smallest to its largest index; every
//! combination of the remaining outer indices gives one such range. Decoded ranges are then
//! gathered into the output in selection order, so unsorted and repeated indices work.

use crate::errors::{CoreError, CoreResult, Kind};

/// The selection on one axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AxisSel {
    /// `start, start + step, ...` (`len` items); `step` may be negative.
    Range { start: u64, step: i64, len: u64 },
    /// Explicit indices, in output order.
    Points(Vec<u64>),
}

impl AxisSel {
    pub fn full(n: u64) -> Self {
        AxisSel::Range { start: 0, step: 1, len: n }
    }

    pub fn len(&self) -> usize {
        match self {
            AxisSel::Range { len, .. } => *len as usize,
            AxisSel::Points(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> u64 {
        match self {
            AxisSel::Range { start, step, .. } => (*start as i64 + step * i as i64) as u64,
            AxisSel::Points(p) => p[i],
        }
    }

    /// Smallest and largest selected index (the selection must not be empty).
    fn bounds(&self) -> (u64, u64) {
        match self {
            AxisSel::Range { start, step, len } => {
                let last = (*start as i64 + step * (*len as i64 - 1)) as u64;
                (*start.min(&last), *start.max(&last))
            }
            AxisSel::Points(p) => (*p.iter().min().unwrap(), *p.iter().max().unwrap()),
        }
    }

    pub fn is_full(&self, n: u64) -> bool {
        matches!(self, AxisSel::Range { start: 0, step: 1, len } if *len == n)
            || (n == 1 && self.len() == 1)
    }

    /// True when the selection is one ascending run (so a decoded span is already in order).
    fn is_ascending_run(&self) -> bool {
        match self {
            AxisSel::Range { step, len, .. } => *step == 1 || *len <= 1,
            AxisSel::Points(p) => p.windows(2).all(|w| w[1] == w[0] + 1),
        }
    }

    /// Checks every index against the axis length.
    pub fn check(&self, axis: usize, n: u64) -> CoreResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let (_, hi) = self.bounds();
        if hi >= n {
            return Err(CoreError::new(Kind::Index, format!("index {hi} is out of bounds for axis {axis} with size {n}")));
        }
        Ok(())
    }
}

/// How to gather decoded ranges into the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Flat `(offset, count)` element ranges to decode, in output order.
    pub ranges: Vec<(u64, u64)>,
    /// Elements in one inner block (the product of the whole trailing axes).
    inner: u64,
    /// Indices of the span axis relative to the start of each range, or `None` when each
    /// decoded range is copied to the output as it is.
    picks: Option<Vec<u64>>,
    /// Where each range lands in the output, in elements, when there are no picks (ranges are
    /// then consecutive in the output, and touching ones are merged).
    starts: Vec<u64>,
    /// Elements the selection produces.
    pub out_len: u64,
}

impl Plan {
    pub fn new(shape: &[u64], sel: &[AxisSel]) -> Plan {
        assert_eq!(shape.len(), sel.len(), "one selection per axis");
        let out_len: u64 = sel.iter().map(|s| s.len() as u64).product();
        if out_len == 0 {
            return Plan { ranges: vec![], inner: 0, picks: None, starts: vec![], out_len: 0 };
        }
        // First axis of the run of trailing axes that are selected whole.
        let mut j = shape.len();
        while j > 0 && sel[j - 1].is_full(shape[j - 1]) {
            j -= 1;
        }
        let inner: u64 = shape[j..].iter().product();
        if j == 0 {
            return Plan { ranges: vec![(0, inner)], inner, picks: None, starts: vec![0], out_len };
        }
        let span_axis = j - 1;
        let span_sel = &sel[span_axis];
        let (lo, hi) = span_sel.bounds();
        // A sparse span (points or steps far apart) would decode everything between its first
        // and last index: iterate it like an outer axis instead, one range per index.
        let sparse = !span_sel.is_ascending_run() && hi - lo + 1 > 2 * span_sel.len() as u64;
        let (n_outer, block, lo, picks) = if sparse {
            (span_axis + 1, inner, 0, None)
        } else {
            let picks = (!span_sel.is_ascending_run())
                .then(|| (0..span_sel.len()).map(|t| span_sel.get(t) - lo).collect());
            (span_axis, (hi - lo + 1) * inner, lo, picks)
        };

        // Strides of the outer axes, in elements.
        let mut strides = vec![0u64; span_axis + 1];
        let mut acc = inner;
        for k in (0..=span_axis).rev() {
            strides[k] = acc;
            acc *= shape[k];
        }
        let outer: usize = sel[..n_outer].iter().map(|s| s.len()).product();
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(outer.min(1 << 16));
        let mut push = |base: u64| {
            let off = base + lo * inner;
            match ranges.last_mut() {
                // Consecutive indices (runs in an index array) read as one range.
                Some(last) if picks.is_none() && last.0 + last.1 == off => last.1 += block,
                _ => ranges.push((off, block)),
            }
        };
        match (n_outer, sel.first()) {
            // One outer axis of points (an index array on a 1-D object, or on the first axis):
            // a tight loop, since a read of a few thousand points is otherwise spent here.
            (1, Some(AxisSel::Points(points))) => points.iter().for_each(|&p| push(p * strides[0])),
            _ => {
                let mut counter = vec![0usize; n_outer];
                for _ in 0..outer {
                    push((0..n_outer).map(|k| sel[k].get(counter[k]) * strides[k]).sum());
                    // Advance the C-order odometer over the outer axes.
                    for k in (0..n_outer).rev() {
                        counter[k] += 1;
                        if counter[k] < sel[k].len() {
                            break;
                        }
                        counter[k] = 0;
                    }
                }
            }
        }
        let mut starts = Vec::new();
        if picks.is_none() {
            starts = ranges
                .iter()
                .scan(0, |at, r| {
                    let start = *at;
                    *at += r.1;
                    Some(start)
                })
                .collect();
        }
        Plan { ranges, inner, picks, starts, out_len }
    }

    /// True when the output is the whole object in its own order.
    pub fn is_whole(&self, total: u64) -> bool {
        self.ranges == [(0, total)] && self.picks.is_none()
    }

    /// Elements the plan's ranges decode (at least `out_len`).
    pub fn decoded_len(&self) -> u64 {
        self.ranges.iter().map(|r| r.1).sum()
    }

    /// The bytes of `out` that range `i` fills as it is, or `None` when the plan picks from it.
    pub fn destination(&self, i: usize, itemsize: usize) -> Option<std::ops::Range<usize>> {
        self.picks.is_none().then(|| {
            let at = self.starts[i] as usize * itemsize;
            at..at + self.ranges[i].1 as usize * itemsize
        })
    }

    /// Copies decoded range `i` (`src`, `itemsize` bytes per element) to its place in `out`.
    pub fn scatter(&self, i: usize, src: &[u8], out: &mut [u8], itemsize: usize) {
        let inner_bytes = self.inner as usize * itemsize;
        match &self.picks {
            None => {
                let at = self.starts[i] as usize * itemsize;
                out[at..at + src.len()].copy_from_slice(src);
            }
            Some(picks) => {
                let chunk = picks.len() * inner_bytes;
                let dst = &mut out[i * chunk..(i + 1) * chunk];
                for (t, &p) in picks.iter().enumerate() {
                    let from = p as usize * inner_bytes;
                    dst[t * inner_bytes..(t + 1) * inner_bytes]
                        .copy_from_slice(&src[from..from + inner_bytes]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: gather element by element from a full C-order array of `0..n`.
    fn reference(shape: &[u64], sel: &[AxisSel]) -> Vec<u64> {
        let mut out = vec![];
        let mut counter = vec![0usize; shape.len()];
        let total: usize = sel.iter().map(|s| s.len()).product();
        for _ in 0..total {
            let mut flat = 0u64;
            for k in 0..shape.len() {
                flat = flat * shape[k] + sel[k].get(counter[k]);
            }
            out.push(flat);
            for k in (0..shape.len()).rev() {
                counter[k] += 1;
                if counter[k] < sel[k].len() {
                    break;
                }
                counter[k] = 0;
            }
        }
        out
    }

    fn run(shape: &[u64], sel: &[AxisSel]) -> Vec<u64> {
        let plan = Plan::new(shape, sel);
        let mut out = vec![0u8; plan.out_len as usize * 8];
        for (i, &(off, count)) in plan.ranges.iter().enumerate() {
            let src: Vec<u8> = (off..off + count).flat_map(|v| v.to_le_bytes()).collect();
            plan.scatter(i, &src, &mut out, 8);
        }
        out.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    }

    fn r(start: u64, step: i64, len: u64) -> AxisSel {
        AxisSel::Range { start, step, len }
    }

    #[test]
    fn full_selection_is_one_range() {
        let shape = [4, 5, 6];
        let sel: Vec<_> = shape.iter().map(|&n| AxisSel::full(n)).collect();
        let plan = Plan::new(&shape, &sel);
        assert_eq!(plan.ranges, vec![(0, 120)]);
        assert!(plan.is_whole(120));
        assert!(!Plan::new(&shape, &[r(3, -1, 4), AxisSel::full(5), AxisSel::full(6)]).is_whole(120));
        assert_eq!(run(&shape, &sel), reference(&shape, &sel));
    }

    #[test]
    fn rows_of_a_2d_array_are_one_range() {
        let shape = [10, 7];
        let sel = [r(2, 1, 3), AxisSel::full(7)];
        assert_eq!(Plan::new(&shape, &sel).ranges, vec![(14, 21)]);
        assert_eq!(run(&shape, &sel), reference(&shape, &sel));
    }

    #[test]
    fn a_window_gives_one_range_per_row() {
        let shape = [10, 8];
        let sel = [r(1, 1, 3), r(2, 1, 4)];
        assert_eq!(Plan::new(&shape, &sel).ranges, vec![(10, 4), (18, 4), (26, 4)]);
        assert_eq!(run(&shape, &sel), reference(&shape, &sel));
    }

    #[test]
    fn steps_negative_steps_and_points() {
        let shape = [6, 5, 9];
        let cases = vec![
            vec![r(0, 2, 3), AxisSel::full(5), r(1, 3, 3)],
            vec![r(5, -1, 6), r(4, -2, 3), AxisSel::full(9)],
            vec![AxisSel::Points(vec![4, 0, 4]), r(1, 1, 2), AxisSel::Points(vec![8, 2, 3])],
            vec![AxisSel::Points(vec![3]), AxisSel::Points(vec![2, 3]), AxisSel::full(9)],
            vec![AxisSel::full(6), AxisSel::full(5), AxisSel::Points(vec![0])],
        ];
        for sel in cases {
            assert_eq!(run(&shape, &sel), reference(&shape, &sel), "{sel:?}");
        }
    }

    #[test]
    fn a_decoded_span_is_only_as_wide_as_the_selection() {
        let shape = [100, 100];
        let plan = Plan::new(&shape, &[r(0, 1, 100), r(10, 1, 5)]);
        assert_eq!(plan.decoded_len(), 500);
    }

    #[test]
    fn far_apart_points_get_a_range_each() {
        let shape = [1_000_000];
        let sel = [AxisSel::Points(vec![10, 11, 500_000])];
        let plan = Plan::new(&shape, &sel);
        assert_eq!(plan.ranges, vec![(10, 2), (500_000, 1)]);
        assert_eq!(run(&[20, 5], &[AxisSel::Points(vec![19, 0]), r(0, 3, 2)]),
                   reference(&[20, 5], &[AxisSel::Points(vec![19, 0]), r(0, 3, 2)]));
    }

    #[test]
    fn empty_and_scalar_selections() {
        assert!(Plan::new(&[4, 4], &[r(0, 1, 0), AxisSel::full(4)]).ranges.is_empty());
        let plan = Plan::new(&[], &[]);
        assert_eq!((plan.ranges.clone(), plan.out_len), (vec![(0, 1)], 1));
    }

    #[test]
    fn bounds_are_checked() {
        assert!(AxisSel::Points(vec![1, 9]).check(0, 9).is_err());
        assert!(r(8, -1, 9).check(1, 9).is_ok());
        assert!(r(0, 1, 10).check(1, 9).is_err());
    }
}
