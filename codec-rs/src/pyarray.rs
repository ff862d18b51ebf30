//! The Python side of a read: selections and caller-allocated numpy output arrays.

use std::os::raw::c_int;

use numpy::npyffi::{NPY_ARRAY_WRITEABLE, NPY_TYPES};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PySlice, PySliceMethods, PyTuple, PyTupleMethods};
use tensogram::{DataObjectDescriptor, Dtype};

use crate::buffers;
use tgm_core::wire::dtypes;
use tgm_core::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;
use tgm_core::source::message::ObjectEntry;
use tgm_core::read::object::{full_selection, read_object, worth_releasing, Verify};
use tgm_core::read::selection::AxisSel;

/// A numpy array's data buffer, to be filled while the interpreter is detached.
///
/// Numpy arrays cannot be resized while referenced, and the caller holds a reference for the
/// whole call, so the pointer stays valid; concurrent writers into one `out` are the caller's
/// business, as with numpy's own `out=` arguments.
struct OutBuffer {
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
        let raw = unsafe { &(*out.as_array_ptr()).fields };
        if raw.flags & NPY_ARRAY_WRITEABLE == 0 {
            return Err(bad("must be writeable"));
        }
        if descr_of(out).itemsize() != itemsize {
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

/// An array's dtype, borrowed without touching its reference count: the builtin dtypes are
/// shared by every array of their type, and on free-threaded CPython an incref and decref from
/// every read on every thread would make that count a point of contention.
fn descr_of<'a, 'py>(array: &'a Bound<'py, PyUntypedArray>) -> Borrowed<'a, 'py, PyArrayDescr> {
    // SAFETY: a live array's `descr` is a valid dtype object, alive as long as the array.
    unsafe {
        Borrowed::from_ptr(array.py(), (*array.as_array_ptr()).fields.descr.cast()).cast_unchecked::<PyArrayDescr>()
    }
}

/// Whether `out` has the object's shape and dtype, checked without making a dtype object where
/// the type numbers already agree (the usual case).
fn out_fits(out: &Bound<'_, PyUntypedArray>, shape: &[usize], dtype: Dtype) -> PyResult<bool> {
    if out.shape() != shape {
        return Ok(false);
    }
    let descr = descr_of(out);
    if builtin_dtype(out.py(), dtype).is_some_and(|d| descr.num() == d.num()) && descr.is_native_byteorder() != Some(false) {
        return Ok(true);
    }
    Ok(descr.is_equiv_to(&numpy_dtype(out.py(), dtype).raised()?))
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
        let raw = unsafe { &(*array.as_array_ptr()).fields };
        Ok(InBuffer { ptr: raw.data as *const u8, len: array.len() * descr_of(array).itemsize() })
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

impl Index {
    /// At most how many separate runs of elements the read copies, on an object of `shape`
    /// (each costs a place in the plan): the product of the selection's lengths up to its last
    /// axis that is not whole, that axis left out when it is one ascending run.
    pub fn pieces(&self, shape: &[u64]) -> usize {
        let len = |a: &Axis| match a {
            Axis::Sel(sel) => sel.len(),
            Axis::Points { data, .. } => data.len / 8,
        };
        let whole = |(a, &n): (&Axis, &u64)| matches!(a, Axis::Sel(sel) if sel.is_full(n));
        let Some(last) = self.axes.iter().zip(shape).rposition(|axis| !whole(axis)) else {
            return 1;
        };
        let one_run = matches!(&self.axes[last], Axis::Sel(AxisSel::Range { step: 1, .. })) || len(&self.axes[last]) <= 1;
        self.axes[..if one_run { last } else { last + 1 }].iter().map(len).product()
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
/// it skips). An item is a slice, an int (its axis is dropped), a 1-D integer or boolean array
/// or list, or the core's own `(start, stop, step)` tuple as `slice.indices(n)` returns it.
pub fn parse_index(index: Option<&Bound<'_, PyAny>>, shape: &[u64]) -> CoreResult<Index> {
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
    if let Ok(t) = item.cast::<PyTuple>() {
        let sel = core_range(t, axis)?;
        let len = sel.len();
        return Ok((Axis::Sel(sel), len, false));
    }
    let from_list;
    let array = match item.cast::<PyUntypedArray>() {
        Ok(a) if a.ndim() == 0 => None, // a 0-d integer array indexes like an int
        Ok(a) => Some(a),
        Err(_) if item.cast::<PyList>().is_ok() => {
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

/// The core's `(start, stop, step)` tuple, as `slice.indices(n)` returns it.
fn core_range(t: &Bound<'_, PyTuple>, axis: usize) -> CoreResult<AxisSel> {
    let bad = |m: String| CoreError::new(Kind::Index, m);
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
    Ok(AxisSel::Range { start: start.max(0) as u64, step, len: len as u64 })
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
    if array.ndim() != 1 || !matches!(descr.kind(), b'i' | b'u') {
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

/// The numpy dtypes of the core's table (`tgm_core::dtypes`), made once per interpreter.
static BUILTIN_DTYPES: PyOnceLock<Vec<(Dtype, Py<PyArrayDescr>)>> = PyOnceLock::new();

/// numpy's builtin dtype for a Tensogram dtype, borrowed (`None` where numpy has none).
fn builtin_dtype(py: Python<'_>, dtype: Dtype) -> Option<&Bound<'_, PyArrayDescr>> {
    let table = BUILTIN_DTYPES.get_or_init(py, || {
        dtypes::numpy_typestrs()
            .map(|(d, typestr)| (d, PyArrayDescr::new(py, typestr).expect("numpy knows its type strings").unbind()))
            .collect()
    });
    table.iter().find(|(d, _)| *d == dtype).map(|(_, descr)| descr.bind(py))
}

/// The numpy dtype of a Tensogram dtype: numpy's own, or for bfloat16 ml_dtypes'. A bitmask
/// (packed bits, whose shape counts bits, not bytes) has none: a Dataset never plans them.
fn numpy_dtype<'py>(py: Python<'py>, dtype: Dtype) -> CoreResult<Bound<'py, PyArrayDescr>> {
    if let Some(descr) = builtin_dtype(py, dtype) {
        return Ok(descr.clone());
    }
    match dtype {
        Dtype::Bfloat16 => py
            .import("ml_dtypes")
            .and_then(|m| PyArrayDescr::new(py, m.getattr("bfloat16")?))
            .map_err(|_| CoreError::new(Kind::Codec, "bfloat16 objects need the ml_dtypes package")),
        other => Err(CoreError::new(
            Kind::Codec,
            format!("{other} objects (packed bits) have no array form here; leave them out with filter_by_keys"),
        )),
    }
}

fn parse_dtype(name: &str) -> CoreResult<Dtype> {
    dtypes::parse(name).ok_or_else(|| CoreError::new(Kind::Codec, format!("unknown dtype '{name}'")))
}

/// The numpy dtype objects of Tensogram dtype `name` are read as (`TgmCodecError` for bitmask,
/// bfloat16 without ml_dtypes, and names Tensogram does not define).
#[pyfunction(name = "numpy_dtype")]
pub fn py_numpy_dtype<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArrayDescr>> {
    parse_dtype(name).and_then(|d| numpy_dtype(py, d)).raised()
}

/// Bytes `count` elements of dtype `name` take decoded (bitmasks: whole bytes of bits).
#[pyfunction]
pub fn decoded_bytes(name: &str, count: u64) -> PyResult<u64> {
    let dtype = parse_dtype(name).raised()?;
    dtypes::decoded_bytes(dtype, count)
        .ok_or_else(|| CoreError::new(Kind::Value, format!("{count} {name} elements overflow 64-bit sizes")))
        .raised()
}

/// Reads `index` of object `entry` (stored in `bytes`) into `out`, or into a new array when
/// `out` is `None`, and returns it. The one read path of `FileHandle.read` and `read_frame`;
/// `where_` names the object in errors.
#[allow(clippy::too_many_arguments)] // the read's Python arguments, passed through
pub fn read_to_array<'py>(
    py: Python<'py>,
    bytes: &[u8],
    entry: &ObjectEntry,
    index: Option<&Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyUntypedArray>>,
    verify: Verify,
    threads: Option<usize>,
    where_: &dyn Fn() -> String,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let index = parse_index(index, &entry.descriptor.shape).map_err(|e| e.context(&where_())).raised()?;
    let out = out_array(py, &entry.descriptor, &index.shape, out, where_)?;
    read_into_out(py, bytes, entry, index, &out, verify, threads).map_err(|e| e.context(&where_())).raised()?;
    Ok(out)
}

/// The array a read of `shape` elements of `desc`'s dtype fills: `out` when it fits, else a
/// new one (from the buffer pool when big); an `out` that does not fit is an error.
pub fn out_array<'py>(
    py: Python<'py>,
    desc: &DataObjectDescriptor,
    shape: &[usize],
    out: Option<Bound<'py, PyUntypedArray>>,
    where_: &dyn Fn() -> String,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let dtype = || numpy_dtype(py, desc.dtype).map_err(|e| e.context(&where_()).raised());
    match out {
        None => buffers::empty(py, shape, dtype()?),
        Some(out) if out_fits(&out, shape, desc.dtype)? => Ok(out),
        Some(out) => Err(CoreError::new(
            Kind::Value,
            format!(
                "{}: out has shape {:?} and dtype {}; the read needs {:?} {}",
                where_(),
                out.shape(),
                out.dtype(),
                shape,
                dtype()?
            ),
        )
        .raised()),
    }
}

/// Reads `index` of object `entry` (stored in `bytes`) into `out`, with the interpreter
/// released unless the read is too small to be worth it (`read::object::worth_releasing`);
/// `index`'s arrays are converted there too. `threads`: see `read::object::read_object`.
pub fn read_into_out(
    py: Python<'_>,
    bytes: &[u8],
    entry: &ObjectEntry,
    index: Index,
    out: &Bound<'_, PyUntypedArray>,
    verify: Verify,
    threads: Option<usize>,
) -> CoreResult<()> {
    let itemsize = entry.descriptor.dtype.byte_width();
    let release = worth_releasing(entry, out.len() * itemsize, index.pieces(&entry.descriptor.shape), verify);
    fill_out(py, out, itemsize, release, move |out| read_object(bytes, entry, &index.selection()?, out, verify, threads))
}

/// Runs `fill(out bytes)` on `out`'s buffer (`itemsize` bytes per element), with the
/// interpreter detached when `release`.
pub fn fill_out(
    py: Python<'_>,
    out: &Bound<'_, PyUntypedArray>,
    itemsize: usize,
    release: bool,
    fill: impl Send + FnOnce(&mut [u8]) -> CoreResult<()>,
) -> CoreResult<()> {
    let mut buf = OutBuffer::new(out, itemsize)?;
    // SAFETY: `out` is referenced for the whole call.
    let fill = move || fill(unsafe { buf.as_mut_slice() });
    if release {
        py.detach(fill)
    } else {
        fill()
    }
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
