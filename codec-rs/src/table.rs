//! The metadata table (`tgm_core::table`) as a frozen class: of files (mapped and remote) and of
//! messages in memory.

use std::borrow::Cow;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tgm_core::table::{Column, Field, KeyColumns, Rows, Table};

use crate::cbor::to_py;
use tgm_core::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, FileHandle};
use tgm_core::source::mapped_file::{index_messages, MappedFile};
use crate::remote::RemoteMessages;

/// Builds the table of `messages` (`(offset, bytes)` each) with the interpreter released;
/// `where_(i)` names message `i` in an error.
///
/// The blocks the table's columns outgrew while it was built are then freed, not kept in the
/// buffer pool: they are of sizes no read asks for, and the planner, whose memory is numpy's,
/// ran beside them (62 MB of the 386 MB peak of opening 100,000 messages).
pub fn scan<'a>(
    py: Python<'_>,
    messages: impl IntoIterator<Item = (usize, &'a [u8])> + Send,
    where_: impl Fn(usize) -> String + Send,
) -> PyResult<Table> {
    let table = py.detach(|| tgm_core::table::scan(messages, where_));
    crate::buffers::drain();
    table.raised()
}

fn codes<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyAny>> {
    let values = PyList::empty(py);
    for v in &c.values {
        values.append(to_py(py, v)?)?;
    }
    Ok((PyArray1::from_slice(py, &c.codes), values).into_pyobject(py)?.into_any())
}

/// `KeyColumns`' fields over `n` rows, as `tgm_xarray.table.KeyColumns` takes them.
fn key_columns<'py>(py: Python<'py>, c: &KeyColumns, n: usize) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("names", PyList::new(py, c.keys.iter().map(String::as_str))?)?;
    // One flat list (a list per key would be a Python object per key: collector passes over
    // hundreds of thousands of them cost more than the scan).
    let values = PyList::new(py, c.values.iter().map(|v| to_py(py, v)).collect::<PyResult<Vec<_>>>()?)?;
    dict.set_item("values", values)?;
    dict.set_item("value_starts", PyArray1::from_slice(py, &c.value_starts))?;
    dict.set_item("rows", PyArray1::from_slice(py, &c.rows))?;
    dict.set_item("key", PyArray1::from_slice(py, &c.key))?;
    dict.set_item("code", PyArray1::from_slice(py, &c.code))?;
    dict.set_item("n", n)?;
    Ok(dict.into_any())
}

/// A file's metadata table (`tgm_core::table::Table`), frozen: `tgm_xarray.table.MetadataTable`
/// is the view of it. Its columns come by name (`column`), as the core lists them; it keeps
/// and pickles as the core's stored form (`to_bytes`, `from_bytes`).
#[pyclass(frozen, name = "Table", module = "tgm_xarray._core")]
pub struct PyTable {
    table: Table,
}

impl PyTable {
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }
}

#[pymethods]
impl PyTable {
    #[getter]
    fn n_messages(&self) -> usize {
        self.table.n_messages
    }

    /// The number of objects (rows).
    fn __len__(&self) -> usize {
        self.table.msg.len()
    }

    /// The columns' names, in the core's order.
    #[getter]
    fn columns(&self) -> Vec<&'static str> {
        self.table.columns().into_iter().map(|(name, _, _)| name).collect()
    }

    /// Column `name` as `(kind, value)`: `"array"` (a numpy array), `"codes"` (`(codes,
    /// values)`), `"keys"` (`KeyColumns`' fields), `"shapes"` (tuples), `"descriptors"` (dicts,
    /// without `params`); `KeyError` for a name that is no column.
    fn column<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
        crate::guard::guarded("Table.column", || {
            let Some((_, rows, field)) = self.table.columns().into_iter().find(|(n, _, _)| *n == name) else {
                return Err(pyo3::exceptions::PyKeyError::new_err(name.to_owned()));
            };
            let n = if rows == Rows::Messages { self.table.n_messages } else { self.table.msg.len() };
            Ok(match field {
                Field::I64(v) => ("array", PyArray1::from_slice(py, v).into_any()),
                Field::I32(v) => ("array", PyArray1::from_slice(py, v).into_any()),
                Field::U64(v) => ("array", PyArray1::from_slice(py, v).into_any()),
                Field::Bool(v) => ("array", PyArray1::from_slice(py, v).into_any()),
                Field::Shapes(v) => ("shapes", PyList::new(py, v.iter().map(|s| PyTuple::new(py, s)).collect::<PyResult<Vec<_>>>()?)?.into_any()),
                Field::Descriptors(v) => {
                    let descriptors = PyList::empty(py);
                    for desc in v {
                        let dict = descriptor_to_py(py, desc)?;
                        dict.del_item("params")?;
                        descriptors.append(dict)?;
                    }
                    ("descriptors", descriptors.into_any())
                }
                Field::Codes(c) => ("codes", codes(py, c)?),
                Field::Keys(k) => ("keys", key_columns(py, k, n)?),
            })
        })
    }

    /// Each row's fingerprint (`FileHandle.fingerprint`'s) where its frame's inline hash gives
    /// it, without a byte of the file; 0 where the frame has none (`has_frame_hash` says which:
    /// `FileHandle.fingerprints` hashes those frames).
    fn fingerprints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        crate::guard::guarded("Table.fingerprints", || {
            let prints = py.detach(|| self.table.fingerprints(|_| Ok(None))).raised()?;
            Ok(PyArray1::from_vec(py, prints.into_iter().map(|p| p.unwrap_or(0)).collect()))
        })
    }

    /// The table's stored form (`tgm_core::table::TABLE_FORMAT`), for an index.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        crate::guard::guarded("Table.to_bytes", || {
            let bytes = py.detach(|| self.table.to_bytes());
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// The table `to_bytes` gave; `TgmFormatError` for bytes of another version or that are no
    /// consistent table.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<PyTable> {
        crate::guard::guarded("Table.from_bytes", || {
            Ok(PyTable { table: py.detach(|| Table::from_bytes(data)).raised()? })
        })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((slf.get_type().getattr("from_bytes")?, (slf.get().to_bytes(slf.py())?,)))
    }
}

