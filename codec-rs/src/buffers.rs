//! Recycled memory for the arrays reads allocate.
//!
//! A fresh multi-megabyte numpy array is fresh memory: the kernel faults in and zeroes every
//! page on first write, and glibc returns big blocks to the kernel when they are freed. Reading
//! a 721 x 1440 float64 field that way cost about 1 ms of page faults per read, and it made the
//! reduction that followed fault on its own temporaries too: a fifth of the end-to-end
//! benchmark's time. Arrays of at least [`MIN_POOLED`] bytes therefore take their memory from a
//! small process-wide pool; the array's base object gives it back when numpy frees the array.
//!
//! The pool keeps at most `limit` bytes of free buffers (`TGM_XARRAY_BUFFER_POOL_MB`, default
//! [`DEFAULT_LIMIT_MB`]; 0 turns it off), so what it holds is bounded by what the process had
//! alive at once.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::{self, NonNull};
use std::sync::Mutex;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use tgm_core::errors::CoreError;
use crate::exceptions::Raised;

/// Arrays smaller than this come from numpy's allocator: malloc keeps such blocks.
pub const MIN_POOLED: usize = 256 * 1024;
pub const DEFAULT_LIMIT_MB: usize = 128;
/// Cache-line alignment, more than any dtype needs, so SIMD loops start aligned.
const ALIGN: usize = 64;

/// An uninitialised, 64-byte aligned allocation.
struct Block {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: a `Block` owns its allocation exclusively and offers no access through `&Block`.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    /// `None` when the memory cannot be had (a shape a file declares can ask for any size).
    fn new(cap: usize) -> Option<Block> {
        let layout = Layout::from_size_align(cap, ALIGN).ok()?;
        // SAFETY: `cap` is at least MIN_POOLED, so the layout is not zero-sized.
        let ptr = NonNull::new(unsafe { alloc(layout) })?;
        Some(Block { ptr, cap })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.cap, ALIGN)) }
    }
}

struct Pool {
    /// Oldest first.
    free: Vec<Block>,
    bytes: usize,
    limit: usize,
}

impl Pool {
    /// Takes out the oldest blocks until `bytes` more fit under the limit, for the caller to
    /// free once the lock is released (freeing a big block unmaps it: a system call).
    #[must_use]
    fn make_room(&mut self, bytes: usize) -> Vec<Block> {
        let mut evicted = 0;
        let mut kept = self.bytes;
        while evicted < self.free.len() && kept + bytes > self.limit {
            kept -= self.free[evicted].cap;
            evicted += 1;
        }
        self.bytes = kept;
        self.free.drain(..evicted).collect()
    }
}

static POOL: Mutex<Pool> = Mutex::new(Pool { free: Vec::new(), bytes: 0, limit: DEFAULT_LIMIT_MB << 20 });

/// Sets the limit from `TGM_XARRAY_BUFFER_POOL_MB` when the module is imported; a value that is
/// not a whole number of megabytes warns and leaves the default.
pub fn limit_from_env(py: Python<'_>) -> PyResult<()> {
    let Ok(value) = std::env::var("TGM_XARRAY_BUFFER_POOL_MB") else {
        return Ok(());
    };
    match value.trim().parse::<usize>() {
        Ok(mb) => pool().limit = mb.saturating_mul(1 << 20),
        Err(_) => {
            let message = format!(
                "TGM_XARRAY_BUFFER_POOL_MB={value:?} is not a whole number of megabytes: the read buffer \
                 pool keeps its default limit of {DEFAULT_LIMIT_MB} MB"
            );
            PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(), &std::ffi::CString::new(message)?, 1)?;
        }
    }
    Ok(())
}

/// The pool, locked. Only code attached to the interpreter takes the lock (`empty`, and
/// `PooledBuffer`'s drop), never across a call into Python. That keeps `os.fork` safe: the
/// forking thread holds the GIL, or on free-threaded builds has stopped every other thread
/// at a safe point (`PyOS_BeforeFork`), so no thread can be inside the lock when the child is
/// made.
fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A free block that fits `len` bytes without wasting more than a quarter, or a new one
/// (`None` when that allocation fails).
fn take(len: usize) -> Option<Block> {
    let mut pool = pool();
    let found = pool.free.iter().rposition(|b| b.cap >= len && b.cap - len <= len / 4);
    match found {
        Some(i) => {
            let block = pool.free.remove(i);
            pool.bytes -= block.cap;
            Some(block)
        }
        None => {
            drop(pool);
            Block::new(len)
        }
    }
}

/// Keeps `block` for later reads, dropping the oldest free blocks to stay within the limit.
fn give_back(block: Block) {
    let mut pool = pool();
    if block.cap > pool.limit {
        drop(pool);
        return;
    }
    let evicted = pool.make_room(block.cap);
    pool.bytes += block.cap;
    pool.free.push(block);
    drop(pool);
    drop(evicted);
}

/// The owner of a pooled array's memory (its numpy `base`): returns it to the pool when freed.
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct PooledBuffer {
    block: Option<Block>,
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            give_back(block);
        }
    }
}

/// A new uninitialised C-contiguous array, from the pool when it is big enough.
pub fn empty<'py>(py: Python<'py>, shape: &[usize], dtype: Bound<'py, PyArrayDescr>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let len = shape.iter().try_fold(dtype.itemsize(), |acc, &n| acc.checked_mul(n));
    let Some(len) = len.filter(|&len| len >= MIN_POOLED && pool().limit > 0) else {
        return Ok(py
            .import("numpy")?
            .call_method1("empty", (PyTuple::new(py, shape)?, dtype))?
            .cast_into::<PyUntypedArray>()?);
    };
    let block = take(len).ok_or_else(|| CoreError::out_of_memory(len, "the array")).raised()?;
    let data = block.ptr.as_ptr();
    let owner = Bound::new(py, PooledBuffer { block: Some(block) })?;
    let mut dims: Vec<npy_intp> = shape.iter().map(|&n| n as npy_intp).collect();
    // SAFETY: `data` holds `len` bytes, enough for `shape` of `dtype`, and lives as long as
    // `owner`, which becomes the array's base (SetBaseObject steals the reference, as
    // NewFromDescr steals the dtype's).
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            dtype.into_dtype_ptr(),
            dims.len() as std::os::raw::c_int,
            dims.as_mut_ptr(),
            ptr::null_mut(),
            data.cast(),
            npyffi::NPY_ARRAY_WRITEABLE,
            ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, array)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), owner.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array.cast_into_unchecked())
    }
}

/// `numpy.empty(shape, dtype)`, with the memory of big arrays recycled (see the module's docs).
#[pyfunction(name = "empty")]
pub fn py_empty<'py>(py: Python<'py>, shape: Vec<usize>, dtype: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let dtype = match dtype.cast_into::<PyArrayDescr>() {
        Ok(d) => d,
        Err(e) => {
            let dtype = e.into_inner();
            py.import("numpy")?.call_method1("dtype", (dtype,))?.cast_into::<PyArrayDescr>()?
        }
    };
    empty(py, &shape, dtype)
}

/// `(free buffers, their bytes, the limit in bytes)`; with `limit`, sets the limit first and
/// frees what no longer fits.
#[pyfunction]
#[pyo3(signature = (limit=None))]
pub fn buffer_pool(limit: Option<usize>) -> (usize, usize, usize) {
    let mut pool = pool();
    let mut evicted = Vec::new();
    if let Some(limit) = limit {
        pool.limit = limit;
        evicted = pool.make_room(0);
    }
    let state = (pool.free.len(), pool.bytes, pool.limit);
    drop(pool);
    drop(evicted);
    state
}
