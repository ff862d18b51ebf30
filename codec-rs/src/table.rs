//! The metadata table (`tgm_core::table`) as the dict `MetadataTable.from_core` takes: of files
//! (mapped and remote) and of messages in memory.

use std::borrow::Cow;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tgm_core::table::{Column, KeyColumns, Table};

use crate::cbor::to_py;
use tgm_core::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, FileHandle};
use tgm_core::source::mapped_file::{index_messages, MappedFile};
use crate::remote::RemoteMessages;

/// Builds the table of `messages` (`(offset, bytes)` each) with the interpreter released;
/// `where_(i)` names message `i` in an error.
pub fn scan<'a>(
    py: Python<'_>,
    messages: impl IntoIterator<Item = (usize, &'a [u8])> + Send,
    where_: impl Fn(usize) -> String + Send,
) -> PyResult<Table> {
    py.detach(|| tgm_core::table::scan(messages, where_)).raised()
}

fn column<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyAny>> {
    let values = PyList::empty(py);
    for v in &c.values {
        values.append(to_py(py, v)?)?;
    }
    Ok((PyArray1::from_slice(py, &c.codes), values).into_pyobject(py)?.into_any())
}

/// `KeyColumns`' fields, as `tgm_xarray.table.KeyColumns` takes them (less its row count).
fn key_columns<'py>(py: Python<'py>, c: &KeyColumns) -> PyResult<Bound<'py, PyDict>> {
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
    Ok(dict)
}

/// The fields of `tgm_xarray.table.MetadataTable`.
pub fn to_py_dict<'py>(py: Python<'py>, t: &Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_messages", t.n_messages)?;
    for (name, v) in [
        ("msg", &t.msg),
        ("obj", &t.obj),
        ("frame_start", &t.frame_start),
        ("frame_end", &t.frame_end),
        ("payload_start", &t.payload_start),
        ("payload_end", &t.payload_end),
        ("message_offset", &t.message_offset),
        ("message_length", &t.message_length),
    ] {
        d.set_item(name, PyArray1::from_slice(py, v))?;
    }
    d.set_item("shape", PyArray1::from_slice(py, &t.shape))?;
    d.set_item("shapes", t.shapes.clone())?;
    d.set_item("descriptor", PyArray1::from_slice(py, &t.descriptor))?;
    let descriptors = PyList::empty(py);
    for desc in &t.descriptors {
        let dict = descriptor_to_py(py, desc)?;
        dict.del_item("params")?;
        descriptors.append(dict)?;
    }
    d.set_item("descriptors", descriptors)?;
    d.set_item("own", key_columns(py, &t.own)?)?;
    d.set_item("codec_params", key_columns(py, &t.codec_params)?)?;
    d.set_item("extra", key_columns(py, &t.extra)?)?;
    d.set_item("own_dim_names", column(py, &t.own_dim_names)?)?;
    d.set_item("extra_dim_names", column(py, &t.extra_dim_names)?)?;
    d.set_item("coordinate_attrs", column(py, &t.coordinate_attrs)?)?;
    d.set_item("frame_hash", PyArray1::from_slice(py, &t.frame_hash))?;
    d.set_item("has_frame_hash", PyArray1::from_slice(py, &t.has_frame_hash))?;
    Ok(d)
}

/// One table over several files, in the order given (`FileHandle`s and `RemoteMessages`):
/// messages are numbered on from one file to the next; byte ranges stay within each message's
/// own file. Mapped files are scanned here with the interpreter released; remote files give the
/// table of their scan, or of their messages read by their header once those are described
/// (`RemoteMessages.describe`).
#[pyfunction]
pub fn table_of_files<'py>(py: Python<'py>, files: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    crate::guard::guarded("table_of_files", || {
        let sources = files.iter().enumerate().map(|(i, f)| Source::of(i, f)).collect::<PyResult<Vec<_>>>()?;
        if let Some(mapped) = sources.iter().map(Source::mapped).collect::<Option<Vec<_>>>() {
            return scan_mapped(py, &mapped).and_then(|t| to_py_dict(py, &t));
        }
        let tables = sources
            .iter()
            .map(|s| match s {
                Source::Mapped(h) => scan_mapped(py, &[h.file()]).map(Cow::Owned),
                Source::Remote(r) => r.file().table().raised(),
            })
            .collect::<PyResult<Vec<_>>>()?;
        match &tables[..] {
            [one] => to_py_dict(py, one),
            _ => {
                let tables: Vec<&Table> = tables.iter().map(|t| t.as_ref()).collect();
                to_py_dict(py, &py.detach(|| tgm_core::table::concat(&tables)))
            }
        }
    })
}

/// The table of the messages in `data` (whole messages one after the other, as a file holds
/// them; none when empty).
#[pyfunction]
pub fn table_of_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    crate::guard::guarded("table_of_bytes", || {
        let spans = if data.is_empty() { Vec::new() } else { index_messages(data).raised()? };
        let table = scan(py, spans.iter().map(|&(offset, length)| (offset, &data[offset..offset + length])), |m| format!("message {m}"))?;
        to_py_dict(py, &table)
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
