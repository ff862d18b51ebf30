//! A caller's index (numpy's outer indexing) resolved against an object's shape: the one place
//! keys are normalised, for reads (`FileHandle.read`, `read_frame`, the remote file) and for
//! Python (`outer_key`, which `tgm_xarray.selection` wraps).

use numpy::npyffi::NPY_TYPES;
use numpy::{PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PySliceMethods, PyTuple, PyTupleMethods};
use std::os::raw::c_int;

use crate::arrays::{descr_of, InBuffer};
use tgm_core::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;
use tgm_core::read::object::full_selection;
use tgm_core::read::selection::AxisSel;

/// One axis of a caller's index.
enum Axis {
    Sel(AxisSel),
    /// A C-contiguous int64 index array's bytes: turned into a selection (bounds checked,
    /// negative indices wrapped) only once the interpreter is released.
    Points { data: InBuffer, axis: usize, n: u64 },
}

/// A caller's index resolved against an object's shape: what to read, and the result's shape.
pub struct Index {
    axes: Vec<Axis>,
    /// The selection's lengths, without the axes an int indexes (numpy drops those).
    pub shape: Vec<usize>,
    /// Arrays made here (from lists, boolean or non-int64 arrays) that `axes` points into.
    _made: Vec<Py<PyAny>>,
}

impl Axis {
    fn len(&self) -> usize {
        match self {
            Axis::Sel(sel) => sel.len(),
            Axis::Points { data, .. } => data.len / 8,
        }
    }
}

impl Index {
    /// At most how many separate runs of elements the read copies, on an object of `shape`
    /// (each costs a place in the plan): the product of the selection's lengths up to its last
    /// axis that is not whole, that axis left out when it is one ascending run.
    pub fn pieces(&self, shape: &[u64]) -> usize {
        let whole = |(a, &n): (&Axis, &u64)| matches!(a, Axis::Sel(sel) if sel.is_full(n));
        let Some(last) = self.axes.iter().zip(shape).rposition(|axis| !whole(axis)) else {
            return 1;
        };
        let one_run = matches!(&self.axes[last], Axis::Sel(AxisSel::Range { step: 1, .. })) || self.axes[last].len() <= 1;
        self.axes[..if one_run { last } else { last + 1 }].iter().map(Axis::len).product()
    }

    /// The selection, axis by axis. Index arrays are converted here: call it detached.
    pub fn selection(self) -> CoreResult<Vec<AxisSel>> {
        self.axes
            .into_iter()
            .map(|a| match a {
                Axis::Sel(sel) => Ok(sel),
                // SAFETY: the array is referenced by the caller (or by `_made`) for the call.
                Axis::Points { data, axis, n } => points(unsafe { data.as_slice() }, axis, n),
            })
            .collect()
    }
}

/// The selection an int64 index array (as native-endian bytes) makes on an axis of size `n`.
fn points(bytes: &[u8], axis: usize, n: u64) -> CoreResult<AxisSel> {
    let size = n as i64;
    let mut out = Vec::with_capacity(bytes.len() / 8);
    for chunk in bytes.chunks_exact(8) {
        let p = i64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
        let wrapped = if p < 0 { p + size } else { p };
        if !(0..size).contains(&wrapped) {
            return Err(CoreError::new(Kind::Index, format!("axis {axis}: index {p} is out of bounds for size {n}")));
        }
        out.push(wrapped as u64);
    }
    Ok(AxisSel::Points(out))
}

