//! Errors of the core: a kind and a full message. The binding raises each kind as its Python
//! exception class (`codec-rs/src/exceptions.rs`).

use tensogram::TensogramError;

/// Which Python exception class an error becomes.
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
    /// The operating system refused (opening or mapping a file): `OSError`.
    Os,
    /// The file's bytes are not those its table (or index) describes: it changed since it was
    /// opened or indexed (`TgmStaleFileError`).
    Stale,    /// A bug: a panic caught at the binding's wall (`TgmError`, see codec-rs/src/guard.rs).
    Internal,
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

    /// A file's bytes break a format rule: `TgmFormatError`.
    pub fn format(message: impl Into<String>) -> Self {
        CoreError::new(Kind::Format, message)
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
