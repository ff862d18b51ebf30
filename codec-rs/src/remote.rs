//! Remote files read by byte range: `tgm_core::source::remote_file` bound as thin classes. The
//! walks are sans-IO objects, `wanted() -> [(start, stop), ...] | None` and
//! `feed([bytes, ...])`, that `tgm_xarray.source.remote` drives (synchronously, or from asyncio);
//! nothing here calls back into Python, and nothing here moves bytes.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tgm_core::source::remote_file::{self, Description, PayloadRead, RemoteFile};
use tgm_core::source::remote_walk::{Ranges, Scan, Settings};

use tgm_core::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, metadata_to_py};
use crate::arrays::{out_array, out_itemsize, unpacked_for};
use crate::index::parse_index;
use crate::read_into::fill_out;
use crate::table::PyTable;

/// The bytes fed to a walk, copied out of their Python objects.
fn pieces(fed: Vec<Bound<'_, PyBytes>>) -> Vec<Vec<u8>> {
    fed.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn spent() -> PyErr {
    CoreError::new(Kind::Value, "the walk is finished").raised()
}

/// The walk in `slot`, until it is finished.
fn live<T>(slot: &mut Option<T>) -> PyResult<&mut T> {
    slot.as_mut().ok_or_else(spent)
}

/// The opening scan of a remote file (`scan_remote`): `wanted`/`feed` until `wanted` gives
/// `None`, then `finish`.
#[pyclass(module = "tgm_xarray._core")]
pub struct RemoteScan {
    source: String,
    tail_guess: u64,
    scan: Option<Scan>,
}

#[pymethods]
impl RemoteScan {
    /// The ranges to fetch next, `None` when the scan is complete.
    fn wanted(&mut self) -> PyResult<Option<Ranges>> {
        crate::guard::guarded("RemoteScan.wanted", || {
            live(&mut self.scan)?.wanted().raised()
        })
    }

    /// The bytes of the ranges `wanted` gave, in its order.
    fn feed(&mut self, fed: Vec<Bound<'_, PyBytes>>) -> PyResult<()> {
        crate::guard::guarded("RemoteScan.feed", || {
            live(&mut self.scan)?.feed(pieces(fed)).raised()
        })
    }

    /// The file's messages, once `wanted` gives `None`.
    fn finish(&mut self, py: Python<'_>) -> PyResult<RemoteMessages> {
        crate::guard::guarded("RemoteScan.finish", || {
            let scan = self.scan.take().ok_or_else(spent)?;
            let (source, tail_guess) = (self.source.as_str(), self.tail_guess);
            let file = py.detach(|| RemoteFile::from_scan(source, scan.finish(), tail_guess));
            Ok(RemoteMessages { file })
        })
    }
}

/// The scan of the remote file `source` of `size` bytes that opening does, reading as much at
/// once as `tgm_xarray.source.remote`'s settings say (`tgm_core::source::remote_walk::Settings`).
#[pyfunction]
#[pyo3(signature = (source, size, *, first_block, max_block, read_ahead, whole_message_max, header_guess, tail_guess))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
pub fn scan_remote(
    source: &str, size: u64, first_block: u64, max_block: u64, read_ahead: u64, whole_message_max: u64, header_guess: u64,
    tail_guess: u64,
) -> PyResult<RemoteScan> {
    crate::guard::guarded("scan_remote", || {
        let settings = Settings { first_block, max_block, read_ahead, whole_message_max, header_guess, tail_guess };
        Ok(RemoteScan { source: source.to_owned(), tail_guess, scan: Some(remote_file::scan(source, size, settings)) })
    })
}

/// Every message of a remote file: the state of a `RemoteHandle` (`tgm_core::source::remote_file`).
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct RemoteMessages {
    file: RemoteFile,
}

impl RemoteMessages {
    pub(crate) fn file(&self) -> &RemoteFile {
        &self.file
    }
}

#[pymethods]
impl RemoteMessages {
    /// The remote file `source` of `size` bytes as the metadata table `table` of its index lists
    /// it (its layout columns are kept): nothing is fetched.
    #[staticmethod]
    fn from_index(source: &str, size: u64, table: PyRef<'_, PyTable>, tail_guess: u64) -> PyResult<RemoteMessages> {
        crate::guard::guarded("RemoteMessages.from_index", || {
            Ok(RemoteMessages { file: RemoteFile::from_index(source, size, table.table().layout(), tail_guess).raised()? })
        })
    }

    fn __len__(&self) -> usize {
        self.file.len()
    }

    /// `(offset, length)` of message `msg`.
    fn span(&self, msg: usize) -> PyResult<(u64, u64)> {
        crate::guard::guarded("RemoteMessages.span", || {
            self.file.span(msg).raised()
        })
    }

    /// Whether message `msg`'s metadata and descriptors are at hand (or it is known corrupt).
    fn is_described(&self, msg: usize) -> PyResult<bool> {
        crate::guard::guarded("RemoteMessages.is_described", || {
            self.file.is_described(msg).raised()
        })
    }

    /// Whether reads of message `msg` need it described first: it was read by its header or
    /// footer, and its objects' payloads are found from their descriptors.
    fn reads_need_description(&self, msg: usize) -> PyResult<bool> {
        crate::guard::guarded("RemoteMessages.reads_need_description", || {
            self.file.reads_need_description(msg).raised()
        })
    }

    /// `(start, stop)` in the file of object `obj`'s data-object frame.
    fn frame_range(&self, msg: usize, obj: usize) -> PyResult<(u64, u64)> {
        crate::guard::guarded("RemoteMessages.frame_range", || {
            self.file.frame_range(msg, obj).raised()
        })
    }

    /// Checks object `obj`'s frame as fetched against the hash the table (or its index) records
    /// of it: `TgmStaleFileError` for a file republished since (`RemoteFile::check_frame`).
    fn check_frame(&self, msg: usize, obj: usize, frame: &Bound<'_, PyBytes>) -> PyResult<()> {
        crate::guard::guarded("RemoteMessages.check_frame", || {
            self.file
                .check_frame(msg, obj, frame.as_bytes())
                .map_err(|e| e.context(&format!("{}: message {msg}, object {obj}", self.file.source())))
                .raised()
        })
    }

    /// `(file offset, length)` of every data-object frame of message `msg`.
    fn frame_spans(&self, msg: usize) -> PyResult<Vec<(u64, u64)>> {
        crate::guard::guarded("RemoteMessages.frame_spans", || {
            Ok(self.file.frames(msg).raised()?.to_vec())
        })
    }

    /// The walk that fetches what describes the messages `wanted` not described yet, all in
    /// the same requests (`RemoteDescription`).
    fn describe(slf: &Bound<'_, Self>, wanted: Vec<usize>) -> PyResult<RemoteDescription> {
        crate::guard::guarded("RemoteMessages.describe", || {
            let walk = slf.get().file.describe(&wanted).raised()?;
            Ok(RemoteDescription { file: slf.clone().unbind(), walk: Some(walk) })
        })
    }

    /// Message `msg`'s metadata (described first).
    fn metadata<'py>(&self, py: Python<'py>, msg: usize) -> PyResult<Bound<'py, PyDict>> {
        crate::guard::guarded("RemoteMessages.metadata", || {
            metadata_to_py(py, self.file.metadata(msg).raised()?)
        })
    }

    /// Message `msg`'s descriptors (described first).
    fn descriptors<'py>(&self, py: Python<'py>, msg: usize) -> PyResult<Bound<'py, PyList>> {
        crate::guard::guarded("RemoteMessages.descriptors", || {
            let list = PyList::empty(py);
            for descriptor in self.file.descriptors(msg).raised()? {
                list.append(descriptor_to_py(py, descriptor)?)?;
            }
            Ok(list)
        })
    }

    /// `(shape, dtype)` of each object of message `msg`: the table's where it holds the message
    /// (nothing fetched), else from its description.
    fn object_layouts(&self, msg: usize) -> PyResult<Vec<(Vec<u64>, String)>> {
        crate::guard::guarded("RemoteMessages.object_layouts", || {
            self.file.object_layouts(msg).raised()
        })
    }

    /// `FileHandle.fingerprint` of object `obj` where it is known without fetching the payload
    /// (the frame's inline hash, or a frame read with its message), else `None`.
    fn fingerprint(&self, msg: usize, obj: usize) -> PyResult<Option<u64>> {
        crate::guard::guarded("RemoteMessages.fingerprint", || {
            self.file.fingerprint(msg, obj).raised()
        })
    }

    /// The read of `index` of object `obj` from byte ranges of its payload (`RemoteRead`), into
    /// `out` or a new array; `None` where its message is not described or the object does not
    /// qualify (`tgm_core::read::fetch`): the read then fetches the object's frame.
    #[pyo3(signature = (msg, obj, index = None, out = None))]
    fn payload_read<'py>(
        &self, py: Python<'py>, msg: usize, obj: usize, index: Option<&Bound<'py, PyAny>>, out: Option<Bound<'py, PyUntypedArray>>,
    ) -> PyResult<Option<RemoteRead>> {
        crate::guard::guarded("RemoteMessages.payload_read", || {
            let context = format!("{}: message {msg}, object {obj}", self.file.source());
            let in_context = |e: CoreError| e.context(&context).raised();
            let shape = self.file.shape(msg, obj).raised()?;
            let index = parse_index(index, shape).map_err(in_context)?;
            let out_shape = index.shape.clone();
            let read = py.detach(|| self.file.payload_read(msg, obj, &index.selection()?)).map_err(in_context)?;
            let Some(read) = read else {
                return Ok(None);
            };
            let out = out_array(py, read.descriptor(), &out_shape, out, &|| context.clone())?;
            Ok(Some(RemoteRead { read, out: out.unbind(), context }))
        })
    }
}