/// Resolves `index` as numpy's outer (orthogonal) indexing would, in Rust so that a read costs
/// one call and next to no time holding the interpreter: `None` (everything), or one item or a
/// tuple of items, one per axis (missing trailing axes are whole, one `...` stands for the axes
/// it skips). An item is a slice, an int (its axis is dropped), or a 1-D integer or boolean
/// array, list or tuple.
pub fn parse_index(index: Option<&Bound<'_, PyAny>>, shape: &[u64]) -> CoreResult<Index> {
    // Indices are signed (Python's, numpy's): a dimension past i64::MAX would wrap negative and
    // select nothing, without an error, where the file is at fault.
    if let Some(&n) = shape.iter().find(|&&n| i64::try_from(n).is_err()) {
        return Err(CoreError::new(Kind::Format, format!("shape {shape:?} has a dimension of {n}, more than any array can index")));
    }
    let mut result = Index { axes: Vec::with_capacity(shape.len()), shape: Vec::with_capacity(shape.len()), _made: Vec::new() };
    let Some(index) = index.filter(|i| !i.is_none()) else {
        result.axes = full_selection(shape).into_iter().map(Axis::Sel).collect();
        result.shape = shape.iter().map(|&n| n as usize).collect();
        return Ok(result);
    };
    let bad = |m: String| CoreError::new(Kind::Index, m);
    // The items, borrowed: no list of them is made, and no reference taken (threads that share
    // an index would contend for its reference count on a free-threaded build).
    let tuple = index.cast::<PyTuple>().ok();
    let count = tuple.map_or(1, |t| t.len());
    let item = |i: usize| match tuple {
        Some(t) => t.get_borrowed_item(i).expect("in range"),
        None => index.as_borrowed(),
    };
    let is_ellipsis = |i: usize| item(i).is(index.py().Ellipsis());
    let at = (0..count).find(|&i| is_ellipsis(i));
    if let Some(at) = at {
        if (at + 1..count).any(is_ellipsis) {
            return Err(bad("an index can only have a single ellipsis ('...')".into()));
        }
    }
    let explicit = count - usize::from(at.is_some());
    if explicit > shape.len() {
        return Err(bad(format!("too many indices: {explicit} for an array of {} dimensions", shape.len())));
    }
    // Axis k takes item k, except that the axes the ellipsis (or the missing trailing items)
    // stands for are whole and the items after an ellipsis take the last axes.
    let whole = shape.len() - explicit;
    for (axis, &n) in shape.iter().enumerate() {
        let which = match at {
            Some(at) if axis < at => Some(axis),
            Some(at) if axis < at + whole => None,
            Some(_) => Some(axis - whole + 1),
            None => (axis < count).then_some(axis),
        };
        let (resolved, len, dropped) = match which {
            None => (Axis::Sel(AxisSel::full(n)), n as usize, false),
            Some(i) => axis_item(&item(i), axis, n, &mut result._made)?,
        };
        if !dropped {
            result.shape.push(len);
        }
        result.axes.push(resolved);
    }
    Ok(result)
}

/// `key` over an array of `shape` as a read takes it, for Python's planning (`tgm_xarray.selection`
/// wraps it): per axis a slice with `0 <= start <= stop` and `step >= 1`, or an int64 array of
/// in-range points (a slice with a negative step becomes points); then the shape the read fills
/// (an int's axis has length 1) and the shape numpy gives `array[key]` (an int's axis dropped).
#[pyfunction]
pub fn outer_key<'py>(
    py: Python<'py>,
    key: Option<&Bound<'py, PyAny>>,
    shape: Vec<u64>,
) -> PyResult<(Bound<'py, PyTuple>, Vec<usize>, Vec<usize>)> {
    crate::guard::guarded("outer_key", || {
        let index = parse_index(key, &shape).raised()?;
        let decoded_shape = index.axes.iter().map(Axis::len).collect();
        let result_shape = index.shape.clone();
        let items = index.selection().raised()?.into_iter().map(|sel| match sel {
            AxisSel::Range { start, step, len } if step >= 1 || len <= 1 => {
                let step = step.max(1) as u64;
                let stop = if len == 0 { start } else { start + step * (len - 1) + 1 };
                PySlice::new(py, start as isize, stop as isize, step as isize).into_any()
            }
            points => PyArray1::from_iter(py, (0..points.len()).map(|i| points.get(i) as i64)).into_any(),
        });
        Ok((PyTuple::new(py, items)?, decoded_shape, result_shape))
    })
}

/// One axis's item: its selection, its length, and whether it was an int (the axis is
/// dropped). Arrays this makes (from lists, boolean or other integer arrays) go to `made`.
fn axis_item(item: &Bound<'_, PyAny>, axis: usize, n: u64, made: &mut Vec<Py<PyAny>>) -> CoreResult<(Axis, usize, bool)> {
    let bad = |m: String| CoreError::new(Kind::Index, m);
    if let Ok(slice) = item.cast::<PySlice>() {
        let ind = slice.indices(n as isize).map_err(|e| bad(format!("axis {axis}: {e}")))?;
        let len = ind.slicelength as u64;
        let start = if len == 0 { 0 } else { ind.start as u64 };
        return Ok((Axis::Sel(AxisSel::Range { start, step: ind.step as i64, len }), len as usize, false));
    }
    let from_list;
    let array = match item.cast::<PyUntypedArray>() {
        Ok(a) if a.ndim() == 0 => None, // a 0-d integer array indexes like an int
        Ok(a) => Some(a),
        // A list or tuple indexes as the array numpy makes of it.
        Err(_) if item.cast::<PyList>().is_ok() || item.cast::<PyTuple>().is_ok() => {
            from_list = made_array(numpy_call(item.py(), "asarray", item)?, made);
            Some(&from_list)
        }
        Err(_) => None,
    };
    if let Some(array) = array {
        let data = int64_index(array, axis, n, made)?;
        let len = data.len / 8;
        return Ok((Axis::Points { data, axis, n }, len, false));
    }
    let i: i64 = item
        .extract()
        .map_err(|_| bad(format!("axis {axis}: expected a slice, an int or a 1-D integer array")))?;
    if i < -(n as i64) || i >= n as i64 {
        return Err(bad(format!("axis {axis}: index {i} is out of bounds for size {n}")));
    }
    let i = if i < 0 { i + n as i64 } else { i } as u64;
    Ok((Axis::Sel(AxisSel::Range { start: i, step: 1, len: 1 }), 1, true))
}

