//! `FileHandle`: a mapped `.tgm` file (`tgm_core::source::mapped_file`) and its Python methods.

use numpy::{PyArray1, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::cbor::{map_to_py, to_py};
use tgm_core::errors::CoreResult;
use crate::exceptions::Raised;
use tgm_core::source::mapped_file::MappedFile;
use tgm_core::source::message::ParsedMessage;
use crate::index::parse_index;
use crate::table::PyTable;
use crate::read_into::{read_into_out, read_to_array};
use tgm_core::read::object::{check_hash, Verify};
use tensogram::{DataObjectDescriptor, GlobalMetadata};
use tgm_core::encoding::szip;
use tgm_core::table::RESERVED_KEY;

/// A `.tgm` file mapped once and shared by every thread: `&self` methods only.
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct FileHandle {
    file: MappedFile,
}

impl FileHandle {
    pub(crate) fn file(&self) -> &MappedFile {
        &self.file
    }

    /// `file.message(msg)` from attached code: parsing is the only slow lookup, so the
    /// interpreter is released only for a message not parsed yet (a release costs a wake-up on
    /// GIL builds).
    fn message_attached(&self, py: Python<'_>, msg: i64) -> CoreResult<&ParsedMessage> {
        if self.file.is_parsed(msg) {
            self.file.message(msg)
        } else {
            py.detach(|| self.file.message(msg))
        }
    }

    /// `file.object(msg, obj)` from attached code (see `message_attached`).
    fn object_attached(&self, py: Python<'_>, msg: i64, obj: i64) -> CoreResult<(&ParsedMessage, usize)> {
        self.message_attached(py, msg)?;
        self.file.object(msg, obj)
    }
}

/// The descriptor of an object as a Python dict (the wire keys, without the szip offset table
/// and its verification mark: internal indexes, not settings).
pub(crate) fn descriptor_to_py<'py>(py: Python<'py>, d: &DataObjectDescriptor) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("type", &d.obj_type)?;
    dict.set_item("ndim", d.ndim)?;
    dict.set_item("shape", d.shape.clone())?;
    dict.set_item("strides", d.strides.clone())?;
    dict.set_item("dtype", d.dtype.to_string())?;
    dict.set_item("byte_order", format!("{:?}", d.byte_order).to_lowercase())?;
    dict.set_item("encoding", &d.encoding)?;
    dict.set_item("filter", &d.filter)?;
    dict.set_item("compression", &d.compression)?;
    let masks = PyList::empty(py);
    if let Some(m) = &d.masks {
        for (name, present) in [("nan", m.nan.is_some()), ("pos_inf", m.pos_inf.is_some()), ("neg_inf", m.neg_inf.is_some())] {
            if present {
                masks.append(name)?;
            }
        }
    }
    dict.set_item("masks", masks)?;
    let params = PyDict::new(py);
    for (k, v) in d.params.iter().filter(|(k, _)| !k.starts_with(szip::OFFSETS_KEY)) {
        params.set_item(k, to_py(py, v)?)?;
    }
    dict.set_item("params", params)?;
    Ok(dict)
}

/// Message metadata as `{"base": [...], "_extra_": {...}, "_reserved_": {...}}`.
pub(crate) fn metadata_to_py<'py>(py: Python<'py>, meta: &GlobalMetadata) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let base = PyList::empty(py);
    for entry in &meta.base {
        base.append(map_to_py(py, entry)?)?;
    }
    dict.set_item("base", base)?;
    dict.set_item("_extra_", map_to_py(py, &meta.extra)?)?;
    dict.set_item(RESERVED_KEY, map_to_py(py, &meta.reserved)?)?;
    Ok(dict)
}

#[pymethods]
impl FileHandle {
    /// Maps `path`; `complete_only`: a file cut short keeps its complete messages (`cut` says
    /// why the rest is none) instead of raising.
    #[new]
    #[pyo3(signature = (path, complete_only = false))]
    fn py_new(py: Python<'_>, path: &str, complete_only: bool) -> PyResult<FileHandle> {
        crate::guard::guarded("FileHandle.__new__", || {
            let open = if complete_only { MappedFile::open_complete } else { MappedFile::open };
            py.detach(|| open(path)).raised().map(|file| FileHandle { file })
        })
    }

    /// Why the end of a file opened with `complete_only` is no message (its error's text), or
    /// `None` where the messages fill the file.
    #[getter]
    fn cut(&self) -> Option<String> {
        self.file.cut().map(|e| e.message.clone())
    }

    #[getter]
    fn path(&self) -> &str {
        self.file.path()
    }

    #[getter]
    fn file_size(&self) -> usize {
        self.file.size()
    }

    fn __len__(&self) -> usize {
        self.file.message_count()
    }

    fn __repr__(&self) -> String {
        format!("<FileHandle {:?}: {} messages>", self.file.path(), self.file.message_count())
    }

    /// `(offset, length)` of message `msg` in the file.
    fn message_span(&self, msg: i64) -> PyResult<(usize, usize)> {
        crate::guard::guarded("FileHandle.message_span", || {
            Ok(self.file.spans()[self.file.check_message(msg).raised()?])
        })
    }

    /// Parses every message's frames (detached); later metadata calls cost no parsing.
    fn parse_all(&self, py: Python<'_>) -> PyResult<()> {
        crate::guard::guarded("FileHandle.parse_all", || {
            py.detach(|| (0..self.file.message_count() as i64).try_for_each(|i| self.file.message(i).map(|_| ()))).raised()?;
            Ok(())
        })
    }

