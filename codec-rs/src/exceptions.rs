//! The core's errors raised as Python exceptions: the classes of `tgm_xarray.errors`.

use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::{CoreError, CoreResult, Kind};

/// The core's errors and results as Python's: `err.raised()`, `result.raised()?` (a trait, not
/// `From`: the orphan rule forbids implementing a foreign trait between two foreign types).
pub trait Raised {
    type Output;
    fn raised(self) -> Self::Output;
}

impl Raised for CoreError {
    type Output = PyErr;

    fn raised(self) -> PyErr {
        let class = match self.kind {
            Kind::Format => "TgmFormatError",
            Kind::Codec => "TgmCodecError",
            Kind::Hash => "TgmHashMismatchError",
            Kind::Index => "TgmIndexError",
            Kind::Value => return PyValueError::new_err(self.message),
            Kind::Type => return PyTypeError::new_err(self.message),
            Kind::Memory => return PyMemoryError::new_err(self.message),
        };
        Python::attach(|py| {
            match py.import("tgm_xarray.errors").and_then(|m| m.getattr(class)) {
                Ok(cls) => PyErr::from_type(cls.cast_into().expect("an exception class"), self.message),
                Err(import_err) => import_err,
            }
        })
    }
}

impl<T> Raised for CoreResult<T> {
    type Output = PyResult<T>;

    fn raised(self) -> PyResult<T> {
        self.map_err(CoreError::raised)
    }
}
