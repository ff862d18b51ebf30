//! Pieces of messages read on their own (remote files, `remote.py`; the zarr codec's chunks):
//! whole messages and data-object frames parsed, read and fingerprinted. Python fetches the
//! bytes; the format rules are the core's (`tgm_core::source::remote_walk`,
//! `tgm_core::source::message`).

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, metadata_to_py};
use tgm_core::source::message::{ObjectEntry, ParsedMessage};
use crate::codec::check_holds;
use crate::read_into::read_to_array;
use tgm_core::read::object::{check_hash, Verify};

/// The message that is all of `buf`: `(metadata, [(descriptor, frame_offset, frame_length), ...])`.
#[pyfunction]
pub fn parse_message<'py>(py: Python<'py>, buf: &[u8]) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    crate::guard::guarded("parse_message", || {
        let parsed = py.detach(|| ParsedMessage::parse_single(buf)).raised()?;
        let objects = PyList::empty(py);
        for entry in &parsed.objects {
            objects.append((descriptor_to_py(py, &entry.descriptor)?, entry.frame.start, entry.frame.len()))?;
        }
        Ok((metadata_to_py(py, &parsed.metadata)?, objects))
    })
}

/// `FileHandle.read` for the object in the data-object frame `frame` (a remote read fetches
/// just the frame); `context` names the object in errors. `expect_shape`: the shape the frame's
/// object must have (a zarr chunk spec's), checked before it is decoded.
#[pyfunction]
#[pyo3(signature = (frame, index = None, out = None, verify_hash = None, context = "", threads = None, expect_shape = None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
pub fn read_frame<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyBytes>,
    index: Option<&Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyUntypedArray>>,
    verify_hash: Option<bool>,
    context: &str,
    threads: Option<usize>,
    expect_shape: Option<Vec<u64>>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    crate::guard::guarded("read_frame", || {
        let bytes = frame.as_bytes();
        let entry = py.detach(|| ObjectEntry::from_frame(bytes)).map_err(|e| e.context(context)).raised()?;
        if let Some(shape) = &expect_shape {
            check_holds([&entry.descriptor], shape, None).map_err(|e| e.context(context)).raised()?;
        }
        read_to_array(py, bytes, &entry, index, out, Verify::from_flag(verify_hash), threads, &|| context.to_owned())
    })
}

/// `FileHandle.check_hash` of the object in the data-object frame `frame` (a remote file's,
/// fetched): its stored hash checked against its bytes, nothing decoded.
#[pyfunction]
#[pyo3(signature = (frame, context = ""))]
pub fn check_frame_hash(py: Python<'_>, frame: &Bound<'_, PyBytes>, context: &str) -> PyResult<bool> {
    crate::guard::guarded("check_frame_hash", || {
        let bytes = frame.as_bytes();
        py.detach(|| ObjectEntry::from_frame(bytes).and_then(|e| check_hash(bytes, &e))).map_err(|e| e.context(context)).raised()
    })
}

/// The fingerprint `FileHandle.fingerprint` gives the object in the data-object frame `frame`.
#[pyfunction]
pub fn frame_fingerprint(py: Python<'_>, frame: &Bound<'_, PyBytes>) -> PyResult<u64> {
    crate::guard::guarded("frame_fingerprint", || {
        let bytes = frame.as_bytes();
        py.detach(|| ObjectEntry::from_frame(bytes).map(|e| e.fingerprint(bytes))).raised()
    })
}