    /// The message's metadata: `{"base": [...], "_extra_": {...}, "_reserved_": {...}}`.
    fn metadata<'py>(&self, py: Python<'py>, msg: i64) -> PyResult<Bound<'py, PyDict>> {
        crate::guard::guarded("FileHandle.metadata", || {
            let parsed = self.message_attached(py, msg).raised()?;
            metadata_to_py(py, &parsed.metadata)
        })
    }

    /// The descriptors of the message's objects, as dicts.
    fn descriptors<'py>(&self, py: Python<'py>, msg: i64) -> PyResult<Bound<'py, PyList>> {
        crate::guard::guarded("FileHandle.descriptors", || {
            let parsed = self.message_attached(py, msg).raised()?;
            let list = PyList::empty(py);
            for entry in &parsed.objects {
                list.append(descriptor_to_py(py, &entry.descriptor)?)?;
            }
            Ok(list)
        })
    }

    /// `(shape, dtype)` of each of the message's objects.
    fn object_layouts(&self, py: Python<'_>, msg: i64) -> PyResult<Vec<(Vec<u64>, String)>> {
        crate::guard::guarded("FileHandle.object_layouts", || {
            let parsed = self.message_attached(py, msg).raised()?;
            Ok(parsed.objects.iter().map(|o| (o.descriptor.shape.clone(), o.descriptor.dtype.to_string())).collect())
        })
    }

    /// Checks object `obj`'s stored hash against its bytes without decoding it: `True` when it
    /// holds, `False` when the object was written without one; `TgmHashMismatchError` else.
    fn check_hash(&self, py: Python<'_>, msg: i64, obj: i64) -> PyResult<bool> {
        crate::guard::guarded("FileHandle.check_hash", || {
            py.detach(|| -> CoreResult<bool> {
                let (parsed, o) = self.file.object(msg, obj)?;
                check_hash(self.file.message_bytes(msg as usize), &parsed.objects[o])
                    .map_err(|e| e.context(&format!("{}: message {msg}, object {o}", self.file.path())))
            })
            .raised()
        })
    }

    /// An identity of the object's stored bytes (`tgm_core::source::message::fingerprint`):
    /// equal for objects stored identically.
    fn fingerprint(&self, py: Python<'_>, msg: i64, obj: i64) -> PyResult<u64> {
        crate::guard::guarded("FileHandle.fingerprint", || {
            py.detach(|| -> CoreResult<u64> {
                let (parsed, obj) = self.file.object(msg, obj)?;
                Ok(parsed.objects[obj].fingerprint(self.file.message_bytes(msg as usize)))
            })
            .raised()
        })
    }

    /// Every object's `fingerprint`, as the rows of `table` (this file's table: message, then
    /// object order), in one call with the interpreter released: from the inline hashes the
    /// table holds, and the frames without one hashed here. `TgmFormatError` for a table of
    /// other messages.
    fn fingerprints<'py>(&self, py: Python<'py>, table: &Bound<'py, PyTable>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        crate::guard::guarded("FileHandle.fingerprints", || {
            let table = table.get().table();
            let prints = py.detach(|| {
                let prints = table.fingerprints_in(&self.file);
                if table.has_frame_hash.contains(&false) {
                    self.file.release_all(); // the frames hashed, as a scan does its pages
                }
                prints
            });
            Ok(PyArray1::from_vec(py, prints.raised()?))
        })
    }

    /// Reads `index` of object `obj` of message `msg` (numpy outer indexing: slices, ints, 1-D
    /// integer or boolean arrays, `...`) into `out`, or into a new array, and returns it. One
    /// call does all: the index is resolved here and the interpreter is released once, for the
    /// decode, so reads from many threads spend next to no time holding it. `threads`: at most
    /// this many threads decode one large read (`None`: the process-wide budget decides, see
    /// docs/architecture.md).
    #[pyo3(signature = (msg, obj, index = None, out = None, verify_hash = None, threads = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn read<'py>(
        &self,
        py: Python<'py>,
        msg: i64,
        obj: i64,
        index: Option<&Bound<'py, PyAny>>,
        out: Option<Bound<'py, PyUntypedArray>>,
        verify_hash: Option<bool>,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyUntypedArray>> {
        crate::guard::guarded("FileHandle.read", || {
            let (parsed, obj) = self.object_attached(py, msg, obj).raised()?;
            let where_ = || format!("{}: message {msg}, object {obj}", self.file.path());
            read_to_array(py, self.file.message_bytes(msg as usize), &parsed.objects[obj], index, out, Verify::from_flag(verify_hash), threads, &where_)
        })
    }

    /// Reads `selection` of object `obj` of message `msg` into `out` (see docs/architecture.md).
    #[pyo3(signature = (msg, obj, selection, out, verify_hash = None, threads = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn read_into(
        &self,
        py: Python<'_>,
        msg: i64,
        obj: i64,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyUntypedArray>,
        verify_hash: Option<bool>,
        threads: Option<usize>,
    ) -> PyResult<()> {
        crate::guard::guarded("FileHandle.read_into", || {
            let (parsed, obj) = self.object_attached(py, msg, obj).raised()?;
            let entry = &parsed.objects[obj];
            let where_ = || format!("{}: message {msg}, object {obj}", self.file.path());
            let bytes = self.file.message_bytes(msg as usize);
            parse_index(selection, &entry.descriptor.shape)
                .and_then(|index| read_into_out(py, bytes, entry, index, out, Verify::from_flag(verify_hash), threads))
                .map_err(|e| e.context(&where_()).raised())
        })
    }
}
