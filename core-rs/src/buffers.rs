//! Buffers the core allocates at sizes a file declares: a failed allocation is an error, never
//! an abort.

use std::alloc::{alloc_zeroed, Layout};

use crate::errors::{CoreError, CoreResult};

/// A zeroed `Vec` of `len` bytes, or a `Kind::Memory` error when it cannot be had: sizes that come
/// from a file's descriptor must not abort the process.
pub fn try_zeroed(len: usize, what: &str) -> CoreResult<Vec<u8>> {
    let Some(layout) = Layout::array::<u8>(len).ok().filter(|l| l.size() > 0) else {
        return if len == 0 { Ok(Vec::new()) } else { Err(CoreError::out_of_memory(len, what)) };
    };
    // Zeroed by the allocator, as `vec![0; len]` is: fresh pages need no writing.
    // SAFETY: the layout is not zero-sized.
    let ptr = unsafe { alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(CoreError::out_of_memory(len, what));
    }
    // SAFETY: `ptr` holds `len` initialised bytes, allocated by the global allocator with
    // `u8`'s alignment, as a `Vec<u8>` of capacity `len` would be.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}
