//! A read into a numpy array: the one path of `FileHandle.read`, `read_frame`, the remote file
//! and `decode_message_into`, from a parsed index to the filled array.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::{out_array, out_itemsize, unpacked_for, OutBuffer};
use tgm_core::errors::CoreResult;
use crate::exceptions::Raised;
use crate::index::{parse_index, Index};
use tgm_core::source::message::ObjectEntry;
use tgm_core::read::object::{read_object, worth_releasing, Verify};

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

/// Reads `index` of object `entry` (stored in `bytes`) into `out` (as float32 where `out` is float32
/// and the object float64), with the interpreter
/// released unless the read is too small to be worth it (`read::object::worth_releasing`); `index`'s
/// arrays are converted there too. `threads`: see `read::object::read_object`.
pub fn read_into_out(
    py: Python<'_>,
    bytes: &[u8],
    entry: &ObjectEntry,
    index: Index,
    out: &Bound<'_, PyUntypedArray>,
    verify: Verify,
    threads: Option<usize>,
) -> CoreResult<()> {
    let to = unpacked_for(out, entry.descriptor.dtype);
    let itemsize = out_itemsize(entry.descriptor.dtype, to);
    let release = worth_releasing(entry, out.len() * itemsize, index.pieces(&entry.descriptor.shape), verify);
    fill_out(py, out, itemsize, release, move |out| read_object(bytes, entry, &index.selection()?, out, verify, threads, to))
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
