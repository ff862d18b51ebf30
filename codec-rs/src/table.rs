//! The metadata table (`tgm_core::table`) as the dict `MetadataTable.from_core` takes.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tgm_core::table::{Column, Table};

use crate::cbor::to_py;
use crate::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, FileHandle};
use crate::mapped_file::MappedFile;
use crate::remote::RemoteMessages;

/// Builds the table of `messages` (`(offset, bytes)` each) with the interpreter released;
/// `where_(i)` names message `i` in an error.
pub fn scan<'a>(
    py: Python<'_>,
    messages: impl IntoIterator<Item = (usize, &'a [u8])> + Send,
    where_: impl Fn(usize) -> String,
) -> PyResult<Table> {
    py.detach(|| tgm_core::table::scan(messages))
        .map_err(|e| CoreError::new(Kind::Format, format!("{}: {}", where_(e.message), e.error)).raised())
}

fn column<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyAny>> {
    let values = PyList::empty(py);
    for v in &c.values {
        values.append(to_py(py, v)?)?;
    }
    Ok((PyArray1::from_slice(py, &c.codes), values).into_pyobject(py)?.into_any())
}

fn columns<'py>(py: Python<'py>, cols: &[(String, Column)]) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, c) in cols {
        dict.set_item(key, column(py, c)?)?;
    }
    Ok(dict)
}

/// The fields of `tgm_xarray.hypercube.table.MetadataTable`.
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
    d.set_item("own", columns(py, &t.own)?)?;
    d.set_item("codec_params", columns(py, &t.codec_params)?)?;
    d.set_item("extra", columns(py, &t.extra)?)?;
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
/// table their scan built (`None` when one has none: its large messages were read by their
/// header, and their dicts make the table: `MetadataTable.from_messages`).
#[pyfunction]
pub fn table_of_files<'py>(py: Python<'py>, files: Vec<Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let mapped: Vec<Option<PyRef<'py, FileHandle>>> = files.iter().map(|f| f.extract().ok()).collect();
    let remote: Vec<Option<PyRef<'py, RemoteMessages>>> = files.iter().map(|f| f.extract().ok()).collect();
    if let Some(i) = (0..files.len()).find(|&i| mapped[i].is_none() && remote[i].is_none()) {
        let kind = files[i].get_type().name()?;
        return Err(CoreError::new(Kind::Type, format!("files[{i}] is a {kind}, not a FileHandle or RemoteMessages")).raised());
    }
    if mapped.iter().all(Option::is_some) {
        let files: Vec<&MappedFile> = mapped.iter().flatten().map(|h| h.file()).collect();
        return scan_mapped(py, &files).and_then(|t| to_py_dict(py, &t)).map(Some);
    }
    let mut scanned = Vec::with_capacity(files.len());
    for handle in &mapped {
        scanned.push(handle.as_ref().map(|h| scan_mapped(py, &[h.file()])).transpose()?);
    }
    let mut tables = Vec::with_capacity(files.len());
    for (own, remote) in scanned.iter().zip(&remote) {
        match own.as_ref().or_else(|| remote.as_ref().and_then(|r| r.table())) {
            Some(table) => tables.push(table),
            None => return Ok(None),
        }
    }
    match tables[..] {
        [one] => to_py_dict(py, one),
        _ => to_py_dict(py, &py.detach(|| tgm_core::table::concat(&tables))),
    }
    .map(Some)
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
