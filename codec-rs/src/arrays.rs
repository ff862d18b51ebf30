//! numpy arrays at the wall: the buffers reads fill and encoders take, and the dtypes of the
//! core's table as numpy's.

use numpy::npyffi::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tensogram::{DataObjectDescriptor, Dtype};

use crate::buffers;
use tgm_core::encoding::packing::Unpacked;
use tgm_core::wire::dtypes;
use tgm_core::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;

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
pub(crate) fn descr_of<'a, 'py>(array: &'a Bound<'py, PyUntypedArray>) -> Borrowed<'a, 'py, PyArrayDescr> {
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

/// The bytes of a read-only, C-contiguous numpy array (an encoder's input, an index), holding
/// a reference to the array: whatever other threads do to the list or dict it came from while
/// the interpreter is released, its memory stays (numpy refuses to resize a referenced array).
pub struct InBuffer {
    _array: Py<PyUntypedArray>,
    ptr: *const u8,
    pub len: usize,
}

// SAFETY: as for `OutBuffer`; the array lives as long as this and is only read.
unsafe impl Send for InBuffer {}
unsafe impl Sync for InBuffer {}

impl InBuffer {
    pub fn new(array: &Bound<'_, PyUntypedArray>, what: &str) -> CoreResult<InBuffer> {
        if !array.is_c_contiguous() {
            return Err(CoreError::new(Kind::Value, format!("{what}: array must be C-contiguous")));
        }
        // SAFETY: as in `OutBuffer::new`.
        let raw = unsafe { &(*array.as_array_ptr()).fields };
        Ok(InBuffer { _array: array.clone().unbind(), ptr: raw.data as *const u8, len: array.len() * descr_of(array).itemsize() })
    }

    /// # Safety
    /// No thread may write to the array meanwhile (its memory stays valid: this holds it).
    pub unsafe fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }
}

/// The numpy dtypes of the core's table (`tgm_core::dtypes`), made once per interpreter.
static BUILTIN_DTYPES: PyOnceLock<Vec<(Dtype, Py<PyArrayDescr>)>> = PyOnceLock::new();

/// Makes, at import, what would otherwise be made on a first read or encode in some thread:
/// numpy's API table and array type (rust-numpy makes each once, on first use) and the dtype
/// table. A process forked while another thread was making one of them would wait for it for
/// ever in the child (`fork` copies the lock held, not the thread that holds it).
pub fn init(py: Python<'_>) {
    numpy::PyArray1::<f64>::zeros(py, 0, false); // the API table
    // SAFETY: a lookup in numpy's API table, with the interpreter attached.
    unsafe { numpy::npyffi::get_type_object(py, numpy::npyffi::NpyTypes::PyArray_Type) };
    if let Some(float64) = builtin_dtype(py, Dtype::Float64) {
        float64.itemsize(); // and numpy's ABI version, which it reads
    }
}

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
    crate::guard::guarded("numpy_dtype", || {
        parse_dtype(name).and_then(|d| numpy_dtype(py, d)).raised()
    })
}

/// The dtype a read of `stored` objects fills to give `wanted` values: `wanted` where a read
/// fills it straight (the object's own dtype; float32 for float64 objects, see
/// [`unpacked_for`]), else `stored`, which the caller then converts.
#[pyfunction]
pub fn read_dtype<'py>(stored: Bound<'py, PyArrayDescr>, wanted: Bound<'py, PyArrayDescr>) -> PyResult<Bound<'py, PyArrayDescr>> {
    crate::guard::guarded("read_dtype", || {
        let py = stored.py();
        let is = |d: &Bound<'py, PyArrayDescr>, t: Dtype| builtin_dtype(py, t).is_some_and(|b| d.is_equiv_to(b));
        Ok(if stored.is_equiv_to(&wanted) || (is(&stored, Dtype::Float64) && is(&wanted, Dtype::Float32)) { wanted } else { stored })
    })
}

/// Bytes `count` elements of dtype `name` take decoded (bitmasks: whole bytes of bits).
#[pyfunction]
pub fn decoded_bytes(name: &str, count: u64) -> PyResult<u64> {
    crate::guard::guarded("decoded_bytes", || {
        let dtype = parse_dtype(name).raised()?;
        dtypes::decoded_bytes(dtype, count)
            .ok_or_else(|| CoreError::new(Kind::Value, format!("{count} {name} elements overflow 64-bit sizes")))
            .raised()
    })
}

/// What a read of a `dtype` object into `out` unpacks into: float32 where the object is float64
/// and `out` float32 (`values_dtype="float32"`), else the object's own dtype.
pub fn unpacked_for(out: &Bound<'_, PyUntypedArray>, dtype: Dtype) -> Unpacked {
    let float32 = builtin_dtype(out.py(), Dtype::Float32).is_some_and(|f| descr_of(out).num() == f.num());
    if dtype == Dtype::Float64 && float32 && descr_of(out).is_native_byteorder() != Some(false) {
        Unpacked::F32
    } else {
        Unpacked::F64
    }
}

/// Bytes per element a read of a `dtype` object unpacking into `to` writes.
pub fn out_itemsize(dtype: Dtype, to: Unpacked) -> usize {
    match to {
        Unpacked::F32 => 4,
        Unpacked::F64 => dtype.byte_width(),
    }
}

/// The array a read of `shape` elements of `desc`'s dtype fills: `out` when it fits (float32
/// for a float64 object too, see [`unpacked_for`]), else a new one (from the buffer pool when
/// big); an `out` that does not fit is an error.
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
        Some(out) if out.shape() == shape && unpacked_for(&out, desc.dtype) == Unpacked::F32 => Ok(out),
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
