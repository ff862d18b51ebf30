//! Recycled memory for big buffers: the extension's global allocator.
//!
//! A fresh multi-megabyte buffer is fresh memory: glibc maps blocks of 128 KiB and more afresh
//! and unmaps them when they are freed, so the kernel faults in and zeroes every page on first
//! write. Reading a 721 x 1440 float64 field that way cost about 1 ms of page faults per read,
//! and encoding it a third of the encode's CPU time (1,500 page faults: the packed pieces,
//! szip's output, upstream's payload copy, frame and message). Every allocation of this
//! extension's Rust code (the core, upstream's crates, the arrays reads return: [`empty`]) of at
//! least [`MIN_POOLED`] bytes therefore goes through one process-wide pool of freed blocks;
//! Python's and numpy's own memory stays glibc's.
//!
//! The pool keeps at most `limit` bytes of free blocks (`TGM_XARRAY_BUFFER_POOL_MB`, default
//! [`DEFAULT_LIMIT_MB`]; 0 turns it off), so what it holds is bounded by what the process had
//! alive at once. It reserves nothing ahead: an allocation that fails while it holds blocks
//! frees them and tries again, so limits on the address space (RLIMIT_AS) bound the process as
//! they would without it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use tgm_core::errors::CoreError;
use crate::exceptions::Raised;

/// Smaller blocks come from glibc's malloc, which keeps such blocks (its mapping threshold).
pub const MIN_POOLED: usize = 128 * 1024;
pub const DEFAULT_LIMIT_MB: usize = 128;
/// Cache-line alignment, more than any dtype needs, so SIMD loops start aligned.
const ALIGN: usize = 64;
/// Before each pooled block, one alignment's worth of bytes holding its capacity: a block taken
/// from the pool may be bigger than the size its owner frees it with.
const HEADER: usize = ALIGN;
/// The most free blocks kept (a fixed array: the allocator must not allocate for itself). An
/// encode of a 1442 x 2880 field frees 64 szip pieces at once, besides its other buffers.
const SLOTS: usize = 256;

/// The allocator of this extension (see the module's docs).
pub struct Recycling;

/// Whether the pool serves allocations of `layout`.
fn pooled(layout: &Layout) -> bool {
    layout.size() >= MIN_POOLED && layout.align() <= ALIGN
}

/// Whether a block of `cap` bytes serves `len` without wasting more than a quarter.
fn fits(cap: usize, len: usize) -> bool {
    cap >= len && cap - len <= len / 4
}

/// The capacity of the pooled block at `ptr`.
///
/// # Safety
/// `ptr` was returned by [`allocate`].
unsafe fn capacity(ptr: *mut u8) -> usize {
    ptr.sub(HEADER).cast::<usize>().read()
}

/// A new block of `cap` bytes from the system (null when it cannot be had).
fn system_block(cap: usize, zeroed: bool) -> *mut u8 {
    let Some(layout) = cap.checked_add(HEADER).and_then(|size| Layout::from_size_align(size, ALIGN).ok()) else {
        return ptr::null_mut();
    };
    // SAFETY: the layout is not zero-sized; the header lies inside the allocation.
    unsafe {
        let base = if zeroed { System.alloc_zeroed(layout) } else { System.alloc(layout) };
        if base.is_null() {
            return base;
        }
        base.cast::<usize>().write(cap);
        base.add(HEADER)
    }
}

/// Returns the block at `ptr` to the system.
///
/// # Safety
/// `ptr` was returned by [`allocate`] and is not used again.
unsafe fn release(ptr: *mut u8) {
    let cap = capacity(ptr);
    System.dealloc(ptr.sub(HEADER), Layout::from_size_align_unchecked(cap + HEADER, ALIGN));
}

/// A pooled block of at least `len` bytes: a free one that fits, else a new one.
fn allocate(len: usize, zeroed: bool) -> *mut u8 {
    let free = pool().take(len);
    if let Some(ptr) = free {
        if zeroed {
            // SAFETY: the block holds at least `len` bytes.
            unsafe { ptr.write_bytes(0, len) };
        }
        return ptr;
    }
    let ptr = system_block(len, zeroed);
    if ptr.is_null() && pool().count > 0 {
        let evicted = pool().evict(0);
        free_all(evicted);
        return system_block(len, zeroed);
    }
    ptr
}

