//! The core's errors raised as Python exceptions. The classes of `tgm_xarray.errors` that the
//! core raises are made here, with that module's name, and re-exported there: the binding never
//! imports the Python package.

use pyo3::exceptions::{PyIndexError, PyMemoryError, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use tgm_core::errors::{CoreError, CoreResult, Kind};

/// The classes, made once per interpreter.
struct Classes {
    error: Py<PyType>,
    format: Py<PyType>,
    codec: Py<PyType>,
    hash: Py<PyType>,
    index: Py<PyType>,
    stale: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// A class as a `class` statement in `tgm_xarray.errors` would make it: pickled, printed and
/// documented as that module's.
fn new_class(py: Python<'_>, name: &str, bases: Bound<'_, PyTuple>, doc: &str) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "tgm_xarray.errors")?;
    namespace.set_item("__doc__", doc)?;
    Ok(py.get_type::<PyType>().call1((name, bases, namespace))?.cast_into::<PyType>()?.unbind())
}

fn make_classes(py: Python<'_>) -> PyResult<Classes> {
    let error = new_class(
        py,
        "TgmError",
        PyTuple::new(py, [py.get_type::<PyValueError>()])?,
        "Base class of every tgm-xarray error.",
    )?;
    let of_error = |name: &str, doc: &str| new_class(py, name, PyTuple::new(py, [error.bind(py)])?, doc);
    Ok(Classes {
        format: of_error(
            "TgmFormatError",
            "The bytes are not a well-formed Tensogram file: truncated, corrupt or another format.",
        )?,
        codec: of_error(
            "TgmCodecError",
            "An object's encoding, filter or compression is unsupported, or its payload fails to decode.",
        )?,
        hash: of_error(
            "TgmHashMismatchError",
            "An object's stored xxh3 hash does not match its bytes (with ``verify_hash=True``).",
        )?,
        // OSError first, as io.UnsupportedOperation does: with ValueError's __new__ first in
        // line, tblib (which distributed uses to send errors back) cannot rebuild the exception.
        stale: new_class(
            py,
            "TgmStaleFileError",
            PyTuple::new(py, [py.get_type::<PyOSError>(), error.bind(py).clone()])?,
            "The file changed (was replaced or rewritten) after it was opened: reading it now would mix \
             two versions, as a pickled Dataset reopened by a dask worker would. Open it again.",
        )?,
        index: new_class(
            py,
            "TgmIndexError",
            PyTuple::new(py, [error.bind(py).clone(), py.get_type::<PyIndexError>()])?,
            "A message, object or element index is out of range.",
        )?,
        error,
    })
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || make_classes(py))
}

/// Adds the classes to the `_core` module.
pub fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let c = classes(m.py())?;
    for class in [&c.error, &c.format, &c.codec, &c.hash, &c.index, &c.stale] {
        m.add(class.bind(m.py()).name()?, class)?;
    }
    Ok(())
}

/// The core's errors and results as Python's: `err.raised()`, `result.raised()?` (a trait, not
/// `From`: the orphan rule forbids implementing a foreign trait between two foreign types).
pub trait Raised {
    type Output;
    fn raised(self) -> Self::Output;
}

impl Raised for CoreError {
    type Output = PyErr;

    fn raised(self) -> PyErr {
        let class = |pick: fn(&Classes) -> &Py<PyType>, message: String| {
            Python::attach(|py| match classes(py) {
                Ok(c) => PyErr::from_type(pick(c).bind(py).clone(), message),
                Err(err) => err,
            })
        };
        match self.kind {
            Kind::Format => class(|c| &c.format, self.message),
            Kind::Codec => class(|c| &c.codec, self.message),
            Kind::Hash => class(|c| &c.hash, self.message),
            Kind::Stale => class(|c| &c.stale, self.message),
            Kind::Internal => class(|c| &c.error, self.message),
            Kind::Index => class(|c| &c.index, self.message),
            Kind::Value => PyValueError::new_err(self.message),
            Kind::Type => PyTypeError::new_err(self.message),
            Kind::Memory => PyMemoryError::new_err(self.message),
            Kind::Os => PyOSError::new_err(self.message),
        }
    }
}

impl<T> Raised for CoreResult<T> {
    type Output = PyResult<T>;

    fn raised(self) -> PyResult<T> {
        self.map_err(CoreError::raised)
    }
}
