//! The Python side of a read: selections and caller-allocated numpy output arrays.

use numpy::npyffi::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::read::full_selection;
use crate::selection::AxisSel;

/// A numpy array's data buffer, to be filled while the interpreter is detached.
///
/// Numpy arrays cannot be resized while referenced, and the caller holds a reference for the
/// whole call, so the pointer stays valid; concurrent writers into one `out` are the caller's
/// business, as with numpy's own `out=` arguments.
pub struct OutBuffer {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: see the type's comment: the buffer outlives the detached call that uses it.
unsafe impl Send for OutBuffer {}

impl OutBuffer {
    pub fn new(out: &Bound<'_, PyUntypedArray>, itemsize: usize) -> CoreResult<OutBuffer> {
        let bad = |m: &str| CoreError::new(Kind::Value, format!("out: {m}"));
        if !out.is_c_contiguous() {
            return Err(bad("must be C-contiguous"));
        }
        // SAFETY: `as_array_ptr` is a live PyArrayObject while `out` is borrowed.
        let raw = unsafe { &*out.as_array_ptr() };
        if raw.flags & NPY_ARRAY_WRITEABLE == 0 {
            return Err(bad("must be writeable"));
        }
        if out.dtype().itemsize() != itemsize {
            return Err(bad(&format!(
                "dtype {} does not match the object's {itemsize}-byte elements",
                out.dtype()
            )));
        }
        Ok(OutBuffer { ptr: raw.data as *mut u8, len: out.len() * itemsize })
    }

    /// # Safety
    /// Only while the array this was made from is alive (the duration of the call).
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        std::slice::from_raw_parts_mut(self.ptr, self.len)
    }
}

/// The bytes of a read-only, C-contiguous numpy array (an encoder's input).
pub struct InBuffer {
    ptr: *const u8,
    pub len: usize,
}

// SAFETY: as for `OutBuffer`; the array outlives the detached call and is only read.
unsafe impl Send for InBuffer {}
unsafe impl Sync for InBuffer {}

impl InBuffer {
    pub fn new(array: &Bound<'_, PyUntypedArray>, what: &str) -> CoreResult<InBuffer> {
        if !array.is_c_contiguous() {
            return Err(CoreError::new(Kind::Value, format!("{what}: array must be C-contiguous")));
        }
        // SAFETY: as in `OutBuffer::new`.
        let raw = unsafe { &*array.as_array_ptr() };
        Ok(InBuffer { ptr: raw.data as *const u8, len: array.len() * array.dtype().itemsize() })
    }

    /// # Safety
    /// Only while the array this was made from is alive (the duration of the call).
    pub unsafe fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }
}

/// Converts the Python selection (`None`, or one `(start, stop, step)` tuple or `int64` index
/// array per axis) for an object of `shape`.
pub fn parse_selection(selection: Option<&Bound<'_, PyAny>>, shape: &[u64]) -> CoreResult<Vec<AxisSel>> {
    let Some(selection) = selection.filter(|s| !s.is_none()) else {
        return Ok(full_selection(shape));
    };
    let bad = |m: String| CoreError::new(Kind::Index, m);
    let axes = selection
        .cast::<PyTuple>()
        .map_err(|_| bad("selection must be None or a tuple with one entry per axis".into()))?;
    let mut sel = Vec::with_capacity(axes.len());
    for (axis, item) in axes.iter().enumerate() {
        // A tuple is a slice; anything else must be an index array (checked in that order: a
        // failed tuple extraction of a long array costs more than the read).
        if let Ok(t) = item.cast::<PyTuple>() {
            let (start, stop, step): (i64, i64, i64) =
                t.extract().map_err(|_| bad(format!("axis {axis}: a slice is (start, stop, step) ints")))?;
            if step == 0 {
                return Err(bad(format!("axis {axis}: slice step cannot be zero")));
            }
            let len = if step > 0 {
                (stop - start).max(0).div_euclid(step) + i64::from((stop - start).max(0) % step != 0)
            } else {
                (start - stop).max(0).div_euclid(-step) + i64::from((start - stop).max(0) % -step != 0)
            };
            if len > 0 && start < 0 {
                return Err(bad(format!("axis {axis}: slice start {start} is negative")));
            }
            sel.push(AxisSel::Range { start: start.max(0) as u64, step, len: len as u64 });
        } else if let Some(points) = index_array(&item) {
            // Negative indices count from the end, as in numpy; bounds are checked later.
            let n = shape.get(axis).copied().unwrap_or(0) as i64;
            if let Some(p) = points.iter().find(|&&p| p < -n) {
                return Err(bad(format!("axis {axis}: index {p} is out of bounds for size {n}")));
            }
            sel.push(AxisSel::Points(points.iter().map(|&p| if p < 0 { p + n } else { p } as u64).collect()));
        } else {
            return Err(bad(format!("axis {axis}: expected (start, stop, step) or a C-contiguous 1-D int64 array")));
        }
    }
    Ok(sel)
}

/// The values of a C-contiguous 1-D int64 array, read without numpy's borrow tracking (which
/// costs more than a small read).
fn index_array(item: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    let array = item.cast::<PyUntypedArray>().ok()?;
    let int64 = numpy::dtype::<i64>(item.py());
    if array.ndim() != 1 || !array.dtype().is_equiv_to(&int64) {
        return None;
    }
    let buffer = InBuffer::new(array, "index").ok()?;
    // SAFETY: the array is alive and C-contiguous; its bytes are i64 values (checked above).
    let bytes = unsafe { buffer.as_slice() };
    Some(bytes.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect())
}