/// The walk of `RemoteMessages.describe`: `wanted`/`feed` until `wanted` gives `None`, then
/// `finish`, which keeps what it found.
#[pyclass(module = "tgm_xarray._core")]
pub struct RemoteDescription {
    file: Py<RemoteMessages>,
    walk: Option<Description>,
}

#[pymethods]
impl RemoteDescription {
    fn wanted(&mut self) -> PyResult<Option<Ranges>> {
        crate::guard::guarded("RemoteDescription.wanted", || {
            live(&mut self.walk)?.wanted().raised()
        })
    }

    fn feed(&mut self, fed: Vec<Bound<'_, PyBytes>>) -> PyResult<()> {
        crate::guard::guarded("RemoteDescription.feed", || {
            live(&mut self.walk)?.feed(pieces(fed)).raised()
        })
    }

    /// Keeps the descriptions: the first message found corrupt raises (the others are kept).
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        crate::guard::guarded("RemoteDescription.finish", || {
            let walk = self.walk.take().ok_or_else(spent)?;
            let file = self.file.get().file();
            py.detach(|| file.described_by(walk)).raised()
        })
    }
}

/// A read of an object from byte ranges of its payload: `wanted` once, `feed`, then `finish`,
/// which decodes into the array (the interpreter detached) and returns it.
#[pyclass(module = "tgm_xarray._core")]
pub struct RemoteRead {
    read: PayloadRead,
    out: Py<PyUntypedArray>,
    context: String,
}