/// Keeps the block at `ptr` for later allocations, dropping the oldest free blocks to stay
/// within the limit.
///
/// # Safety
/// `ptr` was returned by [`allocate`] and is not used again by its owner.
unsafe fn give_back(ptr: *mut u8) {
    let cap = capacity(ptr);
    let mut pool = pool();
    if cap > pool.limit {
        drop(pool);
        release(ptr);
        return;
    }
    let keep = pool.limit - cap;
    let mut evicted = pool.evict(keep);
    if pool.count == SLOTS {
        evicted.push(pool.remove(0));
    }
    pool.push(ptr, cap);
    drop(pool);
    free_all(evicted);
}

/// Freed outside the pool's lock: unmapping a big block is a system call.
fn free_all(blocks: Evicted) {
    for &ptr in &blocks.ptrs[..blocks.count] {
        // SAFETY: taken out of the pool, which owned it.
        unsafe { release(ptr) };
    }
}

unsafe impl GlobalAlloc for Recycling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if pooled(&layout) { allocate(layout.size(), false) } else { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if pooled(&layout) { allocate(layout.size(), true) } else { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if pooled(&layout) { give_back(ptr) } else { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (pooled(&layout), pooled(&new_layout)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) if fits(capacity(ptr), new_size) => ptr,
            _ => {
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

/// Free blocks, oldest first.
struct Pool {
    ptrs: [*mut u8; SLOTS],
    caps: [usize; SLOTS],
    count: usize,
    bytes: usize,
    limit: usize,
}

/// Blocks taken out of the pool, for the caller to free once the lock is released.
struct Evicted {
    ptrs: [*mut u8; SLOTS],
    count: usize,
}

impl Evicted {
    fn push(&mut self, ptr: *mut u8) {
        self.ptrs[self.count] = ptr;
        self.count += 1;
    }
}

impl Pool {
    /// The newest free block that fits `len` bytes, taken out.
    fn take(&mut self, len: usize) -> Option<*mut u8> {
        let i = (0..self.count).rev().find(|&i| fits(self.caps[i], len))?;
        Some(self.remove(i))
    }

    fn remove(&mut self, i: usize) -> *mut u8 {
        let ptr = self.ptrs[i];
        self.bytes -= self.caps[i];
        self.ptrs.copy_within(i + 1..self.count, i);
        self.caps.copy_within(i + 1..self.count, i);
        self.count -= 1;
        ptr
    }

    fn push(&mut self, ptr: *mut u8, cap: usize) {
        self.ptrs[self.count] = ptr;
        self.caps[self.count] = cap;
        self.count += 1;
        self.bytes += cap;
    }

    /// Takes out the oldest blocks until at most `keep` bytes are left.
    #[must_use]
    fn evict(&mut self, keep: usize) -> Evicted {
        let mut evicted = Evicted { ptrs: [ptr::null_mut(); SLOTS], count: 0 };
        while self.bytes > keep {
            evicted.push(self.remove(0));
        }
        evicted
    }
}

/// The pool behind a spin lock that `fork` handlers can take and release (see [`init`]); it is
/// held for a scan of at most [`SLOTS`] entries, never across an allocation.
struct Locked {
    busy: AtomicBool,
    pool: UnsafeCell<Pool>,
}

// SAFETY: the pool is only reached through `pool()`, which holds `busy`.
unsafe impl Sync for Locked {}

static POOL: Locked = Locked {
    busy: AtomicBool::new(false),
    pool: UnsafeCell::new(Pool { ptrs: [ptr::null_mut(); SLOTS], caps: [0; SLOTS], count: 0, bytes: 0, limit: DEFAULT_LIMIT_MB << 20 }),
};

struct Guard;

impl Deref for Guard {
    type Target = Pool;
    fn deref(&self) -> &Pool {
        // SAFETY: the guard holds the lock.
        unsafe { &*POOL.pool.get() }
    }
}

impl DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Pool {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *POOL.pool.get() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        POOL.busy.store(false, Ordering::Release);
    }
}

/// The pool, locked.
fn pool() -> Guard {
    while POOL.busy.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::thread::yield_now();
    }
    Guard
}

extern "C" fn lock_before_fork() {
    std::mem::forget(pool());
}

extern "C" fn unlock_after_fork() {
    POOL.busy.store(false, Ordering::Release);
}

/// When the module is imported: the `fork` handlers that keep a child from starting with the
/// pool locked by a thread it does not have (threads allocate with the interpreter released),
/// and the limit from `TGM_XARRAY_BUFFER_POOL_MB`; a value that is not a whole number of
/// megabytes warns and leaves the default.
pub fn init(py: Python<'_>) -> PyResult<()> {
    static FORK_HANDLERS: Once = Once::new();
    // SAFETY: the handlers take and release the pool's lock, nothing else.
    FORK_HANDLERS.call_once(|| unsafe {
        libc::pthread_atfork(Some(lock_before_fork), Some(unlock_after_fork), Some(unlock_after_fork));
    });
    let Ok(value) = std::env::var("TGM_XARRAY_BUFFER_POOL_MB") else {
        return Ok(());
    };
    match value.trim().parse::<usize>() {
        Ok(mb) => set_limit(mb.saturating_mul(1 << 20)),
        Err(_) => {
            let message = format!(
                "TGM_XARRAY_BUFFER_POOL_MB={value:?} is not a whole number of megabytes: the buffer \
                 pool keeps its default limit of {DEFAULT_LIMIT_MB} MB"
            );
            PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(), &std::ffi::CString::new(message)?, 1)?;
        }
    }
    Ok(())
}

/// Frees every block the pool holds (its limit stays): for a reservation that failed, which
/// the pool's blocks may have stood in the way of, and after a table scan.
pub fn drain() {
    let evicted = pool().evict(0);
    free_all(evicted);
}

fn set_limit(limit: usize) {
    let mut pool = pool();
    pool.limit = limit;
    let evicted = pool.evict(limit);
    drop(pool);
    free_all(evicted);
}

/// The memory of a pooled array, 64-byte aligned.
struct Block {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Block` owns its allocation exclusively and offers no access through `&Block`.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `empty` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, ALIGN)) }
    }
}

/// The owner of a pooled array's memory (its numpy `base`): returns it to the pool when freed.
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct PooledBuffer {
    #[allow(dead_code)] // held for its drop
    block: Block,
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
    let layout = Layout::from_size_align(len, ALIGN).map_err(|_| CoreError::out_of_memory(len, "the array")).raised()?;
    // SAFETY: the layout is not zero-sized (`len` is at least MIN_POOLED).
    let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or_else(|| CoreError::out_of_memory(len, "the array")).raised()?;
    let data = ptr.as_ptr();
    let owner = Bound::new(py, PooledBuffer { block: Block { ptr, len } })?;
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
    crate::guard::guarded("empty", || {
        let dtype = match dtype.cast_into::<PyArrayDescr>() {
            Ok(d) => d,
            Err(e) => {
                let dtype = e.into_inner();
                py.import("numpy")?.call_method1("dtype", (dtype,))?.cast_into::<PyArrayDescr>()?
            }
        };
        empty(py, &shape, dtype)
    })
}

/// `(free buffers, their bytes, the limit in bytes)`; with `limit`, sets the limit first and
/// frees what no longer fits.
#[pyfunction]
#[pyo3(signature = (limit=None))]
pub fn buffer_pool(limit: Option<usize>) -> PyResult<(usize, usize, usize)> {
    crate::guard::guarded("buffer_pool", || {
        if let Some(limit) = limit {
            set_limit(limit);
        }
        let pool = pool();
        Ok((pool.count, pool.bytes, pool.limit))
    })
}