/// One table over several files, in the order given (`FileHandle`s and `RemoteMessages`):
/// messages are numbered on from one file to the next; byte ranges stay within each message's
/// own file. Mapped files are scanned here with the interpreter released; remote files give the
/// table of their scan, or of their messages read by their header once those are described
/// (`RemoteMessages.describe`).
#[pyfunction]
pub fn table_of_files<'py>(py: Python<'py>, files: Vec<Bound<'py, PyAny>>) -> PyResult<PyTable> {
    crate::guard::guarded("table_of_files", || {
        let sources = files.iter().enumerate().map(|(i, f)| Source::of(i, f)).collect::<PyResult<Vec<_>>>()?;
        if let Some(mapped) = sources.iter().map(Source::mapped).collect::<Option<Vec<_>>>() {
            return scan_mapped(py, &mapped).map(|table| PyTable { table });
        }
        let tables = sources
            .iter()
            .map(|s| match s {
                Source::Mapped(h) => scan_mapped(py, &[h.file()]).map(Cow::Owned),
                Source::Remote(r) => r.file().table().raised(),
            })
            .collect::<PyResult<Vec<_>>>()?;
        match &tables[..] {
            [one] => Ok(PyTable { table: one.as_ref().clone() }),
            _ => {
                let tables: Vec<&Table> = tables.iter().map(|t| t.as_ref()).collect();
                Ok(PyTable { table: py.detach(|| tgm_core::table::concat(&tables)) })
            }
        }
    })
}

/// The table of the messages in `data` (whole messages one after the other, as a file holds
/// them; none when empty).
#[pyfunction]
pub fn table_of_bytes(py: Python<'_>, data: &[u8]) -> PyResult<PyTable> {
    crate::guard::guarded("table_of_bytes", || {
        let spans = if data.is_empty() { Vec::new() } else { index_messages(data).raised()? };
        let table = scan(py, spans.iter().map(|&(offset, length)| (offset, &data[offset..offset + length])), |m| format!("message {m}"))?;
        Ok(PyTable { table })
    })
}

/// One file of `table_of_files`.
enum Source<'py> {
    Mapped(PyRef<'py, FileHandle>),
    Remote(PyRef<'py, RemoteMessages>),
}

impl<'py> Source<'py> {
    fn of(i: usize, file: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(handle) = file.extract() {
            return Ok(Source::Mapped(handle));
        }
        if let Ok(remote) = file.extract() {
            return Ok(Source::Remote(remote));
        }
        let kind = file.get_type().name()?;
        Err(CoreError::new(Kind::Type, format!("files[{i}] is a {kind}, not a FileHandle or RemoteMessages")).raised())
    }

    fn mapped(&self) -> Option<&MappedFile> {
        match self {
            Source::Mapped(h) => Some(h.file()),
            Source::Remote(_) => None,
        }
    }
}

/// One scan over the messages of `files`, numbered on from one file to the next.
fn scan_mapped(py: Python<'_>, files: &[&MappedFile]) -> PyResult<Table> {
    let where_ = |mut m: usize| {
        for f in files {
            if m < f.message_count() {
                return format!("{}: message {m}", f.path());
            }
            m -= f.message_count();
        }
        format!("message {m}")
    };
    let table = scan(py, files.iter().flat_map(|f| f.messages()), where_);
    files.iter().for_each(|f| f.release_all());
    table
}