#[pymethods]
impl RemoteRead {
    fn wanted(&self) -> PyResult<Option<Ranges>> {
        crate::guard::guarded("RemoteRead.wanted", || {
            self.read.wanted().map_err(|e| e.context(&self.context)).raised()
        })
    }

    fn feed(&mut self, fed: Vec<Bound<'_, PyBytes>>) -> PyResult<()> {
        crate::guard::guarded("RemoteRead.feed", || {
            self.read.feed(pieces(fed)).map_err(|e| e.context(&self.context)).raised()
        })
    }

    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyUntypedArray>> {
        crate::guard::guarded("RemoteRead.finish", || {
            let out = self.out.bind(py);
            let read = &self.read;
            let dtype = read.descriptor().dtype;
            let to = unpacked_for(out, dtype);
            fill_out(py, out, out_itemsize(dtype, to), true, |bytes| read.read(bytes, to))
                .map_err(|e| e.context(&self.context))
                .raised()?;
            Ok(out.clone())
        })
    }
}

/// Adds this module's classes and function to `_core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RemoteMessages>()?;
    m.add_class::<RemoteScan>()?;
    m.add_class::<RemoteDescription>()?;
    m.add_class::<RemoteRead>()?;
    m.add_function(wrap_pyfunction!(scan_remote, m)?)
}
