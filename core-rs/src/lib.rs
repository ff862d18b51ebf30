//! The PyO3-free core of tgm-xarray: format rules on top of the `tensogram` crate, and the read
//! paths, that the Python binding (`codec-rs`) exposes. Nothing here needs an interpreter:
//! `cargo test -p tgm-core` runs without Python.

pub mod buffers;
pub mod cbor;
pub mod counters;
pub mod dtypes;
pub mod encode;
pub mod errors;
pub mod fetch;
pub mod frame;
pub mod mapped_file;
pub mod message;
pub mod packing;
pub mod parallel;
pub mod params;
pub mod read;
pub mod selection;
pub mod szip;
pub mod table;
pub mod remote_file;
pub mod remote_walk;
#[cfg(test)]
mod testing;

/// The version of the `tensogram` crate this core is built with (Cargo.lock's, by build.rs).
pub const TENSOGRAM_VERSION: &str = env!("TGM_TENSOGRAM_VERSION");
