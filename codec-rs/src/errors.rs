//! Errors of the core, raised in Python as the classes of `tgm_xarray.errors`.

use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use tensogram::TensogramError;

/// Which `tgm_xarray.errors` class an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Format,
    Codec,
    Hash,
    Index,
    Value,
    Type,
    /// An allocation failed: `MemoryError`, as numpy raises.
    Memory,
}

/// An error with its full, user-facing message (file, message and object included).
#[derive(Debug, Clone)]
pub struct CoreError {
    pub kind: Kind,
    pub message: String,
}

pub type CoreResult<T> = Result<T, CoreError>;

impl CoreError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        CoreError { kind, message: message.into() }
    }

    /// Classifies an error of the `tensogram` crate and prefixes it with where it happened.
    pub fn from_tensogram(err: &TensogramError, context: &str) -> Self {
        let kind = match err {
            TensogramError::HashMismatch { .. } | TensogramError::MissingHash { .. } => Kind::Hash,
            TensogramError::Object(_) => Kind::Index,
            TensogramError::Encoding(_) | TensogramError::Compression(_) => Kind::Codec,
            _ => Kind::Format,
        };
        CoreError::new(kind, format!("{context}: {err}"))
    }

    /// An allocation of `bytes` that failed.
    pub fn out_of_memory(bytes: impl std::fmt::Display, what: &str) -> Self {
        CoreError::new(Kind::Memory, format!("cannot allocate {bytes} bytes for {what}"))
    }

    /// Prefixes the message with more context (the file, the message, the object).
    pub fn context(self, prefix: &str) -> Self {
        CoreError { kind: self.kind, message: format!("{prefix}: {}", self.message) }
    }
}

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> PyErr {
        let class = match err.kind {
            Kind::Format => "TgmFormatError",
            Kind::Codec => "TgmCodecError",
            Kind::Hash => "TgmHashMismatchError",
            Kind::Index => "TgmIndexError",
            Kind::Value => return PyValueError::new_err(err.message),
            Kind::Type => return PyTypeError::new_err(err.message),
            Kind::Memory => return PyMemoryError::new_err(err.message),
        };
        Python::attach(|py| {
            match py.import("tgm_xarray.errors").and_then(|m| m.getattr(class)) {
                Ok(cls) => PyErr::from_type(cls.cast_into().expect("an exception class"), err.message),
                Err(import_err) => import_err,
            }
        })
    }
}