fn numpy_call<'py>(py: Python<'py>, name: &str, arg: &Bound<'py, PyAny>) -> CoreResult<Bound<'py, PyAny>> {
    py.import("numpy")
        .and_then(|np| np.call_method1(name, (arg,)))
        .map_err(|e| CoreError::new(Kind::Index, format!("numpy.{name}: {e}")))
}

/// `array` as an untyped array, kept alive in `made` for the call.
fn made_array<'py>(array: Bound<'py, PyAny>, made: &mut Vec<Py<PyAny>>) -> Bound<'py, PyUntypedArray> {
    made.push(array.clone().unbind());
    array.cast_into::<PyUntypedArray>().expect("numpy returns an array")
}

/// The bytes of the C-contiguous int64 indices a 1-D integer or boolean array selects
/// (converted, and kept in `made`, when it is not that already).
fn int64_index(array: &Bound<'_, PyUntypedArray>, axis: usize, n: u64, made: &mut Vec<Py<PyAny>>) -> CoreResult<InBuffer> {
    let bad = |m: String| CoreError::new(Kind::Index, m);
    let py = array.py();
    // The dtype's fields, not `is_equiv_to` (a numpy cast lookup): this runs on every read.
    let descr = descr_of(array);
    if descr.num() == NPY_TYPES::NPY_BOOL as c_int {
        if array.shape() != [n as usize] {
            return Err(bad(format!("axis {axis}: boolean index of shape {:?} for size {n}", array.shape())));
        }
        let points = made_array(numpy_call(py, "flatnonzero", array.as_any())?, made);
        return int64_index(&points, axis, n, made);
    }
    // An empty list makes a float64 array: numpy indexes with it as with no points.
    if array.ndim() != 1 || !(matches!(descr.kind(), b'i' | b'u') || array.len() == 0) {
        return Err(bad(format!("axis {axis}: expected a slice, an int or a 1-D integer array")));
    }
    let native_int64 = descr.kind() == b'i' && descr.itemsize() == 8 && descr.is_native_byteorder() != Some(false);
    if native_int64 && array.is_c_contiguous() {
        return InBuffer::new(array, "index");
    }
    // Another integer type, or not contiguous: as C-contiguous int64 (rare; small arrays).
    let converted = numpy_call(py, "ascontiguousarray", array.as_any())?
        .call_method1("astype", ("int64",))
        .map_err(|e| bad(format!("axis {axis}: {e}")))?;
    InBuffer::new(&made_array(converted, made), "index")
}

#[cfg(test)]
mod tests {
    use super::{Axis, Index};
    use tgm_core::read::selection::AxisSel;

    fn pieces(shape: &[u64], sel: Vec<AxisSel>) -> usize {
        Index { axes: sel.into_iter().map(Axis::Sel).collect(), shape: vec![], _made: vec![] }.pieces(shape)
    }

    fn r(start: u64, step: i64, len: u64) -> AxisSel {
        AxisSel::Range { start, step, len }
    }

    #[test]
    fn pieces_count_the_separate_runs_a_read_copies() {
        let shape = [10, 8];
        assert_eq!(pieces(&shape, vec![AxisSel::full(10), AxisSel::full(8)]), 1, "whole object");
        assert_eq!(pieces(&shape, vec![r(2, 1, 3), AxisSel::full(8)]), 1, "rows");
        assert_eq!(pieces(&shape, vec![r(1, 1, 3), r(2, 1, 4)]), 3, "a window: a run per row");
        assert_eq!(pieces(&shape, vec![AxisSel::full(10), r(0, 2, 4)]), 40, "strided columns: every element");
        assert_eq!(pieces(&shape, vec![r(9, -1, 10), AxisSel::full(8)]), 10, "reversed rows");
        assert_eq!(pieces(&shape, vec![r(3, 1, 1), r(5, 1, 1)]), 1, "one element");
        assert_eq!(pieces(&shape, vec![AxisSel::Points(vec![1, 2, 7]), AxisSel::full(8)]), 3, "a row per point");
    }
}
