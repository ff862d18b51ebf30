//! The PyO3-free core of tgm-xarray: format rules on top of the `tensogram` crate, and the read
//! paths, that the Python binding (`codec-rs`) exposes. Nothing here needs an interpreter:
//! `cargo test -p tgm-core` runs without Python.

pub mod buffers;
pub mod counters;
pub mod encoding;
pub mod errors;
pub mod parallel;
pub mod read;
pub mod source;
pub mod table;
pub mod wire;
#[cfg(test)]
mod testing;

/// The version of the `tensogram` crate this core is built with (Cargo.lock's, by build.rs).
pub const TENSOGRAM_VERSION: &str = env!("TGM_TENSOGRAM_VERSION");
